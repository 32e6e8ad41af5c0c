"""Committed offsets survive broker restarts (kill -9 included), and clients ride out
COORDINATOR_LOAD_IN_PROGRESS while a coordinator partition loads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

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


def test_groups_load_in_progress_is_retried_by_clients(tmp_path: Path) -> None:
    config = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as embedded:
        bs = embedded.bootstrap_servers
        create_topic(bs, "loading", partitions=1)
        produce(bs, "loading", range(5))
        c = consumer(bs, "reloaded")
        c.commit(offsets=[TopicPartition("loading", 0, 3)], asynchronous=False)
        c.close()
        coordinator = embedded.broker.group_coordinator  # type: ignore[union-attr]
        partition = coordinator.partition_of("reloaded")
        embedded.call(coordinator.mark_loading, partition)
        with RawConnection(bs) as conn:
            req = m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="reloaded", topics=None)])
            assert conn.request(9, 8, req).groups[0].error_code == (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            hb = conn.request(12, 4, m.HeartbeatRequest(group_id="reloaded", member_id="x"))
            assert hb.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        got: list[int] = []
        reader = consumer(bs, "reloaded")
        reader.subscribe(["loading"])
        thread = threading.Thread(target=lambda: got.extend(consume(reader, 2, 30)))
        thread.start()
        time.sleep(2.0)
        assert got == []  # the client keeps retrying while the partition loads
        embedded.call(coordinator.load_partition, partition)
        thread.join(40)
        reader.close()
        assert got == [3, 4]
