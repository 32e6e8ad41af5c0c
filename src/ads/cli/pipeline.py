"""`ads pipeline load` and `ads pipeline status`: exactly-once loading of topics into a
Parquet dataset on Spark (see `ads.spark.pipeline`); `ads pipeline copy`: a streaming copy
of one topic into another through an optional transform, exactly once (`ads.spark.copy`);
`ads pipeline table`: a topic kept as a Delta Lake or Iceberg table, exactly once
(`ads.spark.tables`).

PySpark is an optional extra (`pip install ads[spark]`); it is imported only when a
pipeline command runs, so the rest of the command line works without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ads.cli.common import (
    CommandError,
    UsageError,
    parse_assignments,
    read_properties,
    resolve_settings,
)
from ads.cli.settings import BOOTSTRAP_ENV

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ads.spark.copy import CopyOptions
    from ads.spark.pipeline import LoadOptions
    from ads.spark.tables import TableOptions

_NEEDS_SPARK = "needs the spark extra: pip install 'ads[spark]'"
_COMMAND_CONFIG_HELP = ("client properties file; its security settings (security.protocol, "
                        "sasl.*, ssl.*) are used to reach the cluster")


def _security(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The security properties of the profile and `--command-config` (`load`, `copy`) or
    of `--command-config` alone (`status`), checked (SourceOptionError)."""
    from ads.spark.options import security_properties

    props = getattr(args, "client_properties", None)
    if props is None:
        props = read_properties(args.command_config) if args.command_config else {}
    return security_properties({f"kafka.{k}": v for k, v in props.items()})


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    p = sub.add_parser("pipeline", help=help_text)
    verbs = p.add_subparsers(dest="pipeline_command", required=True)

    load = verbs.add_parser("load", help="copy topics into a Parquet dataset, exactly once")
    load.add_argument("--bootstrap-server", metavar="HOST:PORT",
                      help=f"broker(s) to read from (default: ${BOOTSTRAP_ENV} or the "
                           "profile's, see ads --help)")
    load.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                      help="topic to load (repeat for several)")
    load.add_argument("--output", required=True, metavar="PATH",
                      help="dataset directory; holds the loaded offsets in PATH/_ads")
    load.add_argument("--format", default="parquet", choices=["parquet"])
    load.add_argument("--master", default="local[*]",
                      help="Spark master: local[*] (default), local[N], spark://host:port")
    load.add_argument("--trigger", default="available-now", metavar="WHEN",
                      help="once | available-now (default) | an interval such as 30s or 5m "
                           "to keep loading until stopped")
    load.add_argument("--max-records-per-batch", type=int, default=5_000_000, metavar="N",
                      help="records per committed batch (default 5000000)")
    load.add_argument("--starting-offsets", default="earliest",
                      choices=["earliest", "latest"],
                      help="where partitions never loaded before start (default earliest)")
    load.add_argument("--fail-on-data-loss", default="true", choices=["true", "false"],
                      help="fail when records were deleted before they were loaded")
    load.add_argument("--min-partitions", type=int, metavar="N",
                      help="split large partitions so at least N Spark tasks read")
    load.add_argument("--command-config", metavar="FILE", help=_COMMAND_CONFIG_HELP)
    load.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                      help="extra Spark configuration (repeatable)")
    load.set_defaults(func=_load)

    copy = verbs.add_parser(
        "copy", help="copy a topic into another through an optional transform, exactly once")
    copy.add_argument("--bootstrap-server", metavar="HOST:PORT",
                      help=f"broker(s) of both topics (default: ${BOOTSTRAP_ENV} or the "
                           "profile's, see ads --help)")
    copy.add_argument("--from-topic", required=True, metavar="TOPIC",
                      help="input topic, read read_committed")
    copy.add_argument("--to-topic", required=True, metavar="TOPIC",
                      help="output topic, written in transactions")
    copy.add_argument("--transform", metavar="MODULE:FUNC",
                      help="function DataFrame -> DataFrame applied to the input stream")
    copy.add_argument("--checkpoint", metavar="DIR",
                      help="Spark checkpoint; keep it to resume exactly once "
                           "(default ./ads-checkpoints/copy-FROM-TO)")
    copy.add_argument("--master", default="local[*]",
                      help="Spark master: local[*] (default), local[N], spark://host:port")
    copy.add_argument("--trigger", default="available-now", metavar="WHEN",
                      help="available-now (default): copy what exists and stop; an interval "
                           "such as 1s or 5m keeps copying until stopped")
    copy.add_argument("--max-records-per-batch", type=int, default=100_000, metavar="N",
                      help="input records per micro-batch (default 100000)")
    copy.add_argument("--starting-offsets", default="earliest",
                      choices=["earliest", "latest"],
                      help="where a new checkpoint starts reading (default earliest)")
    copy.add_argument("--fail-on-data-loss", default="true", choices=["true", "false"],
                      help="fail when input records were deleted before they were copied")
    copy.add_argument("--partitioning", default="same", choices=["same", "key"],
                      help="same (default): a record keeps its partition number; key: "
                           "murmur2 of the key")
    copy.add_argument("--producer-conf", action="append", default=[], metavar="KEY=VALUE",
                      help="producer setting for the output, librdkafka names (repeatable)")
    copy.add_argument("--command-config", metavar="FILE", help=_COMMAND_CONFIG_HELP)
    copy.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                      help="extra Spark configuration (repeatable)")
    copy.set_defaults(func=_copy)

    _add_table_parser(verbs)

    stat = verbs.add_parser(
        "status", help="what a dataset holds, or how far a streaming job (copy, table) has "
                       "got, and the lag per partition")
    where = stat.add_mutually_exclusive_group(required=True)
    where.add_argument("--output", metavar="PATH", help="a dataset of ads pipeline load")
    where.add_argument("--checkpoint", metavar="DIR",
                       help="the checkpoint of ads pipeline copy or table")
    stat.add_argument("--bootstrap-server", metavar="HOST:PORT",
                      help="cluster to measure lag against (default: the one loaded from; "
                           "none for a checkpoint, which does not name it)")
    stat.add_argument("--command-config", metavar="FILE", help=_COMMAND_CONFIG_HELP)
    stat.set_defaults(func=_status)


