"""Failover of thousands of replicated partitions on a real cluster, read back with a real
client: the controller's per-partition work (docs/cluster.md, "What the controller does per
partition"). The counts that measure it live in tools/cluster_failover.py."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(600)]

TOPICS = [f"scale-{i}" for i in range(3)]
PER_TOPIC = 600


def _metadata(c: Cluster, via: int) -> dict[tuple[str, int], tuple[int, list[int]]]:
    """(leader, ISR) of every partition of TOPICS, as broker `via` answers Metadata."""
    md = c.admin(via).list_topics(timeout=30)
    return {(t, p.id): (p.leader, list(p.isrs)) for t in TOPICS if t in md.topics
            for p in md.topics[t].partitions.values()}


def _led_in_sync(c: Cluster, via: int, live: set[int]) -> bool:
    """Every partition led by a live broker of its ISR, and the ISR only of live ones."""
    states = _metadata(c, via)
    return len(states) == len(TOPICS) * PER_TOPIC and all(
        leader in live and leader in isr and set(isr) <= live
        for leader, isr in states.values())


def _produce_one_each(bootstrap: str) -> set[tuple[str, int, int]]:
    """One record to every partition with acks=all; the acknowledged ones."""
    acked: set[tuple[str, int, int]] = set()
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked.add((msg.topic(), msg.partition(), msg.offset()))  # type: ignore[attr-defined]
        else:
            failed.append(err)

    # A broker answers a connection's requests in order, each acks=all request once the
    # followers have fetched its records, and a follower's fetch names every partition it
    # follows: a producer per topic, all at once, spreads the waits over more connections.
    producers = [Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50})
                 for _ in TOPICS]
    for t, producer in zip(TOPICS, producers, strict=True):
        for p in range(PER_TOPIC):
            producer.produce(t, value=f"{t}/{p}".encode(), partition=p,
                             on_delivery=delivered)
    assert [producer.flush(240) for producer in producers] == [0] * len(TOPICS)
    assert failed == []
    return acked


def _unread(bootstrap: str, acked: set[tuple[str, int, int]]) -> set[tuple[str, int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(t, p, 0) for t, p, _ in acked])
    missing = set(acked)
    deadline = time.monotonic() + 60
    try:
        while missing and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is None:
                    missing.discard((msg.topic(), msg.partition(), msg.offset()))
                    assert msg.value() == f"{msg.topic()}/{msg.partition()}".encode()
    finally:
        consumer.close()
    return missing


@pytest.fixture
def big_cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 3, "auto.leader.rebalance.enable=false")
    try:
        yield c.start()
    finally:
        c.stop()


def test_cluster_failover_moves_thousands_of_leaders_and_loses_no_acked_record(
        big_cluster: Cluster) -> None:
    c = big_cluster
    admin = c.admin(1)
    for t in TOPICS:
        admin.create_topics([NewTopic(t, PER_TOPIC, 3, config={"min.insync.replicas": "2"})]
                            )[t].result(120)
    c.wait_for(lambda: _led_in_sync(c, 1, {1, 2, 3}), "every partition led", 120)
    acked = _produce_one_each(c.bootstrap)
    assert len(acked) == len(TOPICS) * PER_TOPIC

    # Phase 1: the broker (not the controller) that leads the most partitions dies.
    controller = c.controller()
    led = Counter(leader for leader, _ in _metadata(c, controller).values())
    victim = max((n for n in c.brokers if n != controller), key=lambda n: led[n])
    assert led[victim] > 0
    c.brokers[victim].kill9()
    live = set(c.brokers) - {victim}
    for via in live:
        c.wait_for(lambda via=via: _led_in_sync(c, via, live),  # type: ignore[misc]
                   f"broker {via} naming live in-sync leaders", 120)
    survivors = ",".join(c.brokers[n].bootstrap for n in live)
    assert _unread(survivors, acked) == set()

    # Phase 2: the controller dies too; the last broker, in every ISR, takes over as
    # controller (reading every state afresh) and leads everything.
    c.brokers[controller].kill9()
    (last,) = live - {controller}
    c.wait_for(lambda: c.controller() == last, "the last broker the controller", 60)
    c.wait_for(lambda: _led_in_sync(c, last, {last}), "the last broker leading all", 120)
    assert _unread(c.brokers[last].bootstrap, acked) == set()
