"""``ads pipeline copy``: a Structured Streaming job that copies one topic into another,
optionally through a transform, exactly once end to end.

The query reads the input topic with the ``ads`` source (``read_committed``, so aborted
input never enters) and writes the output topic with the ``ads`` sink's ``exactlyOnce``
mode. The two halves of exactly-once meet in the checkpoint:

- The source's side is Spark's offset log: before micro-batch ``b`` runs, the driver writes
  its input offset range to ``<checkpoint>/offsets/b``. A restarted query replays the last
  logged batch over exactly that range, split into the same tasks (one per input partition
  with records in the range), and starts the next batch where it ended.
- The sink's side is on the broker: task ``p`` of batch ``b`` writes its rows in one
  transaction of transactional id ``ads-sink-<query id>-<p>`` (the query id is in
  ``<checkpoint>/metadata``), committing in the same transaction the offset ``b + 1`` of
  group ``ads-sink-<query id>-<p>``. A replayed task that finds that offset past ``b``
  writes nothing; one whose transaction never committed fences the killed attempt
  (``init_transactions`` aborts what it left open) and writes the rows again.

So whatever instant the job dies at, its rerun neither repeats nor skips a record, as seen
by ``read_committed`` readers of the output.

The transform is ``module:function``, a function from DataFrame to DataFrame applied once
to the streaming input (Spark then runs that plan on every micro-batch, columnar and in the
JVM for DataFrame expressions; Python code runs per Arrow batch through ``mapInArrow`` or
pandas UDFs inside it, never per record through the driver). Its input has the source's
columns with headers; the job writes its ``key``, ``value``, ``headers`` and ``partition``
columns (``value`` required). With ``partitioning="same"`` a record keeps its ``partition``
column, which a transform that does not touch it leaves at the input partition: order per
partition is kept when the transform does not shuffle. ``partitioning="key"`` (or a
transform without that column) partitions by murmur2 of the key, as Kafka's producer does.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ads.spark.options import duration_ms
from ads.spark.pipeline import Report, install_stop_handlers, restore_stop_handlers
from ads.spark.wire import Cluster

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["CopyError", "CopyOptions", "CopyResult", "copy", "follow", "load_transform"]

Transform = Callable[["DataFrame"], "DataFrame"]

PARTITIONINGS = ("same", "key")
_OUTPUT_COLUMNS = ("key", "value", "headers", "partition")
_POLL_S = 1
# How long a stop (SIGTERM) waits for the running micro-batch before interrupting it.
_STOP_GRACE_S = 60.0


class CopyError(RuntimeError):
    """The job cannot start: a topic is missing, the transform cannot be loaded or returns
    something else than a streaming DataFrame, partitions do not fit."""


@dataclass(frozen=True, slots=True)
class CopyOptions:
    bootstrap_servers: str
    from_topic: str
    to_topic: str
    checkpoint: Path
    transform: str | None = None  # module:function
    trigger: str = "available-now"
    max_records_per_batch: int = 100_000
    starting: str = "earliest"
    fail_on_data_loss: bool = True
    partitioning: str = "same"
    producer_config: tuple[tuple[str, str], ...] = ()
    # client security properties for both topics (``ads.spark.options.security_properties``)
    security: tuple[tuple[str, str], ...] = ()

    def interval_s(self) -> float | None:
        if self.trigger == "available-now":
            return None
        return duration_ms(self.trigger, "--trigger") / 1000


@dataclass(slots=True)
class CopyResult:
    batches: int = 0
    records: int = 0
    seconds: float = 0.0
    query_id: str = ""


def load_transform(spec: str) -> tuple[Transform, Path | None]:
    """The function named by ``module:function``, and the module's file when executors can
    be sent it alone (a top-level single-file module); a module inside a package must be
    installed where the executors run."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise CopyError(f"--transform must be MODULE:FUNCTION, got {spec!r}")
    # As `python -m` does, so that a module next to the user's shell is found.
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CopyError(f"cannot import transform module {module_name!r}: {exc}") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise CopyError(f"{module_name} has no function {func_name!r}")
    file = getattr(module, "__file__", None)
    shippable = (file is not None and "." not in module_name and file.endswith(".py")
                 and Path(file).name != "__init__.py")
    return func, Path(file) if shippable and file is not None else None


def check_topics(o: CopyOptions) -> None:
    if o.partitioning not in PARTITIONINGS:
        raise CopyError(f"partitioning must be one of {', '.join(PARTITIONINGS)}, got "
                        f"{o.partitioning!r}")
    with Cluster(o.bootstrap_servers, security=dict(o.security)) as cluster:
        cluster.refresh([o.from_topic, o.to_topic])
        counts = {t: len(cluster.partitions(t)) for t in (o.from_topic, o.to_topic)}
    for topic, n in counts.items():
        if n == 0:
            raise CopyError(f"topic {topic!r} does not exist")
    if o.partitioning == "same" and counts[o.to_topic] < counts[o.from_topic]:
        raise CopyError(
            f"{o.to_topic!r} has {counts[o.to_topic]} partitions, fewer than the "
            f"{counts[o.from_topic]} of {o.from_topic!r}: records keep their partition "
            "number with --partitioning same; use --partitioning key or add partitions")


