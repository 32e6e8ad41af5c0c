"""Replication across three `ads broker` processes on a real ZooKeeper: followers copy the
leader's log, the ISR grows and shrinks, acks=all waits for it, and a leader's death loses
no acknowledged record. Real clients throughout."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ads.cli.main import main
from cluster_support import Cluster
from replication_support import FAST, create, identical_logs, partition_state, produce, read_all

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]

def test_replication_followers_copy_the_leader_and_join_the_isr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c = Cluster(tmp_path, 3, *FAST).start()
    try:
        create(c, "rep", 3, 3, **{"min.insync.replicas": "2"})
        c.wait_for(lambda: all(len(partition_state(c, "rep", p)["isr"]) == 3
                               for p in range(3)), "every replica in the ISR")
        values = [f"v{i}".encode() for i in range(3000)]
        assert produce(c.bootstrap, "rep", values) == []
        got = read_all(c.bootstrap, "rep", 3, len(values))
        assert sorted(v for vs in got.values() for _, v in vs) == sorted(values)
        for p, records in got.items():
            assert [o for o, _ in records] == list(range(len(records)))
        # Every replica holds the same batches, byte for byte.
        c.wait_for(lambda: identical_logs(c, "rep", 3, [1, 2, 3]), "replicas identical")
        # `ads topics describe --replica-offsets` asks each replica for its log end offset.
        assert main(["topics", "describe", "rep", "--replica-offsets",
                     "--bootstrap-server", c.bootstrap]) == 0
        rows = [line for line in capsys.readouterr().out.splitlines() if "Partition:" in line]
        for row in rows:
            fields = dict(f.split(": ", 1) for f in row.strip().split("\t"))
            ends = dict(e.split("=") for e in fields["ReplicaLogEndOffsets"].split(","))
            assert sorted(ends) == ["1", "2", "3"]
            assert set(ends.values()) == {fields["LogEndOffset"]}
            assert "UnderReplicated" not in row
        assert sum(int(dict(f.split(": ", 1) for f in r.strip().split("\t"))["LogEndOffset"])
                   for r in rows) == len(values)
    finally:
        c.stop()


def test_replication_leader_killed_loses_no_acknowledged_record(tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, *FAST).start()
    try:
        create(c, "fail", 1, 3, **{"min.insync.replicas": "2"})
        c.wait_for(lambda: len(partition_state(c, "fail", 0)["isr"]) == 3, "ISR of three")
        first = [f"a{i}".encode() for i in range(500)]
        assert produce(c.bootstrap, "fail", first) == []
        leader = partition_state(c, "fail", 0)["leader"]
        c.brokers[leader].kill9()
        c.wait_for(lambda: partition_state(c, "fail", 0)["leader"] not in (leader, -1),
                   "a new leader from the ISR")
        state = partition_state(c, "fail", 0)
        assert leader not in state["isr"]
        second = [f"b{i}".encode() for i in range(500)]
        live = ",".join(b.bootstrap for n, b in c.brokers.items() if n != leader)
        assert produce(live, "fail", second) == []
        got = read_all(live, "fail", 1, 1000)
        assert [v for _, v in got[0]] == first + second
        assert [o for o, _ in got[0]] == list(range(1000))
        # The old leader comes back as a follower, catches up and rejoins the ISR.
        c.wait_for(lambda: str(leader) not in c.zk_children("/brokers/ids"),
                   "the killed broker's session ends")
        c.brokers[leader].start()
        c.wait_for(lambda: leader in partition_state(c, "fail", 0)["isr"], "back in the ISR")
        c.wait_for(lambda: identical_logs(c, "fail", 1, [1, 2, 3]), "replicas identical")
    finally:
        c.stop()


def test_replication_min_insync_replicas_refuses_acks_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c = Cluster(tmp_path, 3, *FAST).start()
    try:
        create(c, "min", 1, 3, **{"min.insync.replicas": "2"})
        # A new partition starts with every live replica in its ISR (as in Kafka), so the
        # first acks=all write is neither refused nor acknowledged by the leader alone.
        assert len(partition_state(c, "min", 0)["isr"]) == 3
        assert produce(c.bootstrap, "min", [b"zero"], **{"enable.idempotence": False,
                                                          "retries": 0}) == []
        leader = partition_state(c, "min", 0)["leader"]
        others = [n for n in c.brokers if n != leader]
        for n in others:
            c.brokers[n].kill9()
        c.wait_for(lambda: partition_state(c, "min", 0)["isr"] == [leader], "ISR of one")
        # The leader shrinks the ISR itself; the admin tool also needs a live controller.
        c.wait_for(lambda: c.controller() == leader, "the survivor is the controller")
        bootstrap = c.brokers[leader].bootstrap
        # `ads topics describe` flags it, and lists it among the under-replicated ones.
        assert main(["topics", "describe", "min", "--under-replicated-partitions",
                     "--bootstrap-server", bootstrap]) == 0
        rows = [line for line in capsys.readouterr().out.splitlines() if "Partition:" in line]
        assert len(rows) == 1 and rows[0].endswith("UnderReplicated")
        assert f"Isr: {leader}\t" in rows[0]
        failures = produce(bootstrap, "min", [b"x"], **{"enable.idempotence": False,
                                                        "message.timeout.ms": 3000})
        assert [f.code() for f in failures] in ([KafkaError.NOT_ENOUGH_REPLICAS],
                                                [KafkaError._MSG_TIMED_OUT])
        assert produce(bootstrap, "min", [b"one"], acks="1",
                       **{"enable.idempotence": False}) == []
        for n in others:
            c.wait_for(lambda n=n: str(n) not in c.zk_children("/brokers/ids"), "session gone")
            c.brokers[n].start()
        c.wait_for(lambda: len(partition_state(c, "min", 0)["isr"]) == 3, "ISR of three again")
        assert produce(bootstrap, "min", [b"two"]) == []
        got = read_all(bootstrap, "min", 1, 3)
        assert [v for _, v in got[0]] == [b"zero", b"one", b"two"]
    except KafkaException:
        raise
    finally:
        c.stop()


def test_replication_unclean_election_when_enabled_loses_what_the_leader_alone_had(
        tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, *FAST).start()
    try:
        admin = c.admin()  # kept: its futures fail once the client is collected
        admin.create_topics([NewTopic("unclean", 1, replica_assignment=[[1, 2]], config={
            "unclean.leader.election.enable": "true"})])["unclean"].result(30)
        c.wait_for(lambda: partition_state(c, "unclean", 0)["isr"] == [1, 2], "ISR of two")
        assert produce(c.bootstrap, "unclean", [b"kept"]) == []
        c.brokers[2].kill9()
        c.wait_for(lambda: partition_state(c, "unclean", 0)["isr"] == [1], "ISR of one")
        assert produce(c.brokers[1].bootstrap, "unclean", [b"lost"], acks="1",
                       **{"enable.idempotence": False}) == []
        c.brokers[1].kill9()
        c.wait_for(lambda: partition_state(c, "unclean", 0)["leader"] == -1, "offline")
        c.wait_for(lambda: "2" not in c.zk_children("/brokers/ids"), "broker 2's session ends")
        c.brokers[2].start()
        # Broker 2 was not in the ISR: it leads only because the topic allows it.
        c.wait_for(lambda: partition_state(c, "unclean", 0)["leader"] == 2, "unclean leader")
        assert any("unclean leader election" in b.log() for b in c.brokers.values())
        assert [v for _, v in read_all(c.brokers[2].bootstrap, "unclean", 1, 1)[0]] == [b"kept"]
        # The old leader comes back, drops the record only it had and follows.
        c.wait_for(lambda: "1" not in c.zk_children("/brokers/ids"), "broker 1's session ends")
        c.brokers[1].start()
        c.wait_for(lambda: partition_state(c, "unclean", 0)["isr"] == [2, 1], "ISR of two again")
        c.wait_for(lambda: identical_logs(c, "unclean", 1, [1, 2]), "replicas identical")
    finally:
        c.stop()
