"""Paused brokers (SIGSTOP / SIGCONT) in a three-broker cluster on a real ZooKeeper: a
follower paused past replica.lag.time.max.ms leaves the ISR and rejoins once caught up; a
leader paused past its session timeout is replaced, cannot get a write acknowledged when it
resumes, truncates what it wrote alone and rejoins the ISR; committed group offsets survive
the loss of the coordinator's broker."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from ads.client.blocking import Connection
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from cluster_support import Cluster
from replication_support import FAST, create, identical_logs, partition_state, produce, read_all

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]


@contextmanager
def _one_partition(tmp_path: Path, topic: str, *sets: str) -> Iterator[tuple[Cluster, int]]:
    """Three brokers with `topic` (one partition, three replicas, min.insync.replicas 2)
    and its ISR whole; yields the cluster and the partition's leader."""
    c = Cluster(tmp_path, 3, *sets).start()
    try:
        create(c, topic, 1, 3, **{"min.insync.replicas": "2"})
        c.wait_for(lambda: len(partition_state(c, topic, 0)["isr"]) == 3, "ISR of three")
        yield c, partition_state(c, topic, 0)["leader"]
    finally:
        c.stop()


def _lag_only(lag_ms: int, session_ms: int) -> tuple[str, ...]:
    """Sessions that outlive the pauses: only the leader's lag rule can shrink the ISR."""
    return (f"replica.lag.time.max.ms={lag_ms}", "replica.fetch.wait.max.ms=200",
            f"zookeeper.session.timeout.ms={session_ms}")


@contextmanager
def _paused(c: Cluster, nodes: list[int]) -> Iterator[None]:
    """SIGSTOP for the brokers `nodes` while in the block, SIGCONT whatever happens."""
    procs = [c.brokers[n].proc for n in nodes]
    for proc in procs:
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for proc in procs:
            assert proc is not None
            os.kill(proc.pid, signal.SIGCONT)


def test_replication_paused_follower_leaves_and_rejoins_the_isr(tmp_path: Path) -> None:
    with _one_partition(tmp_path, "lag", *_lag_only(2000, 15000)) as (c, leader):
        slow = next(n for n in c.brokers if n != leader)
        with _paused(c, [slow]):
            # Writes keep the leader's log end offset moving past the paused follower.
            assert produce(c.bootstrap, "lag", [b"during"] * 50) == []
            c.wait_for(lambda: slow not in partition_state(c, "lag", 0)["isr"],
                       "the paused follower leaves the ISR", timeout_s=20)
            assert produce(c.bootstrap, "lag", [b"more"] * 50) == []
        c.wait_for(lambda: slow in partition_state(c, "lag", 0)["isr"],
                   "the follower rejoins once caught up", timeout_s=20)
        c.wait_for(lambda: identical_logs(c, "lag", 1, [1, 2, 3]), "replicas identical")


def test_replication_acks_all_waiting_when_the_isr_shrinks_to_the_leader_is_refused(
        tmp_path: Path) -> None:
    """Both followers paused with their sessions alive: the leader still counts them in its
    ISR, so it appends an acks=all write and waits. When it records the ISR of itself alone
    after replica.lag.time.max.ms, the high watermark jumps past that write; the write
    must be answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, never acknowledged."""
    with _one_partition(tmp_path, "lone", *_lag_only(4000, 20000)) as (c, leader):
        producer = Producer({"bootstrap.servers": c.brokers[leader].bootstrap, "acks": "all",
                             "enable.idempotence": False, "retries": 0, "linger.ms": 0,
                             "message.timeout.ms": 30000})
        failures: list[KafkaError] = []

        def send(value: bytes) -> None:
            producer.produce("lone", value=value,
                             on_delivery=lambda err, _m: err and failures.append(err))
            assert producer.flush(40) == 0

        send(b"before")  # connected and acknowledged by all three
        assert failures == []
        with _paused(c, [n for n in c.brokers if n != leader]):
            send(b"alone")  # appended while the ISR is still three; answered after the shrink
            assert [f.code() for f in failures] == [
                KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
            assert partition_state(c, "lone", 0)["isr"] == [leader]
            failures.clear()
            send(b"refused")  # refused before it is appended
            assert [f.code() for f in failures] == [KafkaError.NOT_ENOUGH_REPLICAS]
        c.wait_for(lambda: len(partition_state(c, "lone", 0)["isr"]) == 3,
                   "the followers rejoin once caught up", timeout_s=30)
        failures.clear()
        send(b"after")
        assert failures == []


def _send_produce(conn: Connection, topic: str, value: bytes) -> None:
    batch = build_batch([(None, value)], timestamp=int(time.time() * 1000))
    request = m.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
            m.ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    conn.send(m.ApiKey.PRODUCE, 9, request)


def test_replication_zombie_leader_cannot_acknowledge_and_truncates(tmp_path: Path) -> None:
    with _one_partition(tmp_path, "zombie", *FAST) as (c, zombie):
        assert produce(c.bootstrap, "zombie", [b"before"]) == []
        conn = Connection.connect(c.brokers[zombie].bootstrap)
        conn.settimeout(60)
        with _paused(c, [zombie]):
            _send_produce(conn, "zombie", b"lost")  # waits in the paused broker's socket
            c.wait_for(lambda: partition_state(c, "zombie", 0)["leader"] not in (zombie, -1),
                       "a new leader while the old one is paused")
            others = ",".join(b.bootstrap for n, b in c.brokers.items() if n != zombie)
            assert produce(others, "zombie", [b"after"]) == []
        answer = conn.receive()
        conn.close()
        assert isinstance(answer, m.ProduceResponse)
        code = answer.responses[0].partition_responses[0].error_code
        assert code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT,
                        ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.FENCED_LEADER_EPOCH)
        # The zombie registers again, truncates its lone write and rejoins the ISR.
        c.wait_for(lambda: zombie in partition_state(c, "zombie", 0)["isr"],
                   "the old leader rejoins the ISR", timeout_s=30)
        got = read_all(c.bootstrap, "zombie", 1, 2)
        assert [v for _, v in got[0]] == [b"before", b"after"]
        c.wait_for(lambda: identical_logs(c, "zombie", 1, [1, 2, 3]), "replicas identical")


