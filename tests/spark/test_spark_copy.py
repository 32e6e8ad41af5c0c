"""`ads pipeline copy`: a topic copied into another through a transform, exactly once and
in order per partition, skipping aborted input; the job killed with SIGKILL mid-batch
while a transactional producer feeds the input, and started again, still leaves every
committed input record exactly once in the output; SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.utils import AnalysisException

from ads.spark.copy import CopyError, CopyOptions, copy
from ads.testing import EmbeddedBroker
from conftest import create_topic

HERE = Path(__file__).parent
PREFIX = b"copied:"

Record = tuple[bytes | None, bytes, list[tuple[str, bytes]] | None]


def feed(bootstrap: str, topic: str, partitions: int, first: int, count: int, *,
         txn_size: int, abort_every: int = 0, pause_s: float = 0.0,
         stop: threading.Event | None = None) -> dict[int, list[Record]]:
    """Produces records ``first .. first+count-1`` (record i to partition i % partitions)
    in transactions of ``txn_size``, aborting every ``abort_every``-th one; returns the
    committed records per partition, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "transactional.id": f"feed-{topic}-{first}"})
    producer.init_transactions(30)
    committed: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    for n, start in enumerate(range(first, first + count, txn_size)):
        if stop is not None and stop.is_set():
            break
        pending: list[tuple[int, Record]] = []
        producer.begin_transaction()
        for i in range(start, min(start + txn_size, first + count)):
            headers = [("seq", b"%d" % i)] if i % 3 == 0 else None
            record: Record = (b"k%d" % (i % 50), b"r%06d" % i, headers)
            producer.produce(topic, key=record[0], value=record[1], headers=headers,
                             partition=i % partitions)
            pending.append((i % partitions, record))
        if abort_every and n % abort_every == abort_every - 1:
            # Sent first: aborting purges what the client has not sent yet, and the
            # aborted records must be in the log for the readers to skip them.
            assert producer.flush(30) == 0
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            for partition, record in pending:
                committed[partition].append(record)
        time.sleep(pause_s)
    return committed


