"""Pipeline jobs: ``ads pipeline load`` copies topics into a Parquet dataset exactly once,
``ads pipeline status`` shows what is loaded and how far behind the topics it is.

A load is a sequence of batches. Each batch reads, with the ``ads`` source, every assigned
partition from the offset the output directory's last commit reached (a partition seen for
the first time starts at its earliest offset, or its latest with ``starting="latest"``) up
to a planned end, writes Parquet partitioned by ``topic`` and ``date`` (the record
timestamp's UTC date) into a staging directory, and commits the end offsets with the files
(``ads.spark.output``). The offsets live only in the output directory, so a job killed at
any point and run again neither skips nor repeats a record. One Spark task reads each
topic partition (or each piece of it, when ``min_partitions`` asks for more tasks).

Triggers: ``once`` loads everything available in one batch; ``available-now`` loads what is
available when the job starts, in batches of at most ``max_records_per_batch``; an interval
(``30s``, ``5m``) keeps loading in such batches, waiting that long when caught up, until
the process is stopped.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ads.spark.options import SourceOptions, duration_ms
from ads.spark.output import Commit, OutputLog
from ads.spark.planning import (
    Planner,
    from_json_offsets,
    rate_limit,
    report_data_loss,
    to_json_offsets,
)
from ads.spark.wire import Cluster, TopicPartition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LoadOptions", "LoadResult", "PartitionStatus", "Report", "checkpoint_status",
           "install_stop_handlers", "last_committed_offsets", "load", "logged_offsets",
           "restore_stop_handlers", "status", "utc_date"]

_CONCURRENT_WRITERS = 16

Offsets = dict[TopicPartition, int]
Report = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class LoadOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    output: Path
    trigger: str = "available-now"
    max_records_per_batch: int = 5_000_000
    starting: str = "earliest"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    # client security properties (``ads.spark.options.security_properties``)
    security: tuple[tuple[str, str], ...] = ()

    def interval_s(self) -> float | None:
        if self.trigger in ("once", "available-now"):
            return None
        return duration_ms(self.trigger, "--trigger") / 1000


@dataclass(slots=True)
class LoadResult:
    batches: int = 0
    records: int = 0
    seconds: float = 0.0
    commits: list[Commit] = field(default_factory=list)


def _source_options(o: LoadOptions) -> SourceOptions:
    return SourceOptions(bootstrap_servers=o.bootstrap_servers, strategy="subscribe",
                         topics=o.topics, fail_on_data_loss=o.fail_on_data_loss,
                         security=o.security)


def _plan_batch(planner: Planner, committed: Offsets, o: LoadOptions,
                target: Offsets | None) -> tuple[Offsets, Offsets, Offsets]:
    """(start, end, latest) offsets of the next batch."""
    tps = planner.partitions()
    latest = planner.latest(tps)
    earliest = planner.earliest(tps)
    start = {}
    for tp in tps:
        if tp in committed:
            first = committed[tp]
            if first < earliest[tp]:
                report_data_loss(o.fail_on_data_loss,
                                 f"Offsets {first} to {earliest[tp]} of {tp} were deleted "
                                 "before they were loaded")
                first = earliest[tp]
            start[tp] = first
        else:
            start[tp] = latest[tp] if o.starting == "latest" else earliest[tp]
    bound = latest if target is None else {
        tp: min(end, target.get(tp, start[tp])) for tp, end in latest.items()}
    bound = {tp: max(end, start[tp]) for tp, end in bound.items()}
    if o.trigger == "once":
        return start, bound, latest
    return start, rate_limit(start, bound, o.max_records_per_batch), latest


def _count_staged(staging: Path, files: Sequence[str]) -> dict[str, dict[str, int]]:
    """Records per topic and partition in the staged files (Parquet footers and the
    partition column only)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    counts: dict[str, dict[str, int]] = {}
    for rel in files:
        # Kafka topic names need no escaping in Hive-style directory names.
        topic = next((part.split("=", 1)[1] for part in Path(rel).parts
                      if part.startswith("topic=")), "")
        column = pq.read_table(staging / rel, columns=["partition"]).column("partition")
        for entry in pc.value_counts(column).to_pylist():
            per = counts.setdefault(topic, {})
            key = str(entry["values"])
            per[key] = per.get(key, 0) + int(entry["counts"])
    return counts


