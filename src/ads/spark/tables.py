"""``ads pipeline table``: a Structured Streaming job that keeps a topic as a Delta Lake or
Iceberg table, each micro-batch committed exactly once.

The query reads the topic with the ``ads`` source (``read_committed``, headers included)
and hands every micro-batch to ``foreachBatch``, which runs in the driver. With the
default writer (``python``) the batch is collected as Arrow and written by the Python
``deltalake`` (delta-rs) or ``pyiceberg`` packages. With ``writer="spark"`` (Delta only)
Spark's own Delta package writes the batch's DataFrame (``ads.spark.delta_spark``; in
upsert mode a ``MERGE``): the rows go from the executors to the table without passing
through the driver, and the session must have been started with the package. There is
no Iceberg Spark runtime for Spark 4.2, so Iceberg is written by pyiceberg (docs/spark.md).

Exactly once, the two halves:

- Spark's offset log: before micro-batch ``b`` runs, its offset range is written to
  ``<checkpoint>/offsets/b``; a restarted query replays the last logged batch over exactly
  that range, so the rows of batch ``b`` are the same on every run.
- The table records the batches written into it, atomically with their data: a Delta
  commit carries a ``txn`` action (``appId`` = the query id from
  ``<checkpoint>/metadata``, ``version`` = ``b``); an Iceberg commit sets the table
  property ``ads.batch.<query id>`` = ``b`` in the same transaction as the append, whose
  snapshot summary also names the batch (``ads.query-id``, ``ads.batch``). Before writing
  batch ``b``, the job reads the recorded batch and skips the write when it is ``b`` or
  more: the job died after the table commit and before Spark's commit log.

The dead-letter table (values that do not parse with ``--value-format json``) is a second
table with its own record of batches, written after the main table, so a job killed
between the two writes completes the dead-letter write on replay and nothing else.

With the Python writer, every micro-batch passes through the driver's memory as Arrow:
``--max-records-per-batch`` bounds it. With the Spark writer, Delta's own ``txn`` check
skips a replayed write too (``txnAppId``/``txnVersion``), and the micro-batch is cached
by Spark while the two tables are written from it. Its upsert ``MERGE`` carries the same
``txn`` action through Delta's idempotent DML session confs.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ads.spark.copy import follow
from ads.spark.jobmetrics import JobMetrics, serve_metrics, topic_end_offsets
from ads.spark.options import duration_ms
from ads.spark.pipeline import Report, last_committed_offsets, logged_offsets, utc_date
from ads.spark.wire import Cluster, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["FORMATS", "TableError", "TableOptions", "TableResult", "dead_letter_name",
           "iceberg_catalog", "iceberg_identifier", "job_metrics", "run_table"]

FORMATS = ("delta", "iceberg")
WRITERS = ("python", "spark")
VALUE_FORMATS = ("bytes", "json")
MODES = ("append", "upsert")
METADATA_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "headers")
_BAD = "_ads_bad"
_CORRUPT = "_ads_corrupt"
_TOMBSTONE = "_ads_tombstone"
_NAMESPACE = "ads"
_DEAD_LETTER = "_dead_letter"
# In upsert mode, the order of a key's records: the last is the one the table keeps (a
# key's records are in one partition when the producer partitions by key).
_RECORD_ORDER = ("timestamp", "partition", "offset")
# Iceberg compaction: a partition's data files below the table's target size
# (write.target-file-size-bytes) are rewritten when there are more than this many.
COMPACT_MIN_FILES = 1


class TableError(RuntimeError):
    """The job cannot start: the topic is missing, the schema does not parse or names a
    column the table keeps for the record's metadata."""


@dataclass(frozen=True, slots=True)
class TableOptions:
    bootstrap_servers: str
    topic: str
    table_format: str  # delta | iceberg
    path: Path  # Delta: the table's directory; Iceberg: the catalog's warehouse directory
    checkpoint: Path
    # an interval; "once": all that is there in one batch, then stop; "available-now": all
    # that is there in batches of at most max_records_per_batch, then stop
    trigger: str = "10s"
    max_records_per_batch: int = 100_000
    starting: str = "earliest"
    fail_on_data_loss: bool = True
    value_format: str = "bytes"  # bytes | json
    schema: str | None = None  # DDL of the JSON values, with value_format="json"
    partition_by_date: bool = True
    mode: str = "append"  # upsert: one row per key, the latest; a tombstone deletes it
    # after every this many micro-batches: compaction of small files and the removal of what
    # is older than retention_hours (Delta: unreferenced files; Iceberg: snapshots); 0: never
    maintain_every: int = 0
    retention_hours: float = 168.0
    # client security properties (``ads.spark.options.security_properties``)
    security: tuple[tuple[str, str], ...] = ()
    metrics_listener: str | None = None  # HOST:PORT of the job's /metrics; port 0: any
    # python: delta-rs / pyiceberg in the driver; spark: Spark's Delta package (Delta only)
    writer: str = "python"

    def interval_s(self) -> float | None:
        if self.trigger in ("once", "available-now"):
            return None
        return duration_ms(self.trigger, "--trigger") / 1000


