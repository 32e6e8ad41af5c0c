"""A Kafka Streams application (kafka-streams 4.4.0, `processing.guarantee=exactly_once_v2`)
against three `ads broker` processes on a real ZooKeeper, every topic with replication
factor 3, one of its two instances killed with SIGKILL mid-stream and started again.

The application (`tests/kafka_streams`, docs/java-clients.md "Kafka Streams") joins orders
with their payments (a stream-stream join: two windowed RocksDB stores and their changelogs)
and re-keys the orders by customer (a repartition topic) to collect, per customer and 10 s
window, the ids of the orders seen (a windowed RocksDB store and its changelog), writing
every update. Its record cache is off, so each input order makes exactly one record in
each output topic. The test produces the input while the instances run; one instance stalls
in the middle of a transaction (after its 300th output record) and is killed with SIGKILL
there, then restarted on its state directory. Both outputs are read with `read_committed`:
the joined records must be exactly one per order, and each window's updates must grow by
exactly one order at a time up to exactly the orders of that window, so a record processed
twice or lost shows as a difference; `read_uncommitted` must see the aborted transaction's
records besides.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster, wait_until
from java_support import CLUSTER_SETTINGS, JVM_OPTIONS, broker_logs

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]

STREAMS_DIR = Path(__file__).parents[1] / "kafka_streams"
APP_ID = "ads-streams-orders"
PARTITIONS = 3
ORDERS = 1500
CUSTOMERS = 12
METHODS = ("card", "cash", "transfer", "voucher")
WINDOW_MS = 10_000
OUTPUTS = ("paid", "windowed")
# The application's own topics (KafkaStreams names them after the application id and the
# names the topology gives).
INTERNAL_TOPICS = tuple(f"{APP_ID}-{name}" for name in (
    "by-customer-repartition", "orders-per-window-changelog",
    "paid-join-this-join-store-changelog", "paid-join-other-join-store-changelog"))
# Input production: in chunks, a pause between them, so records are still flowing when an
# instance is killed and when it comes back (that many chunks later).
CHUNKS = 10
RESTART_CHUNKS_AFTER_KILL = 2
# The instance to kill stalls in the middle of a transaction once it has sent this many
# output records (about a fifth of its share), and is killed then.
STALL_AFTER = 300
# Each instance halts itself past this; every wait of the test is shorter.
INSTANCE_DEADLINE_S = 240
OUTPUT_TIMEOUT_S = 120


class Instance:
    """One JVM running the application, its output in a log file."""

    def __init__(self, name: str, root: Path, bootstrap: str, *args: str) -> None:
        self.name = name
        self.args = args
        self.state_dir = root / f"state-{name}"
        self.log_path = root / f"{name}.log"
        self.bootstrap = bootstrap
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0

    def command(self) -> list[str]:
        build = STREAMS_DIR / "target"
        assert (build / "classes").is_dir() and (build / "lib").is_dir(), (
            f"the Streams application is built by `make test` (Maven, {STREAMS_DIR}/pom.xml):"
            f" {build} is missing")
        classpath = f"{build / 'classes'}:{build / 'lib'}/*"
        return ["java", *JVM_OPTIONS, "-cp", classpath, "ads.streams.OrdersApp",
                self.bootstrap, f"app.id={APP_ID}", f"state.dir={self.state_dir}",
                f"deadline.s={INSTANCE_DEADLINE_S}", *self.args]

    def start(self) -> None:
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.command(),  # noqa: S603
                                     stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_since_start(self) -> str:
        return self.log()[self._log_start:]

    def running(self) -> bool:
        assert self.proc is not None
        assert self.proc.poll() is None, f"instance {self.name} exited:\n{self.log()[-5000:]}"
        return "STATE RUNNING" in self.log_since_start()

    def stalled(self) -> bool:
        return "STALLED" in self.log_since_start()

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._close_log()

    def stop(self) -> None:
        """SIGTERM: the application closes (committing) and says so."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self._close_log()
        assert "CLOSED" in self.log_since_start(), (
            f"instance {self.name} did not close:\n{self.log()[-5000:]}")

    def reap(self) -> None:
        """Killed by its pid if still running (a failed test)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    with Cluster(tmp_path_factory.mktemp("kafka-streams"), 3, *CLUSTER_SETTINGS).running() as c:
        yield c


Record = tuple[str, str, int]  # key, value, timestamp (ms)


def make_input(base_ms: int) -> tuple[list[Record], list[Record]]:
    """Orders (`o-NNNNN` -> `customer:amount`), 40 ms apart, and one payment per order
    within 20 s of it: the same every run but the base time."""
    rng = random.Random(22)
    orders = [(f"o-{i:05d}", f"c-{rng.randrange(CUSTOMERS):02d}:{rng.randrange(1, 500)}",
               base_ms + 40 * i) for i in range(ORDERS)]
    payments = [(key, rng.choice(METHODS), ts + rng.randrange(-20_000, 20_000))
                for key, _, ts in orders]
    return orders, payments


def expected_paid(orders: list[Record], payments: list[Record]) -> Counter[tuple[str, str]]:
    methods = {key: method for key, method, _ in payments}
    return Counter((key, f"{order}:{methods[key]}") for key, order, _ in orders)


def expected_windows(orders: list[Record]) -> dict[str, set[str]]:
    windows: dict[str, set[str]] = defaultdict(set)
    for key, order, ts in orders:
        customer = order.split(":")[0]
        windows[f"{customer}@{ts - ts % WINDOW_MS}"].add(key)
    return dict(windows)


def produce(producer: Producer, topic: str, records: list[Record]) -> None:
    for key, value, ts in records:
        producer.produce(topic, key=key.encode(), value=value.encode(), timestamp=ts)
        producer.poll(0)
    assert producer.flush(30) == 0, f"records to {topic} still unacknowledged"


class OutputReader:
    """A consumer of whole topics from their start (`read_committed` unless told), keeping
    every record in the order of each partition."""

    def __init__(self, bootstrap: str, topics: tuple[str, ...] = OUTPUTS,
                 isolation: str = "read_committed") -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "streams-output-check",
            "isolation.level": isolation, "enable.auto.commit": False,
            "enable.partition.eof": True})
        self.partitions = [TopicPartition(t, p, 0) for t in topics for p in range(PARTITIONS)]
        self.consumer.assign(self.partitions)
        self.records: dict[str, list[tuple[str, str]]] = {t: [] for t in topics}
        self.at_end: set[tuple[str, int]] = set()

    def poll(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                self.at_end.add((msg.topic(), msg.partition()))
                continue
            self.at_end.discard((msg.topic(), msg.partition()))
            key, value = msg.key() or b"", msg.value() or b""
            self.records[msg.topic()].append((key.decode(errors="replace"),
                                              value.decode(errors="replace")))

    def count(self) -> int:
        return sum(map(len, self.records.values()))

    def counts(self) -> str:
        return ", ".join(f"{t} {len(r)}" for t, r in self.records.items())

    def read_to_end(self, timeout_s: float) -> None:
        """Until every partition has reported its end; for a reader started after the
        application stopped (an end is reported once, when first reached)."""
        deadline = time.monotonic() + timeout_s
        while len(self.at_end) < len(self.partitions) and time.monotonic() < deadline:
            self.poll(0.5)
        assert len(self.at_end) == len(self.partitions), (
            f"not read to the end: {sorted(self.at_end)}")

    def close(self) -> None:
        self.consumer.close()


def produce_and_kill(producer: Producer, orders: list[Record], payments: list[Record],
                     b: Instance, reader: OutputReader, logs: Callable[[], str]) -> None:
    """Produces the input in chunks; kills `b` once it stalls in a transaction (waiting for
    that after the last chunk if need be), and starts it again (without stalling)
    RESTART_CHUNKS_AFTER_KILL chunks later, or after the last."""
    size = ORDERS // CHUNKS
    killed_after: int | None = None
    for chunk in range(CHUNKS):
        part = slice(chunk * size, (chunk + 1) * size)
        produce(producer, "orders", orders[part])
        produce(producer, "payments", payments[part])
        reader.poll(0.5)
        if killed_after is None and b.stalled():
            kill_stalled(b, reader)
            killed_after = chunk
        elif killed_after == chunk - RESTART_CHUNKS_AFTER_KILL:
            restart(b, reader)
    if killed_after is None:
        wait_until(b.stalled, "instance b stalled mid-transaction", 60, logs)
        kill_stalled(b, reader)
    if b.args:
        restart(b, reader)


def restart(instance: Instance, reader: OutputReader) -> None:
    instance.args = ()  # it comes back without stalling
    instance.start()
    print(f"restarted instance {instance.name} at {reader.counts()}")


def kill_stalled(instance: Instance, reader: OutputReader) -> None:
    # The record it stalled after is on its way to the brokers (linger.ms=0): let it arrive.
    reader.poll(0.5)
    instance.kill9()
    print(f"killed instance {instance.name} (SIGKILL) in a transaction at {reader.counts()}")


def read_everything(bootstrap: str, isolation: str) -> OutputReader:
    every = OutputReader(bootstrap, OUTPUTS + INTERNAL_TOPICS, isolation)
    try:
        every.read_to_end(30)
    finally:
        every.close()
    print(f"{isolation}: {every.counts()}")
    return every


def window_problems(updates: list[tuple[str, str]], expected: dict[str, set[str]]) -> list[str]:
    """Each window's updates, in the order written, must add exactly one new order each,
    ending with exactly the window's orders."""
    by_window: dict[str, list[str]] = defaultdict(list)
    for key, ids in updates:
        by_window[key].append(ids)
    problems = []
    for key in sorted(by_window.keys() | expected.keys()):
        seen = by_window.get(key, [])
        final = seen[-1].split(",") if seen else []
        if any(ids != ",".join(final[:n + 1]) for n, ids in enumerate(seen)):
            problems.append(f"{key}: updates not one order at a time: {seen}")
        if len(final) != len(set(final)) or set(final) != expected.get(key, set()):
            problems.append(f"{key}: final {sorted(final)} != expected "
                            f"{sorted(expected.get(key, set()))}")
    return problems