def _add_counts(total: Mapping[str, Mapping[str, int]],
                more: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    out = {t: dict(p) for t, p in total.items()}
    for topic, parts in more.items():
        for partition, n in parts.items():
            out.setdefault(topic, {})[partition] = out.get(topic, {}).get(partition, 0) + n
    return out


class _Progress:
    """Prints the running batch's task progress every few seconds."""

    def __init__(self, spark: SparkSession, report: Report, every_s: float = 5.0) -> None:
        self.spark = spark
        self.report = report
        self.every_s = every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ads-load-progress", daemon=True)

    def __enter__(self) -> _Progress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=2)

    def _run(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self.stop.wait(self.every_s):
            done = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                self.report(f"  ... {done}/{total} tasks done")


def _batch_frame(spark: SparkSession, o: LoadOptions, start: Offsets, end: Offsets
                 ) -> object:
    ranged = {tp: s for tp, s in start.items() if end[tp] > s}
    assign: dict[str, list[int]] = {}
    for tp in sorted(ranged):
        assign.setdefault(tp.topic, []).append(tp.partition)
    reader = (spark.read.format("ads")
              .option("kafka.bootstrap.servers", o.bootstrap_servers)
              .option("assign", json.dumps(assign))
              .option("startingOffsets", json.dumps(to_json_offsets(ranged)))
              .option("endingOffsets", json.dumps(to_json_offsets(
                  {tp: end[tp] for tp in ranged})))
              .option("failOnDataLoss", str(o.fail_on_data_loss).lower()))
    if o.min_partitions:
        reader = reader.option("minPartitions", str(o.min_partitions))
    for key, value in o.security:
        reader = reader.option(f"kafka.{key}", value)
    df = reader.load()
    return df.withColumn("date", utc_date(spark))


def utc_date(spark: SparkSession) -> Any:
    """The ``date`` partition column: the record timestamp's UTC date, ``yyyy-MM-dd``,
    whatever the session's time zone (timestamps are shown in it)."""
    from pyspark.sql import functions as f

    return f.date_format(
        f.to_utc_timestamp(f.col("timestamp"),
                           spark.conf.get("spark.sql.session.timeZone") or "UTC"),
        "yyyy-MM-dd")


def load(spark: SparkSession, o: LoadOptions, report: Report = print) -> LoadResult:
    """Runs the load; returns when the trigger is satisfied or the process is asked to
    stop (SIGTERM, SIGINT) between batches."""
    from ads.spark import register

    register(spark)
    log = OutputLog(o.output)
    result = LoadResult()
    stopping = threading.Event()
    previous = install_stop_handlers(stopping)
    began = time.monotonic()
    try:
        with log.lock(), Cluster(o.bootstrap_servers, security=dict(o.security)) as cluster:
            log.recover()
            planner = Planner(_source_options(o), cluster)
            target = None
            if o.trigger == "available-now":
                target = planner.latest(planner.partitions())
            while not stopping.is_set():
                last = log.latest()
                committed = from_json_offsets(last.offsets) if last else {}
                start, end, latest = _plan_batch(planner, committed, o, target)
                batch_records = sum(end[tp] - start[tp] for tp in end)
                if batch_records == 0:
                    if o.interval_s() is None:
                        break
                    stopping.wait(o.interval_s())
                    continue
                commit = _run_batch(spark, log, o, last, start, end, report)
                result.batches += 1
                result.records += commit.batch_records
                result.commits.append(commit)
                lag = sum(latest[tp] - end.get(tp, latest[tp]) for tp in latest)
                elapsed = time.monotonic() - began
                report(f"batch {commit.batch}: {commit.batch_records} records, "
                       f"{result.records / max(elapsed, 1e-9):,.0f} records/s overall, "
                       f"lag {max(lag, 0)}")
                if o.trigger == "once":
                    break
    finally:
        restore_stop_handlers(previous)
    result.seconds = time.monotonic() - began
    return result


def _run_batch(spark: SparkSession, log: OutputLog, o: LoadOptions, last: Commit | None,
               start: Offsets, end: Offsets, report: Report) -> Commit:
    batch = 0 if last is None else last.batch + 1
    staging = log.new_staging(batch)
    frame = _batch_frame(spark, o, start, end)
    # A task reads one partition, whose records span few dates: with a writer open per
    # date, Spark need not sort the task's rows by the partition columns first.
    key = "spark.sql.maxConcurrentOutputFileWriters"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, str(_CONCURRENT_WRITERS))
    try:
        with _Progress(spark, report):
            frame.write.partitionBy("topic", "date").mode(  # type: ignore[attr-defined]  # see savemode
                "overwrite").parquet(str(staging))
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
    files = OutputLog.data_files(staging)
    counts = _count_staged(staging, files)
    records = _add_counts(last.records if last else {}, counts)
    offsets = to_json_offsets({**(from_json_offsets(last.offsets) if last else {}), **end})
    return log.commit(batch, staging, offsets, records,
                      sum(n for parts in counts.values() for n in parts.values()),
                      o.bootstrap_servers)