@dataclass(slots=True)
class TableResult:
    batches: int = 0
    records: int = 0  # rows written to the table
    dead_letters: int = 0  # rows written to the dead-letter table
    skipped: int = 0  # replayed batches the table already held
    seconds: float = 0.0
    query_id: str = ""


class _Writer(Protocol):
    def written(self, app: str) -> int | None: ...

    def append(self, data: pa.Table, app: str, batch: int) -> None: ...

    def upsert(self, data: pa.Table, app: str, batch: int) -> None: ...

    def maintain(self, retention_hours: float) -> str: ...


def dead_letter_name(name: str) -> str:
    return name + _DEAD_LETTER


def iceberg_identifier(topic: str) -> str:
    """``ads.<topic>``, with what Iceberg names cannot hold (``.`` separates namespaces)
    as ``_``."""
    return f"{_NAMESPACE}.{re.sub(r'[^A-Za-z0-9_]', '_', topic)}"


def iceberg_catalog(warehouse: Path) -> Any:
    """The SQL catalog kept in ``warehouse/catalog.db`` (SQLite), tables under
    ``warehouse``."""
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = warehouse.absolute()
    warehouse.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(_NAMESPACE, uri=f"sqlite:///{warehouse / 'catalog.db'}",
                      warehouse=warehouse.as_uri())


class _DeltaWriter:
    def __init__(self, path: Path, partition_by: list[str], topic: str) -> None:
        self.path = str(path.absolute())
        self.partition_by = partition_by
        self.topic = topic

    def written(self, app: str) -> int | None:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path):
            return None
        version: int | None = DeltaTable(self.path).transaction_version(app)
        return version

    def append(self, data: pa.Table, app: str, batch: int) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake

        write_deltalake(self.path, data, mode="append", partition_by=self.partition_by or None,
                        commit_properties=CommitProperties(
                            app_transactions=[Transaction(app, batch)],
                            custom_metadata={"ads.topic": self.topic, "ads.batch": str(batch)}))

    def upsert(self, data: pa.Table, app: str, batch: int) -> None:
        """One MERGE on ``key``: a tombstone deletes the key's row, another record
        replaces it or adds it (``data`` holds one row per key)."""
        from deltalake import CommitProperties, DeltaTable, Transaction

        if not DeltaTable.is_deltatable(self.path):
            DeltaTable.create(self.path, data.drop_columns([_TOMBSTONE]).schema,
                              partition_by=self.partition_by or None)
        (DeltaTable(self.path).merge(
            data, predicate="t.key = s.key", source_alias="s", target_alias="t",
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app, batch)],
                custom_metadata={"ads.topic": self.topic, "ads.batch": str(batch)}))
         .when_matched_delete(predicate=f"s.{_TOMBSTONE}")
         .when_matched_update_all(predicate=f"NOT s.{_TOMBSTONE}", except_cols=[_TOMBSTONE])
         .when_not_matched_insert_all(predicate=f"NOT s.{_TOMBSTONE}",
                                      except_cols=[_TOMBSTONE])
         .execute())

    def maintain(self, retention_hours: float) -> str:
        """Small files rewritten into large ones (OPTIMIZE), then files that no version
        newer than the retention needs deleted (VACUUM; this includes files a killed write
        left). The batch record (``txn``) survives both."""
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path):
            return ""
        table = DeltaTable(self.path)
        done = table.optimize.compact()
        removed = table.vacuum(retention_hours=int(retention_hours), dry_run=False,
                               enforce_retention_duration=False, full=True)
        return (f"{done.get('numFilesRemoved', 0)} files compacted into "
                f"{done.get('numFilesAdded', 0)}, {len(removed)} old files deleted")


