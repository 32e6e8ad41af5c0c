"""Committed offsets survive broker restarts (kill -9 included), and clients ride out
COORDINATOR_LOAD_IN_PROGRESS while a coordinator partition loads."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ads.broker import coordinators
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from broker_process import BrokerProcess
from conftest import create_topic
from kafka_wire import RawConnection

SETS = ("group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=4")


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in values:
        p.produce(topic, b"%d" % i, partition=0)
    p.flush(10)


def consumer(bootstrap: str, group: str = "durable") -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})


def consume(c: Consumer, count: int, timeout: float = 20.0) -> list[int]:
    got: list[int] = []
    deadline = time.time() + timeout
    while len(got) < count and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(int(msg.value()))
    return got


@pytest.mark.broker_process
@pytest.mark.slow
def test_groups_commits_survive_kill_9_and_clean_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", None, *SETS).start()
    try:
        create_topic(broker.bootstrap, "durable", partitions=1)
        produce(broker.bootstrap, "durable", range(10))
        c = consumer(broker.bootstrap)
        c.subscribe(["durable"])
        assert consume(c, 6) == list(range(6))
        c.commit(offsets=[TopicPartition("durable", 0, 6, metadata="checkpoint-6")],
                 asynchronous=False)
        c.close()
        broker.kill9()
        broker.start()
        c = consumer(broker.bootstrap)
        (tp,) = c.committed([TopicPartition("durable", 0)], timeout=20)
        assert (tp.offset, tp.metadata) == (6, "checkpoint-6")
        c.subscribe(["durable"])
        assert consume(c, 4) == [6, 7, 8, 9]
        c.commit(asynchronous=False)
        c.close()
        broker.stop()
        broker.start()
        c = consumer(broker.bootstrap)
        (tp,) = c.committed([TopicPartition("durable", 0)], timeout=20)
        assert tp.offset == 10
        c.close()
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()


def test_groups_clients_ride_out_the_coordinator_moving_away_and_loading(tmp_path: Path
                                                                          ) -> None:
    """The group's partition of __consumer_offsets is unloaded (leadership moved away: the
    group answers NOT_COORDINATOR) and led again (COORDINATOR_LOAD_IN_PROGRESS while it
    loads): a consumer started meanwhile waits, then resumes at the committed offset."""
    config = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as embedded:
        bs = embedded.bootstrap_servers
        create_topic(bs, "loading", partitions=1)
        produce(bs, "loading", range(5))
        c = consumer(bs, "reloaded")
        c.commit(offsets=[TopicPartition("loading", 0, 3)], asynchronous=False)
        c.close()
        broker = embedded.broker
        assert broker is not None
        topic = broker.group_coordinator.topic
        partition = broker.group_coordinator.partition_of("reloaded")
        gate = asyncio.Event()
        unheld = topic.read_batches

        async def held(p: int) -> AsyncIterator[bytes]:
            if p == partition:
                await gate.wait()
            async for batch in unheld(p):
                yield batch

        embedded.call(setattr, topic, "read_batches", held)
        embedded.call(coordinators.become_follower, broker, topic.name, partition)
        fetch = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="reloaded", topics=None)])
        with RawConnection(bs) as conn:
            assert conn.request(9, 8, fetch).groups[0].error_code == ErrorCode.NOT_COORDINATOR
        got: list[int] = []
        reader = consumer(bs, "reloaded")
        reader.subscribe(["loading"])
        thread = threading.Thread(target=lambda: got.extend(consume(reader, 2, 40)))
        thread.start()
        time.sleep(1.5)
        assert got == []  # no coordinator: the client keeps looking for one
        embedded.call(coordinators.become_leader, broker, topic.name, partition, 1)
        with RawConnection(bs) as conn:
            assert conn.request(9, 8, fetch).groups[0].error_code == (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            hb = conn.request(12, 4, m.HeartbeatRequest(group_id="reloaded", member_id="x"))
            assert hb.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        time.sleep(1.5)
        assert got == []  # the client keeps retrying while the partition loads
        embedded.call(gate.set)
        thread.join(45)
        reader.close()
        assert got == [3, 4]


def _kip848_members(bootstrap: str, group: str) -> tuple[int, dict[str, int]]:
    """ConsumerGroupDescribe: the group epoch and each member's epoch (retried while the
    coordinator loads)."""
    deadline = time.time() + 20
    while True:
        with RawConnection(bootstrap) as conn:
            r = conn.request(m.ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                             m.ConsumerGroupDescribeRequest(group_ids=[group]))
        g = r.groups[0]
        if g.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.time() > deadline:
            assert g.error_code == ErrorCode.NONE, ErrorCode(g.error_code).name
            return g.group_epoch, {mem.member_id: mem.member_epoch for mem in g.members}
        time.sleep(0.1)


@pytest.mark.broker_process
@pytest.mark.slow
def test_groups_kip848_member_survives_a_broker_restart(tmp_path: Path) -> None:
    """A librdkafka consumer of a KIP-848 group (`group.protocol=consumer`) while its broker
    is stopped and started again on the same data directory: the group is loaded from
    `__consumer_offsets` with the member's id and epoch, the member's heartbeats go on with
    them, and it keeps its partition and its position, so what it consumed but did not
    commit is not consumed again. (Kept in memory only, the group was gone after the
    restart: the member was told UNKNOWN_MEMBER_ID, lost its partition and read again from
    the committed offset.)"""
    broker = BrokerProcess(tmp_path / "data", None, *SETS,
                           "group.consumer.heartbeat.interval.ms=500").start()

    def kip848() -> Consumer:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848",
                      "group.protocol": "consumer", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["kip848"])
        return c

    try:
        create_topic(broker.bootstrap, "kip848", partitions=1)
        produce(broker.bootstrap, "kip848", range(10))
        # A member that joins and leaves first: the group's epoch is past where a new
        # group would start.
        first = kip848()
        deadline = time.time() + 20
        while not first.assignment() and time.time() < deadline:
            first.poll(0.2)
        first.close()
        c = kip848()
        assert consume(c, 6) == list(range(6))
        c.commit(offsets=[TopicPartition("kip848", 0, 4)], asynchronous=False)
        epoch, members = _kip848_members(broker.bootstrap, "kip848")
        assert epoch >= 3 and len(members) == 1
        broker.stop()
        broker.start()
        assert _kip848_members(broker.bootstrap, "kip848") == (epoch, members)
        produce(broker.bootstrap, "kip848", range(10, 20))
        assert consume(c, 14, timeout=30) == list(range(6, 20))
        assert _kip848_members(broker.bootstrap, "kip848") == (epoch, members)
        c.close()
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
