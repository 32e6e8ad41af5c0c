"""A network partition: the leader of an RF=3 partition is cut off from ZooKeeper, the
other brokers and the clients (network namespaces this test makes), while an idempotent
acks=all producer keeps writing. No acknowledged write is lost, none is written twice, and
when the network heals the old leader truncates what it alone had and rejoins the ISR with
a log identical to the others'."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from netns_support import NetnsCluster, netns_available
from replication_support import FAST, create, identical_logs, partition_state, read_all

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]


@pytest.mark.skipif(not netns_available(), reason="needs root and the ip command")
def test_replication_isolated_leader_loses_no_acknowledged_write(tmp_path: Path) -> None:
    c = NetnsCluster(tmp_path, 3, *FAST).start()
    try:
        create(c, "split", 1, 3, **{"min.insync.replicas": "2"})
        c.wait_for(lambda: len(partition_state(c, "split", 0)["isr"]) == 3, "ISR of three")
        leader = partition_state(c, "split", 0)["leader"]
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "request.timeout.ms": 5000, "message.timeout.ms": 120000})
        acked: list[tuple[int, bytes]] = []
        errors: list[str] = []

        def delivered(err, msg) -> None:  # noqa: ANN001
            if err is not None:
                errors.append(str(err))
            else:
                acked.append((msg.offset(), msg.value()))

        sent = 0

        def write_for(seconds: float) -> None:
            nonlocal sent
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                producer.produce("split", value=f"r{sent}".encode(), on_delivery=delivered)
                sent += 1
                producer.poll(0.005)

        write_for(2)
        c.isolate(leader)
        try:
            c.wait_for(lambda: partition_state(c, "split", 0)["leader"] not in (leader, -1),
                       "a new leader elected without the isolated one", timeout_s=30)
            write_for(4)
        finally:
            c.heal(leader)
        c.wait_for(lambda: leader in partition_state(c, "split", 0)["isr"],
                   "the old leader rejoins the ISR", timeout_s=60)
        write_for(2)
        assert producer.flush(120) == 0
        assert errors == []
        assert len(acked) == sent
        got = read_all(c.bootstrap, "split", 1, sent)[0]
        assert [o for o, _ in got] == list(range(sent))
        assert sorted(acked) == got
        assert [v for _, v in got] == [f"r{i}".encode() for i in range(sent)]
        c.wait_for(lambda: identical_logs(c, "split", 1, [1, 2, 3]), "replicas identical")
    finally:
        c.stop()