def _add_table_parser(
        verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    table = verbs.add_parser(
        "table", help="keep a topic as a Delta Lake or Iceberg table, exactly once")
    table.add_argument("--bootstrap-server", metavar="HOST:PORT",
                       help=f"broker(s) to read from (default: ${BOOTSTRAP_ENV} or the "
                            "profile's, see ads --help)")
    table.add_argument("--topic", required=True, metavar="TOPIC",
                       help="topic to keep as a table, read read_committed")
    table.add_argument("--table-format", required=True, choices=["delta", "iceberg"])
    table.add_argument("--path", required=True, metavar="PATH",
                       help="delta: the table's directory (dead letters in PATH_dead_letter); "
                            "iceberg: the warehouse directory of a SQLite catalog, "
                            "PATH/catalog.db, holding table ads.TOPIC")
    table.add_argument("--checkpoint", metavar="DIR",
                       help="Spark checkpoint; keep it to resume exactly once "
                            "(default ./ads-checkpoints/table-TOPIC)")
    table.add_argument("--value-format", default="bytes", choices=["bytes", "json"],
                       help="bytes (default): the value as it is; json: parsed with --schema, "
                            "records that do not parse go to the dead-letter table")
    table.add_argument("--schema", metavar="DDL",
                       help="columns of the JSON values, e.g. 'id BIGINT, name STRING'")
    table.add_argument("--mode", default="append", choices=["append", "upsert"],
                       help="append (default): every record a row; upsert: one row per key, "
                            "the latest record's (MERGE on key), a tombstone deletes it")
    table.add_argument("--maintain-every", type=int, default=0, metavar="N",
                       help="every N micro-batches, compact the table's small files and "
                            "delete what is older than --retention-hours (Delta: files no "
                            "longer referenced; Iceberg: snapshots); default 0, never")
    table.add_argument("--retention-hours", type=float, default=168.0, metavar="H",
                       help="what maintenance keeps (default 168, a week)")
    table.add_argument("--partition-by", default="date", choices=["date", "none"],
                       help="date (default): the record timestamp's UTC date")
    table.add_argument("--once", action="store_true",
                       help="write all that the topic holds now in one batch, then stop")
    table.add_argument("--trigger", default="10s", metavar="WHEN",
                       help="how often to look for new records (default 10s), or "
                            "available-now: write what exists in micro-batches and stop")
    table.add_argument("--master", default="local[*]",
                       help="Spark master: local[*] (default), local[N], spark://host:port")
    table.add_argument("--max-records-per-batch", type=int, default=100_000, metavar="N",
                       help="records per micro-batch, which the driver holds in memory "
                            "(default 100000; not with --once)")
    table.add_argument("--starting-offsets", default="earliest",
                       choices=["earliest", "latest"],
                       help="where a new checkpoint starts reading (default earliest)")
    table.add_argument("--fail-on-data-loss", default="true", choices=["true", "false"],
                       help="fail when records were deleted before they were written")
    table.add_argument("--metrics-listener", metavar="HOST:PORT",
                       help="serve the job's Prometheus metrics on http://HOST:PORT/metrics "
                            "(port 0: any free port, printed at start)")
    table.add_argument("--writer", default="python", choices=["python", "spark"],
                       help="python (default): each micro-batch collected in the driver and "
                            "written by deltalake or pyiceberg; spark: written by Spark's "
                            "Delta package (delta only)")
    table.add_argument("--spark-jars", metavar="DIR",
                       help="with --writer spark: a folder holding the Delta package's jars "
                            "(default $ADS_SPARK_JARS; without either, Spark fetches the package "
                            "by its Maven coordinates)")
    table.add_argument("--command-config", metavar="FILE", help=_COMMAND_CONFIG_HELP)
    table.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                       help="extra Spark configuration (repeatable)")
    table.set_defaults(func=_table)