class _IcebergWriter:
    def __init__(self, catalog: Any, identifier: str, partition_by: list[str],
                 topic: str) -> None:
        self.catalog = catalog
        self.identifier = identifier
        self.partition_by = partition_by
        self.topic = topic

    def _table(self) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None

    def written(self, app: str) -> int | None:
        table = self._table()
        if table is None:
            return None
        value = table.properties.get(f"ads.batch.{app}")
        return None if value is None else int(value)

    def _created(self, schema: pa.Schema) -> Any:
        table = self._table()
        if table is None:
            self.catalog.create_namespace_if_not_exists(_NAMESPACE)
            table = self.catalog.create_table_if_not_exists(self.identifier, schema=schema)
            if self.partition_by:
                with table.update_spec() as spec:
                    for column in self.partition_by:
                        spec.add_identity(column)
        return table

    def append(self, data: pa.Table, app: str, batch: int) -> None:
        # One commit: the data, and the batch it holds where `written` finds it (a table
        # property, which outlives snapshot expiry; the snapshot summary says it too).
        with self._created(data.schema).transaction() as tx:
            tx.append(data, snapshot_properties=self._summary(app, batch))
            tx.set_properties({f"ads.batch.{app}": str(batch)})

    def upsert(self, data: pa.Table, app: str, batch: int) -> None:
        """One commit: the rows of the batch's keys deleted, its records other than
        tombstones appended (``data`` holds one row per key)."""
        import pyarrow.compute as pc
        from pyiceberg.expressions import In

        rows = data.filter(pc.invert(data.column(_TOMBSTONE))).drop_columns([_TOMBSTONE])
        table = self._created(rows.schema)
        summary = self._summary(app, batch)
        with table.transaction() as tx:
            if table.current_snapshot() is not None:
                # `In` is a pydantic model whose __new__ takes (term, literals), which
                # mypy's view of its fields does not show: called as Any.
                in_set: Any = In
                tx.delete(in_set("key", data.column("key").to_pylist()),
                          snapshot_properties=summary)
            if rows.num_rows:
                tx.append(rows, snapshot_properties=summary)
            tx.set_properties({f"ads.batch.{app}": str(batch)})

    def maintain(self, retention_hours: float) -> str:
        """Small data files compacted (``compact``), then snapshots older than the
        retention expired. The batch record is a table property, which both keep."""
        from datetime import UTC, datetime, timedelta

        table = self._table()
        if table is None:
            return ""
        removed, added = self.compact(table)
        table = table.refresh()
        before = len(table.snapshots())
        cutoff = datetime.now(UTC) - timedelta(hours=retention_hours)
        table.maintenance.expire_snapshots().older_than(cutoff).commit()
        return (f"{removed} files compacted into {added}, "
                f"{before - len(table.refresh().snapshots())} snapshots expired")

    def compact(self, table: Any) -> tuple[int, int]:
        """Per partition, the data files below the target size, when there are more than
        ``COMPACT_MIN_FILES``, read and written again as few files, in one snapshot per
        partition that removes the old files and adds the new ones: a reader sees one set
        or the other, never both, and the rows are those of the files removed. At most a
        target size of small files is read at once (the rest waits for the next round).
        Returns (files removed, files added).

        pyiceberg (0.12) has no rewrite of data files: the snapshot is its overwrite
        producer given the files to delete and to add, which it commits with the same
        checks as any overwrite. Files with delete files are left alone (this job writes
        copy-on-write, so it makes none)."""
        from pyiceberg.table import TableProperties

        if table.current_snapshot() is None:
            return 0, 0
        target = int(table.properties.get(TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                                          TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT))
        small: dict[tuple[int, Any], list[Any]] = {}
        for task in table.scan().plan_files():
            if not task.delete_files and task.file.file_size_in_bytes < target:
                small.setdefault((task.file.spec_id, task.file.partition), []).append(task)
        removed = added = 0
        for tasks in small.values():
            chosen: list[Any] = []
            size = 0
            for task in sorted(tasks, key=lambda t: t.file.file_size_in_bytes):
                if chosen and size + task.file.file_size_in_bytes > target:
                    break
                chosen.append(task)
                size += task.file.file_size_in_bytes
            if len(chosen) > COMPACT_MIN_FILES:
                removed += len(chosen)
                added += self._rewrite(table, chosen)
                table = table.refresh()
        return removed, added

    def _rewrite(self, table: Any, tasks: list[Any]) -> int:
        """One snapshot: the files of ``tasks`` replaced by files of their rows."""
        # _dataframe_to_data_files is how pyiceberg's own writes turn rows into data files
        # (partitioned, split at the target size); it has no public equivalent.
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

        rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks)
        rows = rows.sort_by([("partition", "ascending"), ("offset", "ascending")])
        summary = {"ads.topic": self.topic, "ads.maintenance": "compaction"}
        with table.transaction() as tx, \
                tx.update_snapshot(snapshot_properties=summary).overwrite() as rewrite:
            for task in tasks:
                rewrite.delete_data_file(task.file)
            files = list(_dataframe_to_data_files(tx.table_metadata, rows, table.io,
                                                  write_uuid=rewrite.commit_uuid))
            for file in files:
                rewrite.append_data_file(file)
        return len(files)

    def _summary(self, app: str, batch: int) -> dict[str, str]:
        return {"ads.topic": self.topic, "ads.query-id": app, "ads.batch": str(batch)}


