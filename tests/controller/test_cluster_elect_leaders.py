"""ElectLeaders on three broker processes through confluent-kafka and `ads topics
elect-leaders`; a producer whose metadata names a deposed leader is answered
NOT_LEADER_OR_FOLLOWER with the new leader (KIP-951) and delivers there.

Elections with no live ISR member (UNCLEAN moving a partition) are tested against
ZooKeeper in test_controller_elections_zk.py."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from test_controller_cluster import create, leaders

from ads.cli.main import main
from cluster_support import Cluster

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]


def elect(c: Cluster, kind: ElectionType, partitions: list[TopicPartition] | None,
          via: int) -> dict[tuple[str, int], int | None]:
    admin = c.admin(via)
    out = admin.elect_leaders(kind, partitions).result(40)
    return {(tp.topic, tp.partition): (None if err is None else err.code())
            for tp, err in out.items()}


def test_cluster_elect_leaders_preferred_unclean_and_a_stale_producer(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    c = cluster
    create(c, "elect", 2, rf=2)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "elect").values()), "leaders")
    tps = [TopicPartition("elect", 0), TopicPartition("elect", 1)]
    assert elect(c, ElectionType.PREFERRED, tps, 1) == {
        ("elect", 0): KafkaError.ELECTION_NOT_NEEDED, ("elect", 1): KafkaError.ELECTION_NOT_NEEDED}
    assert elect(c, ElectionType.UNCLEAN, tps[:1], 2) == {
        ("elect", 0): KafkaError.ELECTION_NOT_NEEDED}
    # Every partition: those needing no election are left out.
    assert elect(c, ElectionType.PREFERRED, None, 3) == {}
    bootstrap = c.bootstrap
    assert main(["topics", "elect-leaders", "--topic", "elect",
                 "--bootstrap-server", bootstrap]) == 0
    assert "Valid replica already elected for partitions elect-0, elect-1" in (
        capsys.readouterr().out)

    old = leaders(c, "elect")[0]
    md = c.admin(old).list_topics("elect", timeout=10)
    new = next(r for r in md.topics["elect"].partitions[0].replicas if r != old)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "topic.metadata.refresh.interval.ms": -1})
    for i in range(10):
        producer.produce("elect", value=f"before{i}".encode(), partition=0)
    assert producer.flush(30) == 0

    # Both replicas are in the ISR. The leader stops past its session timeout: the other
    # replica takes over from the ISR, and the preferred replica cannot lead while away.
    c.wait_for(lambda: len(c.admin(old).list_topics("elect", timeout=10).topics["elect"]
                           .partitions[0].isrs) == 2, "both replicas in sync")
    proc = c.brokers[old].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        others = [n for n in c.brokers if n != old]
        c.wait_for(lambda: leaders(c, "elect", others[0])[0] == new, "the ISR member leads")
        c.wait_for(lambda: c.controller() in others, "a live controller")
        preferred_first = md.topics["elect"].partitions[0].replicas[0] == old
        if preferred_first:
            assert elect(c, ElectionType.PREFERRED, tps[:1], others[0]) == {
                ("elect", 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
        # An unclean election has nothing to do: the partition has a leader.
        assert main(["topics", "elect-leaders", "--election-type", "unclean", "--topic",
                     "elect", "--partition", "0",
                     "--bootstrap-server", c.brokers[others[0]].bootstrap]) == 0
        assert "Valid replica already elected for partitions elect-0" in (
            capsys.readouterr().out)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    # The old leader comes back as a follower; the producer still thinks it leads.
    c.wait_for(lambda: leaders(c, "elect", old)[0] == new, "the old leader follows")
    failures: list[KafkaError] = []
    for i in range(10):
        producer.produce("elect", value=f"after{i}".encode(), partition=0,
                         on_delivery=lambda err, _m: err and failures.append(err))
    assert producer.flush(60) == 0
    assert failures == []
    assert "elect-0 from" in c.brokers[old].log()
    assert "rejected: NOT_LEADER_OR_FOLLOWER" in c.brokers[old].log()

    # The new leader has everything: what was written before the failover and after.
    consumer = Consumer({"bootstrap.servers": c.brokers[new].bootstrap, "group.id": "e",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("elect", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(20, 0.5) if m.error() is None]
    consumer.close()
    assert got == [f"before{i}".encode() for i in range(10)] + [
        f"after{i}".encode() for i in range(10)]
    # Once the old leader is back in the ISR, a preferred election gives it back.
    if preferred_first:
        c.wait_for(lambda: len(c.admin(new).list_topics("elect", timeout=10).topics["elect"]
                               .partitions[0].isrs) == 2, "the old leader back in sync")
        assert elect(c, ElectionType.PREFERRED, tps[:1], new) == {("elect", 0): None}
        c.wait_for(lambda: leaders(c, "elect", new)[0] == old, "the preferred leader again")