def test_replication_group_offsets_survive_the_coordinator_broker(tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, *FAST).start()
    try:
        create(c, "orders", 1, 3)
        assert produce(c.bootstrap, "orders", [f"o{i}".encode() for i in range(10)]) == []
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "billing",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 6 and time.monotonic() < deadline:
            for msg in consumer.consume(6 - seen, 0.5):
                if msg.error() is None:
                    seen += 1
        consumer.commit(offsets=[TopicPartition("orders", 0, 6)], asynchronous=False)
        consumer.close()
        # The group's coordinator is the leader of its __consumer_offsets partition.
        c.wait_for(lambda: all(len(partition_state(c, "__consumer_offsets", p)["isr"]) == 3
                               for p in range(6)), "every offsets partition fully replicated")
        admin = c.admin()  # kept: its futures fail once the client is collected
        coordinator = admin.describe_consumer_groups(["billing"])["billing"].result(
            30).coordinator.id
        c.brokers[coordinator].kill9()
        c.wait_for(lambda: str(coordinator) not in c.zk_children("/brokers/ids"),
                   "the coordinator's session ends")
        live = ",".join(b.bootstrap for n, b in c.brokers.items() if n != coordinator)
        again = Consumer({"bootstrap.servers": live, "group.id": "billing",
                          "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            committed = again.committed([TopicPartition("orders", 0)], timeout=30)
            assert committed[0].offset == 6
        finally:
            again.close()
    finally:
        c.stop()


def _coordinator(c: Cluster, group: str, live: list[int]) -> int:
    """The group's coordinator as a live broker answers FindCoordinator (-1: none yet)."""
    with Connection.connect(c.brokers[live[0]].bootstrap, timeout_s=30) as conn:
        r = conn.request(m.ApiKey.FIND_COORDINATOR, 3,
                         m.FindCoordinatorRequest(key=group, key_type=0))
    return r.node_id if r.error_code == ErrorCode.NONE and r.node_id in live else -1


def _kip848_group(c: Cluster, node: int, group: str) -> tuple[int, dict[str, int]] | None:
    """ConsumerGroupDescribe on `node`: the group epoch and each member's epoch (None while
    the node is not, or not yet, the group's loaded coordinator)."""
    with Connection.connect(c.brokers[node].bootstrap, timeout_s=30) as conn:
        r = conn.request(m.ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                         m.ConsumerGroupDescribeRequest(group_ids=[group]))
    g = r.groups[0]
    if g.error_code != ErrorCode.NONE:
        return None
    return g.group_epoch, {mem.member_id: mem.member_epoch for mem in g.members}


def test_replication_kip848_group_moves_with_its_coordinator(tmp_path: Path) -> None:
    """A KIP-848 group (`group.protocol=consumer`) whose coordinator's broker is SIGKILLed:
    the new coordinator loads the group from the replicated `__consumer_offsets` with its
    member's id and epoch, and the member goes on heartbeating with them, keeping its
    partition and position: nothing it consumed past its commit is read again."""
    c = Cluster(tmp_path, 3, *FAST, "group.consumer.heartbeat.interval.ms=500").start()
    try:
        create(c, "orders", 1, 3)
        assert produce(c.bootstrap, "orders", [b"%d" % i for i in range(10)]) == []
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "kip848",
                             "group.protocol": "consumer", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        got: list[int] = []

        def consume(count: int, timeout_s: float) -> None:
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                got.extend(int(msg.value()) for msg in consumer.consume(count - len(got), 0.5)
                           if msg.error() is None)

        try:
            consume(6, 60)
            assert got == list(range(6))
            # Committed behind what was consumed: a member that lost its partition would
            # read 4 and 5 again from the commit.
            consumer.commit(offsets=[TopicPartition("orders", 0, 4)], asynchronous=False)
            c.wait_for(lambda: all(len(partition_state(c, "__consumer_offsets", p)["isr"]) == 3
                                   for p in range(6)), "every offsets partition fully replicated")
            everyone = list(c.brokers)
            coordinator = _coordinator(c, "kip848", everyone)
            before = _kip848_group(c, coordinator, "kip848")
            assert before is not None and len(before[1]) == 1
            c.brokers[coordinator].kill9()
            live = [n for n in everyone if n != coordinator]
            c.wait_for(lambda: str(coordinator) not in c.zk_children("/brokers/ids"),
                       "the coordinator's session ends")
            c.wait_for(lambda: _coordinator(c, "kip848", live) in live, "a new coordinator")
            moved = _coordinator(c, "kip848", live)
            c.wait_for(lambda: _kip848_group(c, moved, "kip848") is not None,
                       "the group loaded on its new coordinator")
            assert _kip848_group(c, moved, "kip848") == before
            bootstrap = ",".join(c.brokers[n].bootstrap for n in live)
            assert produce(bootstrap, "orders", [b"%d" % i for i in range(10, 20)]) == []
            consume(20, 60)
            assert got == list(range(20))
            assert _kip848_group(c, moved, "kip848") == before
        finally:
            consumer.close()
    finally:
        c.stop()