class _SparkDeltaWriter(_DeltaWriter):
    """Spark's Delta package writes and maintains the table; delta-rs reads its record
    of batches (the ``txn`` actions Spark's writes leave)."""

    def __init__(self, spark: SparkSession, path: Path, partition_by: list[str],
                 topic: str) -> None:
        super().__init__(path, partition_by, topic)
        self.spark = spark

    def append_frame(self, frame: DataFrame, app: str, batch: int) -> None:
        from ads.spark.delta_spark import spark_append

        spark_append(frame, Path(self.path), self.partition_by, app, batch)

    def upsert_frame(self, frame: DataFrame, app: str, batch: int) -> None:
        """One MERGE on ``key``, as ``upsert`` (``frame`` holds one row per key)."""
        from deltalake import DeltaTable

        from ads.spark.delta_spark import spark_create, spark_merge

        if not DeltaTable.is_deltatable(self.path):
            spark_create(frame.drop(_TOMBSTONE), Path(self.path), self.partition_by)
        spark_merge(frame, Path(self.path), "key", _TOMBSTONE, app, batch)

    def maintain(self, retention_hours: float) -> str:
        from deltalake import DeltaTable

        from ads.spark.delta_spark import spark_maintain

        if not DeltaTable.is_deltatable(self.path):
            return ""
        return spark_maintain(self.spark, Path(self.path), retention_hours)


def _writers(o: TableOptions, spark: SparkSession) -> tuple[_Writer, _Writer]:
    """The table's writer and its dead-letter table's."""
    partition_by = ["date"] if o.partition_by_date else []
    if o.table_format == "delta":
        dead = o.path.parent / dead_letter_name(o.path.name)
        if o.writer == "spark":
            return (_SparkDeltaWriter(spark, o.path, partition_by, o.topic),
                    _SparkDeltaWriter(spark, dead, partition_by, o.topic))
        return (_DeltaWriter(o.path, partition_by, o.topic),
                _DeltaWriter(dead, partition_by, o.topic))
    catalog = iceberg_catalog(o.path)
    name = iceberg_identifier(o.topic)
    return (_IcebergWriter(catalog, name, partition_by, o.topic),
            _IcebergWriter(catalog, dead_letter_name(name), partition_by, o.topic))


def _check(o: TableOptions) -> None:
    if o.table_format not in FORMATS:
        raise TableError(f"table format must be one of {', '.join(FORMATS)}, got "
                         f"{o.table_format!r}")
    if o.maintain_every < 0 or o.retention_hours < 0:
        raise TableError("maintenance interval and retention must not be negative")
    if o.mode not in MODES:
        raise TableError(f"mode must be one of {', '.join(MODES)}, got {o.mode!r}")
    _check_writer(o)
    if o.value_format not in VALUE_FORMATS:
        raise TableError(f"value format must be one of {', '.join(VALUE_FORMATS)}, got "
                         f"{o.value_format!r}")
    if (o.value_format == "json") != (o.schema is not None):
        raise TableError("a schema goes with the json value format, and only with it")
    if o.schema is not None:
        from pyspark.sql.types import DataType, StructType

        try:
            parsed = DataType.fromDDL(o.schema)
        except Exception as exc:  # noqa: BLE001 - Spark's parse errors share no base
            raise TableError(f"the schema does not parse: {exc}") from exc
        if not isinstance(parsed, StructType):
            raise TableError("the schema must be a list of columns, NAME TYPE, ...")
        taken = {c.lower() for c in (*METADATA_COLUMNS, "date", _BAD, _CORRUPT)}
        clash = [f.name for f in parsed.fields if f.name.lower() in taken]
        if clash:
            raise TableError(f"the schema's column(s) {', '.join(clash)} clash with the "
                             f"table's metadata columns ({', '.join(METADATA_COLUMNS)}, "
                             "date)")
    with Cluster(o.bootstrap_servers, security=dict(o.security)) as cluster:
        cluster.refresh([o.topic])
        if not cluster.partitions(o.topic):
            raise TableError(f"topic {o.topic!r} does not exist")


