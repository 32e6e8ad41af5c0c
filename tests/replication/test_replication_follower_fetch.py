"""Fetching from the closest replica (KIP-392): with `replica.selector.class` set to Kafka's
RackAwareReplicaSelector, a leader tells a consumer that names its rack (`client.rack`) to
read from the in-sync follower in that rack (`preferred_read_replica`), the follower serves
it up to its high watermark, and a consumer that names no rack before Fetch v11 still gets
NOT_LEADER_OR_FOLLOWER there. Three `ads broker` processes in racks r1-r3 on a real
ZooKeeper; librdkafka's consumer reads a topic whose leader is in another rack, and the
follower's /metrics show the bytes it sent to consumers."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from broker_process import free_port
from cluster_support import Cluster
from kafka_wire import RawConnection
from replication_support import create, produce

SELECTOR = "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"
F = m.FetchRequest


def _fetch(bootstrap: str, version: int, rack: str, offset: int = 0
           ) -> m.FetchResponse.FetchableTopicResponse.PartitionData:
    topic = F.FetchTopic(topic="near", partitions=[F.FetchTopic.FetchPartition(
        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                isolation_level=0, topics=[topic], rack_id=rack)
    with RawConnection(bootstrap) as conn:
        response = conn.request(m.ApiKey.FETCH, version, request)
    return response.responses[0].partitions[0]


def _bytes_out(port: int, topic: str) -> float:
    """Bytes a broker sent to consumers (not followers) for the topic, from its /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    found = re.search(rf'^ads_topic_bytes_out(?:_total)?{{topic="{topic}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.broker_process
def test_follower_fetch_rack_aware(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 3, SELECTOR)
    ports = {}
    for node, broker in cluster.brokers.items():
        ports[node] = free_port()
        broker.sets = (*broker.sets, f"broker.rack=r{node}",
                       f"http.listener=127.0.0.1:{ports[node]}")
    cluster.start()
    try:
        create(cluster, "near", 1, 3)
        values = [b"v%03d" % i for i in range(300)]
        assert produce(cluster.bootstrap, "near", values) == []

        def partition() -> object:
            return cluster.admin().list_topics("near", timeout=10).topics["near"].partitions[0]

        # Followers join the ISR once they have caught up.
        cluster.wait_for(lambda: sorted(partition().isrs) == [1, 2, 3], "a full ISR")
        leader = partition().leader
        follower = next(n for n in sorted(cluster.brokers) if n != leader)
        rack = f"r{follower}"

        # The leader names the follower in the consumer's rack instead of answering records.
        at_leader = _fetch(cluster.brokers[leader].bootstrap, 12, rack)
        assert (at_leader.error_code, at_leader.preferred_read_replica) == (0, follower)
        assert not at_leader.records
        # Its own rack, or none: the leader answers.
        assert _fetch(cluster.brokers[leader].bootstrap, 12, f"r{leader}").records
        assert _fetch(cluster.brokers[leader].bootstrap, 12, "").preferred_read_replica == -1

        # The follower serves a v11+ consumer, once its high watermark has the records.
        deadline = time.monotonic() + 15
        at_follower = _fetch(cluster.brokers[follower].bootstrap, 12, rack)
        while at_follower.high_watermark < len(values) and time.monotonic() < deadline:
            time.sleep(0.2)
            at_follower = _fetch(cluster.brokers[follower].bootstrap, 12, rack)
        assert at_follower.error_code == 0 and at_follower.high_watermark == len(values)
        assert at_follower.records
        # Before v11 a consumer names no rack, and only a leader answers it.
        assert _fetch(cluster.brokers[follower].bootstrap, 10, "").error_code == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER)

        # librdkafka's consumer in the follower's rack reads everything, from the follower.
        before = {n: _bytes_out(ports[n], "near") for n in (leader, follower)}
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "near-g",
                             "client.rack": rack, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("near", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    got.append(msg.value())
        consumer.close()
        assert got == values
        assert _bytes_out(ports[follower], "near") - before[follower] >= sum(map(len, values))
        assert _bytes_out(ports[leader], "near") == before[leader]
    finally:
        cluster.stop()
