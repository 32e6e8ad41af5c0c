"""Transactions over replicated partitions: followers copy the transactional batches and
their markers, rebuild the open transactions and the aborted-transaction index from them,
so after the leader is killed the new leader serves read_committed exactly as the old one
did. Three broker processes on a real ZooKeeper, confluent-kafka."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cluster_support import Cluster
from replication_support import FAST, create, identical_logs, partition_state

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]


def read(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.time()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("txn", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
        got += [m.value() for m in consumer.consume(100, 1.0) if m.error() is None]
    finally:
        consumer.close()
    return got


def test_replication_transactions_survive_the_leader(tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, *FAST, "transaction.state.log.replication.factor=3",
                "transaction.state.log.min.isr=2", "transaction.state.log.num.partitions=3"
                ).start()
    try:
        create(c, "txn", 1, 3, **{"min.insync.replicas": "2"})
        c.wait_for(lambda: len(partition_state(c, "txn", 0)["isr"]) == 3, "ISR of three")
        producer = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "t-1"})
        producer.init_transactions(30)
        for tag, commit in (("a", True), ("b", False), ("c", True)):
            producer.begin_transaction()
            for i in range(5):
                producer.produce("txn", value=f"{tag}{i}".encode(), partition=0)
            producer.flush(30)  # sent before ending: an abort drops what is still queued
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        # An open transaction: read_committed stops before it, on any leader.
        producer.begin_transaction()
        producer.produce("txn", value=b"open", partition=0)
        producer.flush(30)
        committed = [f"{t}{i}".encode() for t in "ac" for i in range(5)]
        assert read(c.bootstrap, "read_committed", 10) == committed
        c.wait_for(lambda: identical_logs(c, "txn", 1, [1, 2, 3]), "replicas identical")

        leader = partition_state(c, "txn", 0)["leader"]
        c.brokers[leader].kill9()
        c.wait_for(lambda: partition_state(c, "txn", 0)["leader"] not in (leader, -1),
                   "a new leader from the ISR")
        live = ",".join(b.bootstrap for n, b in c.brokers.items() if n != leader)
        # The new leader knows what was aborted (its .txnindex, built while following) and
        # what is still open (its producer state).
        assert read(live, "read_committed", 10) == committed
        everything = read(live, "read_uncommitted", 16)
        assert everything == [f"{t}{i}".encode() for t in "abc" for i in range(5)] + [b"open"]
    finally:
        c.stop()
