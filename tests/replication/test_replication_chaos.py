"""Leaders killed over and over while idempotent acks=all producers write: every
acknowledged record is read back exactly once, in order, with no gap in the offsets, and
the replicas end up identical. Three `ads broker` processes on a real ZooKeeper.

Twelve kills in the suite (about 9 s each on an idle machine);
ADS_REPLICATION_CHAOS_KILLS=N runs N, for a longer soak."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from cluster_support import Cluster
from replication_support import FAST, create, identical_logs, partition_state, read_all

KILLS = int(os.environ.get("ADS_REPLICATION_CHAOS_KILLS") or 12)
pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300 + 20 * KILLS)]
PARTITIONS = 3


class Writer(threading.Thread):
    """Writes numbered records round-robin over the partitions until stopped; remembers
    each acknowledged record's partition and offset."""

    def __init__(self, bootstrap: str, topic: str, client: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.client = bootstrap, topic, client
        self.stop_at = threading.Event()
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self.sent = 0
        self.proc: subprocess.Popen[str] | None = None  # the kafka-python writer's

    def _ack(self, partition: int, offset: int, value: bytes) -> None:
        self.acked[partition].append((offset, value))

    def run(self) -> None:
        if self.client == "confluent":
            self._run_confluent()
        else:
            self._run_kafka_python()

    def _run_confluent(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000,
                             "retry.backoff.ms": 100})

        def delivered(err, msg) -> None:  # noqa: ANN001
            if err is not None:
                self.errors.append(str(err))
            else:
                self._ack(msg.partition(), msg.offset(), msg.value())

        while not self.stop_at.is_set():
            value = f"c-{self.sent}".encode()
            producer.produce(self.topic, value=value, partition=self.sent % PARTITIONS,
                             on_delivery=delivered)
            self.sent += 1
            producer.poll(0.002)
        if producer.flush(120) != 0:
            self.errors.append("records left unacknowledged")

    def _run_kafka_python(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("kafka_python_writer.py")),
             self.bootstrap, self.topic, str(PARTITIONS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.proc = proc
        self.stop_at.wait()
        try:
            out, _ = proc.communicate("", timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            self.errors.append("the kafka-python writer did not stop within 240 s")
        for line in out.splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "ack":
                partition, offset, value = rest.split(" ")
                self._ack(int(partition), int(offset), value.encode())
            elif kind == "error":
                self.errors.append(rest)
            elif kind == "sent":
                self.sent = int(rest)


    def close(self) -> None:
        """Stopped, whatever state the test left it in: a kafka-python writer still running
        (a test that failed midway) is killed, so that nothing outlives the test."""
        self.stop_at.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.join(60)


def check(c: Cluster, topic: str, writer: Writer) -> None:
    assert writer.errors == []
    total = sum(len(v) for v in writer.acked.values())
    assert total == writer.sent and total > 0
    got = read_all(c.bootstrap, topic, PARTITIONS, total)
    for p in range(PARTITIONS):
        offsets = [o for o, _ in got[p]]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets with gaps"
        values = [v for _, v in got[p]]
        assert len(values) == len(set(values)), f"partition {p}: a record written twice"
        # Every acknowledged record is there, at the offset it was acknowledged with, and
        # each producer's records are in the order it sent them.
        assert sorted(writer.acked[p]) == got[p]
        sent_order = [int(v.split(b"-")[1]) for v in values]
        assert sent_order == sorted(sent_order)


def test_replication_chaos_leaders_killed_again_and_again(tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, *FAST, "zookeeper.session.timeout.ms=3000").start()
    writers: list[Writer] = []
    try:
        for topic in ("chaos-c", "chaos-k"):
            create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
        full = lambda: all(len(partition_state(c, t, p)["isr"]) == 3  # noqa: E731
                           for t in ("chaos-c", "chaos-k") for p in range(PARTITIONS))
        c.wait_for(full, "every ISR full")
        writers = [Writer(c.bootstrap, "chaos-c", "confluent"),
                   Writer(c.bootstrap, "chaos-k", "kafka-python")]
        for w in writers:
            w.start()
        # Bounded in count: a round without a leader to kill is tried again, at most
        # KILLS times in all (each wait below has its own bound in time).
        kills = attempts = 0
        while kills < KILLS and attempts < 2 * KILLS:
            attempts += 1
            time.sleep(1.0)
            topic = ("chaos-c", "chaos-k")[kills % 2]
            victim = partition_state(c, topic, kills % PARTITIONS)["leader"]
            if victim < 0:
                continue
            c.brokers[victim].kill9()
            kills += 1
            c.wait_for(lambda v=victim: str(v) not in c.zk_children("/brokers/ids"),
                       "the killed broker's session ends")
            c.wait_for(lambda v=victim: all(
                partition_state(c, t, p)["leader"] not in (v, -1)
                for t in ("chaos-c", "chaos-k") for p in range(PARTITIONS)),
                "leaders moved off the killed broker")
            c.brokers[victim].start()
            c.wait_for(full, "every ISR full again", timeout_s=60)
        assert kills == KILLS
        for w in writers:
            w.stop_at.set()
        for w in writers:
            w.join(240)
            assert not w.is_alive()
        check(c, "chaos-c", writers[0])
        check(c, "chaos-k", writers[1])
        c.wait_for(lambda: identical_logs(c, "chaos-c", PARTITIONS, [1, 2, 3])
                   and identical_logs(c, "chaos-k", PARTITIONS, [1, 2, 3]),
                   "replicas identical")
    finally:
        for w in writers:
            w.close()
        c.stop()