def _output_frame(df: DataFrame, o: CopyOptions) -> DataFrame:
    by_name = {c.lower(): c for c in df.columns}
    wanted = [c for c in _OUTPUT_COLUMNS if c in by_name
              and not (c == "partition" and o.partitioning == "key")]
    if "value" not in wanted:
        raise CopyError(f"the transform's output has no 'value' column (columns: "
                        f"{', '.join(df.columns)})")
    return df.select(*(by_name[c] for c in wanted))


def start_query(spark: SparkSession, o: CopyOptions) -> StreamingQuery:
    """Plans and starts the streaming query (see the module docstring)."""
    from pyspark.sql import DataFrame

    from ads.spark import register

    register(spark)
    check_topics(o)
    source = (spark.readStream.format("ads")
              .option("kafka.bootstrap.servers", o.bootstrap_servers)
              .option("subscribe", o.from_topic)
              .option("startingOffsets", o.starting)
              .option("failOnDataLoss", str(o.fail_on_data_loss).lower())
              .option("maxOffsetsPerTrigger", str(o.max_records_per_batch))
              .option("includeHeaders", "true")
              .option("kafka.isolation.level", "read_committed")
              .options(**{f"kafka.{k}": v for k, v in o.security})
              .load())
    frame = source
    if o.transform is not None:
        func, ship = load_transform(o.transform)
        if ship is not None:
            spark.sparkContext.addPyFile(str(ship))
        frame = func(source)
        if not isinstance(frame, DataFrame) or not frame.isStreaming:
            raise CopyError(f"the transform {o.transform} must return the streaming "
                            f"DataFrame built on its argument, got {type(frame).__name__}")
    writer = (_output_frame(frame, o).writeStream.format("ads")
              .queryName(f"ads copy {o.from_topic} to {o.to_topic}")
              .option("kafka.bootstrap.servers", o.bootstrap_servers)
              .option("topic", o.to_topic)
              .option("exactlyOnce", "true")
              .option("checkpointLocation", str(o.checkpoint)))
    for key, value in (*o.security, *o.producer_config):
        writer = writer.option(f"kafka.{key}", value)
    interval = o.interval_s()
    if interval is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(interval * 1000)} milliseconds")
    return writer.start()


def copy(spark: SparkSession, o: CopyOptions, report: Report = print) -> CopyResult:
    """Runs the copy until the trigger is satisfied (``available-now``) or the process is
    asked to stop (SIGTERM, SIGINT; the running micro-batch is given time to finish).
    A failed query raises its ``StreamingQueryException``."""
    result = CopyResult()
    began = time.monotonic()
    query = start_query(spark, o)
    result.query_id = str(query.id)
    report(f"query {query.id}, checkpoint {o.checkpoint}")
    counted: set[int] = set()
    follow(query, lambda: _report_progress(query.recentProgress, counted, result, began,
                                           report))
    result.seconds = time.monotonic() - began
    return result


def follow(query: StreamingQuery, poll: Callable[[], None]) -> None:
    """Waits for ``query`` to finish, calling ``poll`` every second and once at the end;
    on SIGTERM or SIGINT stops it between micro-batches (the running one is given time to
    finish). A failed query raises its ``StreamingQueryException``."""
    stopping = threading.Event()
    previous = install_stop_handlers(stopping)
    try:
        while True:
            finished = query.awaitTermination(_POLL_S)
            poll()
            if finished:
                break
            if stopping.is_set():
                _stop_between_batches(query)
                break
    finally:
        restore_stop_handlers(previous)
        if query.isActive:
            query.stop()
    poll()


def _report_progress(progress: list[Any], counted: set[int], result: CopyResult,
                     began: float, report: Report) -> None:
    # Idle triggers report progress too, with no rows: only batches that ran count.
    for p in progress:
        batch, rows = int(p["batchId"]), int(p["numInputRows"])
        if rows == 0 or batch in counted:
            continue
        counted.add(batch)
        result.batches += 1
        result.records += rows
        elapsed = max(time.monotonic() - began, 1e-9)
        report(f"batch {batch}: {rows} records, {result.records / elapsed:,.0f} records/s "
               "overall")


def _stop_between_batches(query: StreamingQuery) -> None:
    deadline = time.monotonic() + _STOP_GRACE_S
    while time.monotonic() < deadline and query.isActive and \
            query.status.get("isTriggerActive", False):
        time.sleep(0.2)
    query.stop()
