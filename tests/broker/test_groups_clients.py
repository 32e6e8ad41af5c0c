"""Subscribing consumers of confluent-kafka, kafka-python and aiokafka share one group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from ads.testing import EmbeddedBroker
from conftest import create_topic

WORKER = str(Path(__file__).with_name("group_worker.py"))
SESSION_S = 6.0
LIBRARIES = ["confluent", "kafka-python", "aiokafka"]


class Worker:
    def __init__(self, library: str, bootstrap: str, group: str, topic: str) -> None:
        self.library = library
        self.proc = subprocess.Popen(  # noqa: S603
            [sys.executable, WORKER, library, bootstrap, group, topic],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.records: list[tuple[int, int]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 2:
                self.records.append((int(parts[0]), int(parts[1])))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        self.proc.wait(10)
        self.thread.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = 6) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, b"%d" % i, partition=part)
    p.flush(10)


def assignment(admin: AdminClient, group: str) -> dict[str, list[int]]:
    d = admin.describe_consumer_groups([group])[group].result(timeout=10)
    if d.state.name != "STABLE":
        return {}
    return {m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
            for m in d.members}


def wait_assignment(admin: AdminClient, group: str, members: int, timeout: float
                    ) -> dict[str, list[int]]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        a = assignment(admin, group)
        if len(a) == members and sorted(p for ps in a.values() for p in ps) == list(range(6)):
            return a
        time.sleep(0.2)
    raise AssertionError(f"no stable assignment over {members} members: {assignment(admin, group)}")


def wait_committed(admin: AdminClient, group: str, offset: int, timeout: float = 30) -> None:
    """Until the group has committed `offset` on all six partitions: the members commit
    after every poll, and no commit may be pending when one of them is killed."""
    request = [ConsumerGroupTopicPartitions(group)]
    committed: list[int] = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        listed = admin.list_consumer_group_offsets(request)[group].result(timeout=10)
        committed = [tp.offset for tp in listed.topic_partitions]
        if committed == [offset] * 6:
            return
        time.sleep(0.1)
    raise AssertionError(f"committed offsets {committed}, expected {offset} on 6 partitions")


@pytest.mark.slow
def test_groups_three_client_libraries_share_partitions_and_take_over(tmp_path: Path) -> None:
    config = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "shared", partitions=6)
        produce(bs, "shared", 10)
        workers = {lib: Worker(lib, bs, "mixed", "shared") for lib in LIBRARIES}
        admin = AdminClient({"bootstrap.servers": bs})
        try:
            first = wait_assignment(admin, "mixed", 3, 60)
            # every partition to exactly one member, and each member has some
            assert all(len(ps) == 2 for ps in first.values()), first
            deadline = time.time() + 30
            while time.time() < deadline and sum(len(w.records) for w in workers.values()) < 60:
                time.sleep(0.1)
            wait_committed(admin, "mixed", 10)
            victim = workers["kafka-python"]
            victim.stop(signal.SIGKILL)
            killed_at = time.time()
            second = wait_assignment(admin, "mixed", 2, SESSION_S + 20)
            moved_after = time.time() - killed_at
            assert moved_after < SESSION_S + 5, moved_after
            produce(bs, "shared", 10)
            survivors = [w for lib, w in workers.items() if lib != "kafka-python"]
            deadline = time.time() + 30
            while time.time() < deadline and len(
                    {r for w in survivors for r in w.records if r[1] >= 10}) < 60:
                time.sleep(0.1)
        finally:
            for w in workers.values():
                w.stop()
        seen = [r for w in workers.values() for r in w.records]
        assert set(seen) == {(p, o) for p in range(6) for o in range(20)}
        assert len(second) == 2
        # The victim committed after every poll and was killed idle: nothing committed by it
        # is consumed again by the survivors.
        victim_records = set(victim.records)
        survivor_records = [r for w in survivors for r in w.records]
        assert not victim_records & set(survivor_records)
        assert len(survivor_records) == len(set(survivor_records))
