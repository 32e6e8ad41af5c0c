"""Helpers for replication tests: a partition's state as ZooKeeper holds it, the batches
each replica has on disk, and appends through the replica manager."""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from ads.records.batch import iter_batches
from ads.replication.partition import AppendOrigin, PartitionError, ProduceResult
from ads.replication.replica_manager import Appended, ReplicaManager
from cluster_support import Cluster


def client_append(rm: ReplicaManager, topic: str, batch: memoryview, acks: int,
                  timeout_ms: int = 30_000) -> Appended:
    """A producer's batch to partition 0 through the replica manager's append path."""
    return rm.append_records({(topic, 0): batch}, AppendOrigin.CLIENT, acks, timeout_ms)


def client_result(rm: ReplicaManager, topic: str, batch: memoryview, acks: int
                  ) -> ProduceResult:
    """`client_append`'s result for the partition; its PartitionError raised."""
    result = client_append(rm, topic, batch, acks).results[(topic, 0)]
    if isinstance(result, PartitionError):
        raise result
    return result


def partition_state(c: Cluster, topic: str, partition: int) -> dict:
    with c.zk() as zk:
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        if not zk.exists(path):
            return {"leader": -1, "leader_epoch": -1, "isr": []}
        return json.loads(zk.get(path)[0])


def replica_batches(data_dir: Path, topic: str, partition: int) -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, bytes) of every batch in the replica's segment files."""
    found = []
    for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        for pos, header in iter_batches(data):
            found.append((header.base_offset, header.partition_leader_epoch,
                          data[pos:pos + header.size]))
    return found


def identical_logs(c: Cluster, topic: str, partitions: int, nodes: list[int]) -> bool:
    """Whether every replica on `nodes` holds the same batches, byte for byte."""
    for p in range(partitions):
        logs = [replica_batches(c.brokers[n].data_dir, topic, p) for n in nodes]
        if not logs[0] or any(other != logs[0] for other in logs[1:]):
            return False
    return True


FAST = ("replica.lag.time.max.ms=3000", "replica.fetch.wait.max.ms=200",
        "replica.fetch.backoff.ms=200", "offsets.topic.replication.factor=3")


def create(c: Cluster, name: str, partitions: int, rf: int, **configs: str) -> None:
    admin = c.admin()
    futures = admin.create_topics([NewTopic(name, partitions, rf, config=configs)])
    futures[name].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], **conf: object) -> list[KafkaError]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                         "enable.idempotence": True, **conf})
    failures: list[KafkaError] = []
    for v in values:
        producer.produce(topic, value=v, key=v,
                         on_delivery=lambda err, _m: err and failures.append(err))
    assert producer.flush(60) == 0
    return failures


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[int, list]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.time()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    got[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got