# What signal.signal returns and accepts (typeshed keeps the name private).
StopHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def install_stop_handlers(stopping: threading.Event) -> dict[int, StopHandler]:
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()

    previous: dict[int, StopHandler] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    return previous


def restore_stop_handlers(previous: dict[int, StopHandler]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    topic: str
    partition: int
    loaded_to: int | None  # next offset to load; None if nothing loaded yet
    records: int | None  # None for a streaming job, whose checkpoint does not count them
    end: int | None  # the partition's latest offset; None if the cluster was not asked
    lag: int | None


def status(output: str | Path, bootstrap_servers: str | None = None,
           security: Mapping[str, str] | None = None
           ) -> tuple[Commit | None, list[PartitionStatus]]:
    """What the output directory holds per partition, and the lag to the topics' ends
    (asked of ``bootstrap_servers``, or of the cluster the last commit came from, with the
    client ``security`` properties)."""
    last = OutputLog(output).latest()
    if last is None:
        return None, []
    records: dict[TopicPartition, int | None] = dict(from_json_offsets(last.records))
    return last, _status_rows(from_json_offsets(last.offsets), records,
                              bootstrap_servers or last.bootstrap_servers, security)


def _status_rows(loaded: Offsets, records: Mapping[TopicPartition, int | None],
                 servers: str | None, security: Mapping[str, str] | None
                 ) -> list[PartitionStatus]:
    latest: Offsets = {}
    if servers:
        with Cluster(servers, security=security) as cluster:
            options = SourceOptions(bootstrap_servers=servers, strategy="subscribe",
                                    topics=tuple(sorted({tp.topic for tp in loaded})),
                                    fail_on_data_loss=False)
            planner = Planner(options, cluster)
            latest = planner.latest(planner.partitions())
    rows = []
    for tp in sorted(set(loaded) | set(latest)):
        end = latest.get(tp)
        at = loaded.get(tp)
        lag = None if end is None else end - (at if at is not None else 0)
        rows.append(PartitionStatus(tp.topic, tp.partition, at, records.get(tp, 0), end,
                                    lag))
    return rows


def checkpoint_status(checkpoint: str | Path, bootstrap_servers: str | None = None,
                      security: Mapping[str, str] | None = None
                      ) -> tuple[int | None, list[PartitionStatus]]:
    """The last micro-batch a streaming job (``copy``, ``table``) committed in its
    checkpoint, the input offsets it reached per partition, and the lag to the topics'
    ends when ``bootstrap_servers`` is given (the checkpoint does not name the cluster)."""
    batch = _last_committed(Path(checkpoint))
    if batch is None:
        return None, []
    loaded = logged_offsets(Path(checkpoint), batch)
    return batch, _status_rows(loaded, dict.fromkeys(loaded), bootstrap_servers, security)


def _last_committed(checkpoint: Path) -> int | None:
    commits = checkpoint / "commits"
    done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] \
        if commits.is_dir() else []
    return max(done) if done else None


def last_committed_offsets(checkpoint: Path) -> Offsets:
    """The input offsets the checkpoint's last committed micro-batch reached; none for a
    checkpoint without a committed micro-batch."""
    batch = _last_committed(checkpoint)
    return {} if batch is None else logged_offsets(checkpoint, batch)


def logged_offsets(checkpoint: Path, batch: int) -> Offsets:
    """The end offsets Spark logged for micro-batch ``batch`` before running it."""
    # offsets/N: a version line, the batch's metadata, then one line per source with the
    # end offsets it logged (the ads source's are {"topic": {"partition": next offset}}).
    lines = (checkpoint / "offsets" / str(batch)).read_text(encoding="utf-8").splitlines()
    loaded: Offsets = {}
    for line in lines[2:]:
        data = json.loads(line) if line.strip() not in ("", "-") else None
        if isinstance(data, str):  # a source whose offset is a JSON string of JSON
            data = json.loads(data)
        if isinstance(data, dict):
            loaded.update(from_json_offsets(data))
    return loaded