def read_committed(bootstrap: str, topic: str, partitions: int, expected: int,
                   settle_s: float = 3.0, limit_s: float = 60.0) -> dict[int, list[Record]]:
    """Everything a read_committed consumer sees, per partition in offset order: read
    until ``expected`` records arrived, then ``settle_s`` more to let duplicates show."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copy-verify",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    total = 0
    deadline = time.monotonic() + limit_s
    settled: float | None = None
    try:
        while time.monotonic() < deadline and (settled is None or time.monotonic() < settled):
            for m in consumer.consume(1000, timeout=0.2):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.key(), m.value(), m.headers()))
                total += 1
            if settled is None and total >= expected:
                settled = time.monotonic() + settle_s
    finally:
        consumer.close()
    return out


def tagged(records: dict[int, list[Record]]) -> dict[int, list[Record]]:
    return {p: [(k, PREFIX + v, h) for k, v, h in rs] for p, rs in records.items()}


def options(bootstrap: str, source: str, target: str, checkpoint: Path,
            **more: Any) -> CopyOptions:
    return CopyOptions(bootstrap_servers=bootstrap, from_topic=source, to_topic=target,
                       checkpoint=checkpoint, **more)


@pytest.mark.timeout(300)  # two copies, one of several micro-batches: 45 s on busy cores
def test_spark_copy_transform_keeps_order_and_skips_aborted(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "c-in", 3)
    create_topic(bootstrap, "c-out", 3)
    committed = feed(bootstrap, "c-in", 3, 0, 240, txn_size=40, abort_every=3)
    expected = sum(len(r) for r in committed.values())
    assert expected == 160
    o = options(bootstrap, "c-in", "c-out", tmp_path / "checkpoint",
                transform="copy_transforms:tag", max_records_per_batch=50)
    lines: list[str] = []
    result = copy(spark, o, report=lines.append)
    assert result.records == expected and result.batches >= 3
    assert any(line.startswith("batch ") and "records/s" in line for line in lines)
    assert read_committed(bootstrap, "c-out", 3, expected) == tagged(committed)

    # Run again on the same checkpoint: only what came since is copied.
    more = feed(bootstrap, "c-in", 3, 1000, 30, txn_size=30)
    again = copy(spark, o, report=lines.append)
    assert again.records == 30
    whole = {p: committed[p] + more[p] for p in committed}
    assert read_committed(bootstrap, "c-out", 3, expected + 30) == tagged(whole)


def test_spark_copy_without_transform_copies_records_as_they_are(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "p-in", 2)
    create_topic(bootstrap, "p-out", 4)  # more partitions than the input is fine
    committed = feed(bootstrap, "p-in", 2, 0, 40, txn_size=40)
    result = copy(spark, options(bootstrap, "p-in", "p-out", tmp_path / "checkpoint"),
                  report=lambda _: None)
    assert result.records == 40
    assert read_committed(bootstrap, "p-out", 4, 40) == {**committed, 2: [], 3: []}


def test_spark_copy_by_key_into_fewer_partitions(spark: SparkSession, broker: EmbeddedBroker,
                                                 tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "k-in", 3)
    create_topic(bootstrap, "k-out", 2)
    committed = feed(bootstrap, "k-in", 3, 0, 90, txn_size=90)
    o = options(bootstrap, "k-in", "k-out", tmp_path / "checkpoint",
                transform="copy_transforms:tag_sql", partitioning="key")
    result = copy(spark, o, report=lambda _: None)
    assert result.records == 90  # input rows; the transform keeps those at even offsets
    kept = sorted(PREFIX + v for rs in committed.values() for v in
                  (r[1] for i, r in enumerate(rs) if i % 2 == 0))
    got = read_committed(bootstrap, "k-out", 2, len(kept))
    assert sorted(v for rs in got.values() for _, v, _ in rs) == kept
    where = {k: p for p, rs in got.items() for k, _, _ in rs}
    assert all(where[k] == p for p, rs in got.items() for k, _, _ in rs)
    assert set(where.values()) == {0, 1}


def test_spark_copy_refuses_what_cannot_work(spark: SparkSession, broker: EmbeddedBroker,
                                             tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "r-in", 2)
    create_topic(bootstrap, "r-out", 1)
    checkpoint = tmp_path / "checkpoint"
    with pytest.raises(CopyError, match="'r-none' does not exist"):
        copy(spark, options(bootstrap, "r-in", "r-none", checkpoint))
    with pytest.raises(CopyError, match="has 1 partitions, fewer than the 2"):
        copy(spark, options(bootstrap, "r-in", "r-out", checkpoint))
    with pytest.raises(CopyError, match="partitioning must be one of same, key"):
        copy(spark, options(bootstrap, "r-in", "r-out", checkpoint, partitioning="random"))
    with pytest.raises(CopyError, match="MODULE:FUNCTION"):
        copy(spark, options(bootstrap, "r-in", "r-out", checkpoint, partitioning="key",
                            transform="copy_transforms"))
    with pytest.raises(CopyError, match="no function 'nope'"):
        copy(spark, options(bootstrap, "r-in", "r-out", checkpoint, partitioning="key",
                            transform="copy_transforms:nope"))
    with pytest.raises(CopyError, match="must return the streaming DataFrame"):
        copy(spark, options(bootstrap, "r-in", "r-out", checkpoint, partitioning="key",
                            transform="copy_transforms:not_a_frame"))
    assert not checkpoint.exists()
    with pytest.raises((PySparkException, AnalysisException),
                       match=r"Invalid kafka\.\* option.*no\.such\.setting"):
        copy(spark, options(bootstrap, "r-in", "r-out", checkpoint, partitioning="key",
                            producer_config=(("no.such.setting", "1"),)))


@pytest.mark.parametrize(("args", "message"), [
    (["--to-topic", "a"], "--from-topic and --to-topic must differ"),
    (["--to-topic", "b", "--trigger", "soon"], "--trigger"),
    (["--to-topic", "b", "--max-records-per-batch", "0"], "must be positive"),
    (["--to-topic", "b", "--producer-conf", "linger.ms"], "expected KEY=VALUE"),
])
def test_spark_copy_cli_usage_errors(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "ads.cli.main", "pipeline", "copy",
                           "--from-topic", "a", *args], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


class CopyJob:
    """``ads pipeline copy`` (or another ``verb``) in a process group of its own, so that
    SIGKILL takes the driver, its JVM and Spark's Python workers down at once, as a lost
    machine would. Its output goes to a file (a pipe nobody reads would stall Spark's
    logging). ``env``: the environment it starts from (the process's own by default)."""

    def __init__(self, log: Path, *args: str, verb: str = "copy",
                 env: Mapping[str, str] | None = None) -> None:
        env = dict(os.environ if env is None else env, PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable,
                   PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ads.cli.main", "pipeline", verb, *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        finally:
            self.kill()


class OpenTransaction:
    """Called: whether a transaction holds written records of ``topic`` uncommitted (its
    high watermark is past its last stable offset)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
        self.consumers = {
            level: Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{level}",
                             "isolation.level": level})
            for level in ("read_committed", "read_uncommitted")}

    def __call__(self) -> bool:
        for tp in self.tps:
            ends = {level: c.get_watermark_offsets(tp, timeout=5, cached=False)[1]
                    for level, c in self.consumers.items()}
            if ends["read_uncommitted"] > ends["read_committed"]:
                return True
        return False

    def __enter__(self) -> OpenTransaction:
        return self

    def __exit__(self, *exc: object) -> None:
        for c in self.consumers.values():
            c.close()


def kill_mid_batch(job: CopyJob, checkpoint: Path, after: int,
                   inside: Callable[[], bool] = lambda: True, limit_s: float = 150.0) -> int:
    """SIGKILLs the job once at least ``after`` micro-batches are committed, the next one
    is running (logged in offsets/, not yet in commits/) and ``inside()`` holds; returns
    the number of committed batches then."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"

    def logged(d: Path) -> set[str]:
        return {p.name for p in d.iterdir() if p.name.isdigit()} if d.is_dir() else set()

    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline and job.process.poll() is None:
            done = logged(commits)
            if len(done) >= after and logged(offsets) - done and inside():
                return len(done)
            time.sleep(0.01)
    finally:
        job.kill()
    raise AssertionError(f"no batch running after {after} commits:\n{job.output()}")


@pytest.mark.timeout(480)  # about 2 minutes; more when other work shares the cores
def test_spark_copy_sigkill_and_restart(broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "feed-in", 3)
    create_topic(bootstrap, "feed-out", 3)
    checkpoint = tmp_path / "checkpoint"
    args = ["--bootstrap-server", bootstrap, "--from-topic", "feed-in", "--to-topic",
            "feed-out", "--checkpoint", str(checkpoint),
            "--transform", "copy_transforms:tag_slowly", "--master", "local[2]",
            "--max-records-per-batch", "150",
            "--spark-conf", "spark.ui.enabled=false",
            "--spark-conf", "spark.sql.execution.arrow.maxRecordsPerBatch=10"]
    committed: dict[int, list[Record]] = {}
    stop = threading.Event()

    def producer() -> None:
        committed.update(feed(bootstrap, "feed-in", 3, 0, 3000, txn_size=100,
                              abort_every=5, pause_s=0.8, stop=stop))

    feeder = threading.Thread(target=producer, name="feeder")
    feeder.start()
    try:
        first = kill_mid_batch(CopyJob(tmp_path / "run-1.log", *args, "--trigger", "200ms"),
                               checkpoint, after=1)
        # The second kill lands inside a sink transaction that has written records.
        with OpenTransaction(bootstrap, "feed-out", 3) as open_transaction:
            kill_mid_batch(CopyJob(tmp_path / "run-2.log", *args, "--trigger", "200ms"),
                           checkpoint, after=first + 1, inside=open_transaction)
    except BaseException:
        stop.set()
        raise
    finally:
        feeder.join(timeout=120)
    assert not feeder.is_alive()
    expected = sum(len(r) for r in committed.values())
    assert expected == 2400  # 30 transactions of 100, every 5th aborted

    # A third run catches up, and stops cleanly on SIGTERM between micro-batches.
    last = CopyJob(tmp_path / "run-3.log", *args, "--trigger", "200ms")
    try:
        caught_up = read_committed(bootstrap, "feed-out", 3, expected, settle_s=0,
                                   limit_s=150)
        assert sum(len(r) for r in caught_up.values()) >= expected, last.output()
        last.process.send_signal(signal.SIGTERM)
        assert last.wait(timeout_s=120) == 0, last.output()
    finally:
        last.kill()
    assert "copied" in last.output() and "records/s" in last.output()
    assert read_committed(bootstrap, "feed-out", 3, expected) == tagged(committed)
    with OpenTransaction(bootstrap, "feed-out", 3) as still_open:
        assert not still_open()  # the killed transaction was aborted, the LSO moved on
