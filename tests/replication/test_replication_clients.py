"""Leadership changes as real clients see them: a partition this broker stops leading
answers NOT_LEADER_OR_FOLLOWER to kafka-python's producer and to consumers' fetches, a
long-polling fetch waiting on it answers at once, and after it leads again (a newer epoch)
produce works and a fetch naming the old epoch is fenced."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaProducer
from kafka.errors import NotLeaderForPartitionError

from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

F = m.FetchRequest


# A consumer before KIP-392, which only a partition's leader answers (from v11 a follower
# serves consumers too: tests/replication/test_replication_follower_fetch.py).
FETCH_VERSION = 10


def _fetch_frame(topic: str, epoch: int, max_wait_ms: int) -> bytes:
    body = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                 partition=0, current_leader_epoch=epoch, fetch_offset=0,
                 log_start_offset=-1, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")
    return codec.encode_request(m.ApiKey.FETCH, FETCH_VERSION, 7, "replication-test", body)


def _fetch_code(conn: RawConnection) -> int:
    frame = conn.recv_frame()
    assert frame is not None
    _, resp = codec.decode_response(m.ApiKey.FETCH, FETCH_VERSION, frame)
    return int(resp.responses[0].partitions[0].error_code)


def test_replication_follower_partition_refuses_kafka_python_producer(
        ads_broker: EmbeddedBroker) -> None:
    bootstrap = ads_broker.bootstrap_servers
    create_topic(bootstrap, "moving")
    replicas = ads_broker.broker.replica_manager  # type: ignore[union-attr]
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks="all")
    try:
        assert producer.send("moving", b"before").get(timeout=10).offset == 0
        ads_broker.call(replicas.become_follower, "moving", 0, 1)
        with pytest.raises(NotLeaderForPartitionError):
            producer.send("moving", b"refused").get(timeout=10)
        ads_broker.call(replicas.become_leader, "moving", 0, 2)
        assert producer.send("moving", b"after").get(timeout=10).offset == 1
    finally:
        producer.close(timeout=5)


def test_replication_waiting_fetch_answers_when_leadership_moves(
        ads_broker: EmbeddedBroker) -> None:
    bootstrap = ads_broker.bootstrap_servers
    create_topic(bootstrap, "moving")
    replicas = ads_broker.broker.replica_manager  # type: ignore[union-attr]
    with RawConnection(bootstrap) as conn:
        conn.send_raw(_fetch_frame("moving", -1, 10_000))
        time.sleep(0.2)  # the fetch is parked in the purgatory by now
        start = time.monotonic()
        ads_broker.call(replicas.become_follower, "moving", 0, 1)
        assert _fetch_code(conn) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert time.monotonic() - start < 5  # not the 10 s max_wait_ms
        ads_broker.call(replicas.become_leader, "moving", 0, 2)
        conn.send_raw(_fetch_frame("moving", 1, 0))
        assert _fetch_code(conn) == ErrorCode.FENCED_LEADER_EPOCH
        conn.send_raw(_fetch_frame("moving", 2, 0))
        assert _fetch_code(conn) == ErrorCode.NONE