def _session(master: str, conf: dict[str, str], app: str) -> SparkSession:
    # Executors must run this interpreter, which has ads installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _load(args: argparse.Namespace) -> int:
    try:
        from ads.spark.pipeline import load
    except ImportError as exc:
        print(f"ads pipeline: {_NEEDS_SPARK} ({exc})", file=sys.stderr)
        return 1
    from ads.spark.output import OutputError
    from ads.spark.planning import DataLossError

    return _run_job(args, "load", "loaded", _load_options, load,
                    (OutputError, DataLossError, CommandError))


def _load_options(args: argparse.Namespace) -> tuple[LoadOptions, dict[str, str]]:
    from ads.spark.options import duration_ms
    from ads.spark.pipeline import LoadOptions

    resolve_settings(args)
    if args.trigger not in ("once", "available-now"):
        duration_ms(args.trigger, "--trigger")
    if args.max_records_per_batch <= 0:
        raise UsageError("--max-records-per-batch must be positive")
    if args.min_partitions is not None and args.min_partitions <= 0:
        raise UsageError("--min-partitions must be positive")
    options = LoadOptions(
        bootstrap_servers=args.bootstrap_server, topics=tuple(args.topic),
        output=Path(args.output), trigger=args.trigger,
        max_records_per_batch=args.max_records_per_batch,
        starting=args.starting_offsets, fail_on_data_loss=args.fail_on_data_loss == "true",
        min_partitions=args.min_partitions, security=_security(args))
    return options, parse_assignments(args.spark_conf, "--spark-conf")


def _copy(args: argparse.Namespace) -> int:
    try:
        from pyspark.errors import PySparkException, StreamingQueryException

        from ads.spark.copy import CopyError, copy
    except ImportError as exc:
        print(f"ads pipeline: {_NEEDS_SPARK} ({exc})", file=sys.stderr)
        return 1
    return _run_job(args, "copy", "copied", _copy_options, copy,
                    (CopyError, StreamingQueryException, PySparkException))


def _table(args: argparse.Namespace) -> int:
    try:
        from pyspark.errors import PySparkException, StreamingQueryException

        from ads.spark.tables import TableError, run_table
    except ImportError as exc:
        print(f"ads pipeline: {_NEEDS_SPARK} ({exc})", file=sys.stderr)
        return 1
    return _run_job(args, "table", "wrote", _table_options, run_table,
                    (TableError, StreamingQueryException, PySparkException))


def _table_options(args: argparse.Namespace) -> tuple[TableOptions, dict[str, str]]:
    from ads.spark.jobmetrics import parse_listener
    from ads.spark.options import duration_ms
    from ads.spark.tables import TableOptions

    resolve_settings(args)
    if args.trigger != "available-now":
        duration_ms(args.trigger, "--trigger")
    if args.max_records_per_batch <= 0:
        raise UsageError("--max-records-per-batch must be positive")
    if (args.value_format == "json") != (args.schema is not None):
        raise UsageError("--schema goes with --value-format json, and only with it")
    if args.maintain_every < 0 or args.retention_hours < 0:
        raise UsageError("--maintain-every and --retention-hours must not be negative")
    if args.metrics_listener is not None:
        try:
            parse_listener(args.metrics_listener)
        except ValueError as exc:
            raise UsageError(f"--metrics-listener: {exc}") from exc
    checkpoint = (Path(args.checkpoint) if args.checkpoint else
                  Path("ads-checkpoints") / f"table-{args.topic}")
    options = TableOptions(
        bootstrap_servers=args.bootstrap_server, topic=args.topic,
        table_format=args.table_format, path=Path(args.path).absolute(),
        checkpoint=checkpoint.absolute(), trigger="once" if args.once else args.trigger,
        max_records_per_batch=args.max_records_per_batch, starting=args.starting_offsets,
        fail_on_data_loss=args.fail_on_data_loss == "true", value_format=args.value_format,
        schema=args.schema, partition_by_date=args.partition_by == "date", mode=args.mode,
        maintain_every=args.maintain_every, retention_hours=args.retention_hours,
        security=_security(args), metrics_listener=args.metrics_listener,
        writer=args.writer)
    conf = _writer_conf(args)
    conf.update(parse_assignments(args.spark_conf, "--spark-conf"))
    return options, conf