def _check_writer(o: TableOptions) -> None:
    if o.writer not in WRITERS:
        raise TableError(f"writer must be one of {', '.join(WRITERS)}, got {o.writer!r}")
    if o.writer == "python":
        return
    if o.table_format == "iceberg":
        raise TableError("the spark writer writes Delta only: there is no Iceberg Spark "
                         "runtime for Spark 4.2 (iceberg-spark-runtime-4.2_2.13 is not "
                         "published); Iceberg tables are written with the python writer")


def _rows(spark: SparkSession, source: DataFrame, o: TableOptions) -> DataFrame:
    """The columns written, and ``_ads_bad`` (true for a dead letter: a value that does
    not parse; in upsert mode also a record without a key, which has no row to
    replace)."""
    from pyspark.sql import functions as f

    columns: list[Any] = [f.col(c) for c in (*METADATA_COLUMNS, "value")]
    if o.value_format == "bytes":
        bad = f.lit(False)
    else:
        parsed = f.from_json(f.col("value").cast("string"), f"{o.schema}, {_CORRUPT} STRING",
                             {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
        # A null value (a tombstone) has nothing to parse: its row has null columns.
        bad = (f.col("value").isNotNull()
               & (f.col("_parsed")[_CORRUPT].isNotNull() | ~f.expr("is_valid_utf8(value)")))
        source = source.withColumn("_parsed", parsed)
        columns.append(f.col("_parsed.*"))
    if o.mode == "upsert":
        bad = bad | f.col("key").isNull()
    columns.append(bad.alias(_BAD))
    if o.partition_by_date:
        columns.append(utc_date(spark).alias("date"))
    if o.mode == "upsert":
        columns.append(f.col("value").isNull().alias(_TOMBSTONE))
    frame = source.select(*columns)
    return frame.drop(_CORRUPT) if o.value_format == "json" else frame


def _split(batch: pa.Table, o: TableOptions) -> tuple[pa.Table, pa.Table]:
    """(rows for the table, rows for the dead-letter table); in upsert mode, the table's
    are one per key."""
    import pyarrow.compute as pc

    bad = batch.column(_BAD)
    good = batch.filter(pc.invert(bad)).drop_columns([_BAD])
    if o.value_format == "json":
        good = good.drop_columns(["value"])
    dead = batch.filter(bad).select(
        [*METADATA_COLUMNS, "value", *(["date"] if o.partition_by_date else [])])
    return (_latest_per_key(good) if o.mode == "upsert" else good), dead


def _latest_per_key(rows: pa.Table) -> pa.Table:
    """The last record of each key in ``_RECORD_ORDER``."""
    import pyarrow as pa

    ordered = rows.sort_by([(column, "ascending") for column in _RECORD_ORDER])
    ordered = ordered.append_column("_ads_row", pa.array(range(ordered.num_rows),
                                                         pa.int64()))
    last = ordered.group_by("key").aggregate([("_ads_row", "max")]).column("_ads_row_max")
    return ordered.take(last).drop_columns(["_ads_row"])


def _latest_per_key_frame(rows: DataFrame) -> DataFrame:
    """``_latest_per_key`` on Spark's side: the rows stay on the executors."""
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    newest_first = Window.partitionBy("key").orderBy(
        *(f.col(column).desc() for column in _RECORD_ORDER))
    return (rows.withColumn("_ads_row", f.row_number().over(newest_first))
            .filter(f.col("_ads_row") == 1).drop("_ads_row"))


def _query_id(checkpoint: Path) -> str:
    """The query's id, which Spark keeps in the checkpoint for the query's lifetime."""
    meta = json.loads((checkpoint / "metadata").read_text(encoding="utf-8").splitlines()[0])
    return str(meta["id"])


def _last_timestamps(batch: pa.Table) -> dict[int, float]:
    """Per partition, the newest record timestamp of the batch in epoch seconds (the
    newest rather than the last offset's: a producer may set older ones)."""
    import pyarrow as pa

    if not batch.num_rows:
        return {}
    newest = batch.group_by("partition").aggregate([("timestamp", "max")])
    scale = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[batch.schema.field("timestamp").type.unit]
    stamps = newest.column("timestamp_max").cast(pa.int64()).to_pylist()
    return {int(p): t / scale for p, t in zip(newest.column("partition").to_pylist(), stamps,
                                              strict=True) if t is not None}


def _partition_offsets(o: TableOptions, offsets: Mapping[TopicPartition, int]
                       ) -> dict[int, int]:
    return {tp.partition: n for tp, n in offsets.items() if tp.topic == o.topic}


def _holds(writer: _Writer, app: str, batch: int) -> bool:
    done = writer.written(app)
    return done is not None and done >= batch


# (rows for the table, rows written to the dead-letter table, newest timestamp per
# partition in epoch seconds)
_Written = tuple[int, int, dict[int, float]]


def _write_arrow(o: TableOptions, table: _Writer, dead_letter: _Writer, frame: DataFrame,
                 app: str, batch: int, in_table: bool) -> _Written:
    """The batch collected as Arrow and written by the Python packages."""
    rows = frame.toArrow()
    good, dead = _split(rows, o)
    if not in_table and good.num_rows:
        (table.upsert if o.mode == "upsert" else table.append)(good, app, batch)
    written = 0
    if dead.num_rows and not _holds(dead_letter, app, batch):
        dead_letter.append(dead, app, batch)
        written = dead.num_rows
    return good.num_rows, written, _last_timestamps(rows)


def _write_spark(o: TableOptions, table: _SparkDeltaWriter, dead_letter: _SparkDeltaWriter,
                 frame: DataFrame, app: str, batch: int, in_table: bool) -> _Written:
    """The batch written by Spark's Delta package, cached while it is counted and written
    to both tables; in upsert mode the table's rows are one per key, merged."""
    from pyspark.sql import functions as f

    frame = frame.persist()
    try:
        per = frame.groupBy("partition").agg(
            f.sum((~f.col(_BAD)).cast("long")).alias("good"),
            f.sum(f.col(_BAD).cast("long")).alias("dead"),
            f.unix_micros(f.max("timestamp")).alias("newest")).collect()
        good, dead = sum(r["good"] for r in per), sum(r["dead"] for r in per)
        if not in_table and good:
            rows = frame.filter(~f.col(_BAD)).drop(_BAD)
            rows = rows.drop("value") if o.value_format == "json" else rows
            if o.mode == "upsert":
                rows = _latest_per_key_frame(rows)
                good = rows.count()  # the rows merged, as the python writer counts them
                table.upsert_frame(rows, app, batch)
            else:
                table.append_frame(rows, app, batch)
        written = 0
        if dead and not _holds(dead_letter, app, batch):
            dead_letter.append_frame(frame.filter(f.col(_BAD)).select(
                *METADATA_COLUMNS, "value", *(["date"] if o.partition_by_date else [])),
                app, batch)
            written = dead
    finally:
        frame.unpersist()
    return good, written, {int(r["partition"]): r["newest"] / 1e6 for r in per
                           if r["newest"] is not None}


def _batch_writer(spark: SparkSession, o: TableOptions, result: TableResult, began: float,
                  report: Report, metrics: JobMetrics) -> Callable[[DataFrame, int], None]:
    table, dead_letter = _writers(o, spark)

    def rows_written(frame: DataFrame, app: str, batch: int, in_table: bool) -> _Written:
        if isinstance(table, _SparkDeltaWriter) and isinstance(dead_letter, _SparkDeltaWriter):
            return _write_spark(o, table, dead_letter, frame, app, batch, in_table)
        return _write_arrow(o, table, dead_letter, frame, app, batch, in_table)

    def write(frame: DataFrame, batch: int) -> None:
        started = time.monotonic()
        app = _query_id(o.checkpoint)
        offsets = _partition_offsets(o, logged_offsets(o.checkpoint, batch))
        in_table = _holds(table, app, batch)
        # The dead-letter table is written second: when it holds the batch, so does the
        # table (or the batch had no rows for it).
        if in_table and _holds(dead_letter, app, batch):
            result.skipped += 1
            metrics.batch(offsets, last_timestamps={}, rows=0, dead_letters=0, seconds=0.0,
                          written=False)
            report(f"batch {batch}: already in the tables (written before a restart), "
                   "skipped")
            return
        good, dead, stamps = rows_written(frame, app, batch, in_table)
        metrics.batch(offsets, last_timestamps=stamps, rows=0 if in_table else good,
                      dead_letters=dead, seconds=time.monotonic() - started,
                      written=not in_table)
        if in_table:
            # A job killed between the two writes: the dead letters were the rest of it.
            result.skipped += 1
            result.dead_letters += dead
            report(f"batch {batch}: already in the table (written before a restart), "
                   f"{dead} to the dead-letter table")
            return
        result.batches += 1
        result.records += good
        result.dead_letters += dead
        elapsed = max(time.monotonic() - began, 1e-9)
        bad = f", {dead} to the dead-letter table" if dead else ""
        report(f"batch {batch}: {good} records{bad}, "
               f"{result.records / elapsed:,.0f} records/s overall")
        if o.maintain_every and batch % o.maintain_every == o.maintain_every - 1:
            # After the batch's commit: a kill here loses no data, only this round.
            for name, writer in (("table", table), ("dead-letter table", dead_letter)):
                what = writer.maintain(o.retention_hours)
                if what:
                    report(f"batch {batch}: {name} maintained: {what}")

    return write


def start_query(spark: SparkSession, o: TableOptions, result: TableResult, began: float,
                report: Report, metrics: JobMetrics) -> StreamingQuery:
    from ads.spark import register

    register(spark)
    _check(o)
    if o.writer == "spark":
        from ads.spark.delta_spark import has_delta

        if not has_delta(spark):
            raise TableError("the spark writer needs a session started with Spark's Delta "
                             "package (ads.spark.delta_spark.delta_session_conf)")
    source = (spark.readStream.format("ads")
              .option("kafka.bootstrap.servers", o.bootstrap_servers)
              .option("subscribe", o.topic)
              .option("startingOffsets", o.starting)
              .option("failOnDataLoss", str(o.fail_on_data_loss).lower())
              .option("includeHeaders", "true")
              .option("kafka.isolation.level", "read_committed")
              .options(**{f"kafka.{k}": v for k, v in o.security}))
    interval = o.interval_s()
    if o.trigger != "once":
        source = source.option("maxOffsetsPerTrigger", str(o.max_records_per_batch))
    writer = (_rows(spark, source.load(), o).writeStream
              .queryName(f"ads table {o.topic}")
              .foreachBatch(_batch_writer(spark, o, result, began, report, metrics))
              .option("checkpointLocation", str(o.checkpoint)))
    if interval is None:
        # With "once" there is no read limit: the one batch reaches the topic's end as the
        # job starts.
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(interval * 1000)} milliseconds")
    return writer.start()


def job_metrics(o: TableOptions) -> JobMetrics:
    """The job's figures, starting from the offsets its checkpoint reached."""
    metrics = JobMetrics(o.topic, topic_end_offsets(o.bootstrap_servers, o.topic,
                                                    dict(o.security)))
    metrics.resume(_partition_offsets(o, last_committed_offsets(o.checkpoint)))
    return metrics


def run_table(spark: SparkSession, o: TableOptions, report: Report = print,
              metrics: JobMetrics | None = None) -> TableResult:
    """Runs the job until ``once`` is done or the process is asked to stop (SIGTERM,
    SIGINT; the running micro-batch is given time to finish). A failed query raises its
    ``StreamingQueryException``. The job's figures go to ``metrics`` (or figures of its
    own), served on ``o.metrics_listener`` while it runs."""
    result = TableResult()
    began = time.monotonic()
    if metrics is None:
        metrics = job_metrics(o)
    served: AbstractContextManager[object] = (
        serve_metrics(o.metrics_listener, metrics, report) if o.metrics_listener
        else nullcontext())
    with served:
        query = start_query(spark, o, result, began, report, metrics)
        result.query_id = str(query.id)
        report(f"query {query.id}, checkpoint {o.checkpoint}, {o.table_format} table "
               f"{o.path}")
        follow(query, lambda: None)
    result.seconds = time.monotonic() - began
    return result