def test_kafka_streams_exactly_once_survives_instance_kill(cluster: Cluster,
                                                           tmp_path: Path) -> None:
    admin = cluster.admin()
    topics = ("orders", "payments", "paid", "windowed")
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in topics],
                                      operation_timeout=30).values():
        future.result(timeout=30)
    base_ms = int(time.time() * 1000) // WINDOW_MS * WINDOW_MS
    orders, payments = make_input(base_ms)
    instances = {"a": Instance("a", tmp_path, cluster.bootstrap),
                 "b": Instance("b", tmp_path, cluster.bootstrap, f"stall.after={STALL_AFTER}")}
    b = instances["b"]
    reader = OutputReader(cluster.bootstrap)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random", "linger.ms": 5})

    def logs() -> str:
        return "\n".join(f"--- instance {i.name}\n{i.log()[-4000:]}"
                         for i in instances.values()) + f"\n{broker_logs(cluster)}"

    try:
        for instance in instances.values():
            instance.start()
        wait_until(lambda: all(i.running() for i in instances.values()),
                   "both instances RUNNING", 90, logs)
        produce_and_kill(producer, orders, payments, b, reader, logs)

        def complete() -> bool:
            reader.poll(1)
            return all(len(r) >= ORDERS for r in reader.records.values())

        wait_until(complete, f"{ORDERS} records in each output", OUTPUT_TIMEOUT_S,
                   lambda: reader.counts() + "\n" + logs())
        assert instances["b"].running()
        for instance in instances.values():
            instance.stop()
    finally:
        for instance in instances.values():
            instance.reap()
        reader.close()
    print(f"while running: {reader.counts()}")
    # Every transaction is complete now (the killed instance's aborted when it came back,
    # the others committed at close): read everything again, outputs and internal topics.
    final = {isolation: read_everything(cluster.bootstrap, isolation)
             for isolation in ("read_committed", "read_uncommitted")}
    committed = final["read_committed"].records

    paid = Counter(committed["paid"])
    expected = expected_paid(orders, payments)
    assert paid == expected, (
        f"joined records: missing {list((expected - paid).items())[:10]}, "
        f"extra {list((paid - expected).items())[:10]}")
    problems = window_problems(committed["windowed"], expected_windows(orders))
    assert not problems, "\n".join(problems[:20])
    assert len(committed["windowed"]) == ORDERS

    # The instance was killed in the middle of a transaction: what it had written in it (to
    # an output, and to the repartition topic or a changelog) was aborted, read_uncommitted
    # sees it and read_committed does not.
    assert final["read_uncommitted"].count() > final["read_committed"].count(), (
        f"no aborted records: the kill found no open transaction\n{logs()}")

    # The application's internal topics, replicated on the three brokers.
    metadata = admin.list_topics(timeout=10).topics
    internal = {name: len(metadata[name].partitions[0].replicas) for name in metadata
                if name.startswith(APP_ID)}
    assert internal == dict.fromkeys(INTERNAL_TOPICS, 3)