def _writer_conf(args: argparse.Namespace) -> dict[str, str]:
    """The session configuration of ``--writer spark`` (Spark's Delta package), refused
    where that writer cannot go."""
    if args.writer == "python":
        if args.spark_jars is not None:
            raise UsageError("--spark-jars goes with --writer spark")
        return {}
    if args.table_format == "iceberg":
        raise UsageError("--writer spark writes Delta only: there is no Iceberg Spark "
                         "runtime for Spark 4.2; Iceberg tables use --writer python")
    import pyspark

    from ads.spark.delta_spark import DeltaPackageError, delta_session_conf

    try:
        return delta_session_conf(pyspark.__version__,
                                  Path(args.spark_jars) if args.spark_jars else None)
    except DeltaPackageError as exc:
        raise UsageError(str(exc)) from exc


def _run_job(args: argparse.Namespace, verb: str, done: str,
             make_options: Callable[[argparse.Namespace], tuple[Any, dict[str, str]]],
             job: Callable[..., Any], failures: tuple[type[Exception], ...]) -> int:
    """Runs a pipeline job on its own Spark session: exit 2 for bad options, 1 when the
    job fails (one line), 0 with its totals."""
    from ads.spark.options import SourceOptionError
    from ads.spark.wire import KafkaWireError

    try:
        options, conf = make_options(args)
    except (UsageError, SourceOptionError) as exc:
        print(f"ads pipeline {verb}: {exc}", file=sys.stderr)
        return 2
    spark = _session(args.master, conf, f"ads pipeline {verb}")
    expected: tuple[type[Exception], ...] = (KafkaWireError, SourceOptionError, *failures)
    try:
        result = job(spark, options, report=lambda line: print(line, flush=True))
    except expected as exc:
        print(f"ads pipeline {verb}: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    rate = result.records / result.seconds if result.seconds else 0.0
    dead = getattr(result, "dead_letters", 0)
    print(f"{done} {result.records} records in {result.batches} batches, "
          f"{result.seconds:.1f} s ({rate:,.0f} records/s)"
          + (f", {dead} to the dead-letter table" if dead else ""), flush=True)
    return 0


def _copy_options(args: argparse.Namespace) -> tuple[CopyOptions, dict[str, str]]:
    from ads.spark.copy import CopyOptions
    from ads.spark.options import duration_ms

    resolve_settings(args)
    if args.trigger != "available-now":
        duration_ms(args.trigger, "--trigger")
    if args.max_records_per_batch <= 0:
        raise UsageError("--max-records-per-batch must be positive")
    if args.from_topic == args.to_topic:
        raise UsageError("--from-topic and --to-topic must differ")
    checkpoint = (Path(args.checkpoint) if args.checkpoint else
                  Path("ads-checkpoints") / f"copy-{args.from_topic}-{args.to_topic}")
    producer = parse_assignments(args.producer_conf, "--producer-conf")
    options = CopyOptions(
        bootstrap_servers=args.bootstrap_server, from_topic=args.from_topic,
        to_topic=args.to_topic, checkpoint=checkpoint.absolute(), transform=args.transform,
        trigger=args.trigger, max_records_per_batch=args.max_records_per_batch,
        starting=args.starting_offsets, fail_on_data_loss=args.fail_on_data_loss == "true",
        partitioning=args.partitioning, producer_config=tuple(sorted(producer.items())),
        security=_security(args))
    return options, parse_assignments(args.spark_conf, "--spark-conf")


def _status(args: argparse.Namespace) -> int:
    try:
        from ads.spark.output import OutputError
        from ads.spark.pipeline import checkpoint_status, status
        from ads.spark.wire import KafkaWireError
    except ImportError as exc:
        print(f"ads pipeline: {_NEEDS_SPARK} ({exc})", file=sys.stderr)
        return 1
    from ads.spark.options import SourceOptionError

    try:
        if args.checkpoint:
            batch, rows = checkpoint_status(args.checkpoint, args.bootstrap_server,
                                            dict(_security(args)))
            head = None if batch is None else f"micro-batch {batch} committed"
        else:
            last, rows = status(args.output, args.bootstrap_server, dict(_security(args)))
            head = None if last is None else \
                f"batch {last.batch} committed, {len(last.files)} files in it"
    except (OutputError, KafkaWireError, SourceOptionError, UsageError, OSError,
            ValueError) as exc:
        print(f"ads pipeline status: {exc}", file=sys.stderr)
        return 1
    where = args.checkpoint or args.output
    if head is None:
        print(f"{where}: nothing committed yet")
        return 0
    print(f"{where}: {head}")
    header = ("TOPIC", "PARTITION", "LOADED-TO", "RECORDS", "END", "LAG")
    lines = [header] + [
        (r.topic, str(r.partition), _dash(r.loaded_to), _dash(r.records), _dash(r.end),
         _dash(r.lag)) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    return 0


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)
