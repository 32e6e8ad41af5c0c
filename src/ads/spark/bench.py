"""Throughput of the Spark source and of ``ads pipeline load``.

``python -m ads.spark.bench --records 10000000`` starts a broker (``ads broker`` in a temporary
directory) unless ``--bootstrap-server`` is given, fills a topic of ``--partitions``
partitions with ``--records`` records of ``--record-size`` bytes, then measures on
``--master`` (default ``local[2]``):

- batch read: ``spark.read.format("ads")`` written to Spark's ``noop`` sink, which
  materializes every column of every row; the first run includes starting the Python
  workers, the best of the following runs is the steady state;
- with ``--kafka-jars`` (the jars of Spark's own Kafka connector, or a directory of them)
  or ``--kafka-packages`` (its Maven coordinates, resolved by Spark at start), the same
  batch read through ``format("kafka")`` in the same session, alternating with the ``ads``
  runs on the same topic;
- ``ads pipeline load`` of the whole topic into Parquet in one batch, commit included
  (``--skip-load`` leaves it out);
- with ``--table delta`` or ``--table iceberg`` (repeatable), ``ads pipeline table --once``
  of the whole topic, values as bytes, partitioned by date: one micro-batch, query start
  and table commit included;
- with ``--table-delay delta`` or ``--table-delay iceberg`` (repeatable), the delay from
  produce to row: ``ads pipeline table --trigger 10s`` (``--delay-trigger``) runs on a
  topic of its own while a producer sends ``--delay-rate`` records a second for
  ``--delay-seconds``, each value its sequence number, the send time noted just before
  ``produce()``; a reader polls the table with the format's own Python package
  (``deltalake``, ``pyiceberg``) every ``--delay-poll`` seconds, re-reading it whenever a
  new version is committed, and notes when each record's row is first read. The delay of
  a record is that time less its send time; p50, p99 and the maximum are reported (the
  nearest-rank percentiles), with the records never seen within ``--delay-grace``
  seconds of the last send.

Records/s count records; MB/s count record values (10^6 bytes). The 1-minute load average
is printed before and after the reads: figures taken on a busy machine spread widely.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    log = (data_dir.parent / "broker.log").open("ab")
    proc = subprocess.Popen(  # noqa: S603 - our own command line
        [sys.executable, "-m", "ads.cli.main", "broker", "--data-dir", str(data_dir),
         "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the benchmark broker did not start")


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    from confluent_kafka import Producer

    _create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    began = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("records were not acknowledged")
    return time.monotonic() - began


def _line(what: str, records: int, size: int, seconds: float) -> str:
    return (f"{what}: {records / seconds:,.0f} records/s, {records * size / seconds / 1e6:,.1f} "
            f"MB/s ({records:,} records in {seconds:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ads.spark.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", help="use this cluster instead of starting a broker")
    p.add_argument("--records", type=int, default=10_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--runs", type=int, default=3, help="batch read runs (default 3)")
    p.add_argument("--topic", default=f"spark-bench-{os.getpid()}")
    p.add_argument("--kafka-jars", help="Spark's Kafka connector: jars (comma-separated) "
                   "or a directory of them; its batch read is measured too")
    p.add_argument("--kafka-packages", help="Spark's Kafka connector by Maven coordinates "
                   "(spark.jars.packages), e.g. org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0")
    p.add_argument("--skip-load", action="store_true", help="no ads pipeline load run")
    p.add_argument("--table", action="append", default=[], choices=["delta", "iceberg"],
                   help="also measure ads pipeline table --once into this table format "
                        "(repeat a format to measure it again, warm)")
    p.add_argument("--table-delay", action="append", default=[], choices=["delta", "iceberg"],
                   help="also measure the delay from produce to a readable row of ads "
                        "pipeline table into this format (repeatable)")
    p.add_argument("--delay-trigger", default="10s", help="the job's --trigger (default 10s)")
    p.add_argument("--delay-rate", type=float, default=20.0,
                   help="records a second the delay's producer sends (default 20)")
    p.add_argument("--delay-seconds", type=float, default=60.0,
                   help="how long the delay's producer sends (default 60)")
    p.add_argument("--delay-poll", type=float, default=0.1,
                   help="seconds between the delay reader's looks at the table (default 0.1)")
    p.add_argument("--delay-grace", type=float, default=60.0,
                   help="how long the reader waits for the last rows (default 60)")
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="ads-spark-bench-"))
    broker = None
    try:
        bootstrap = args.bootstrap_server
        if bootstrap is None:
            broker, bootstrap = _start_broker(work / "data")
        seconds = _produce(bootstrap, args.topic, args.partitions, args.records,
                           args.record_size)
        print(_line("produce (confluent-kafka, setup)", args.records, args.record_size,
                    seconds), flush=True)
        _spark_runs(args, bootstrap, work)
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _jars(option: str) -> str:
    path = Path(option)
    if path.is_dir():
        return ",".join(sorted(str(j) for j in path.glob("*.jar")))
    return option


def _session(args: argparse.Namespace) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(args.master).appName("ads spark bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    if args.kafka_jars:
        builder = builder.config("spark.jars", _jars(args.kafka_jars))
    if args.kafka_packages:
        builder = builder.config("spark.jars.packages", args.kafka_packages)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _batch_reads(spark: SparkSession, args: argparse.Namespace, bootstrap: str) -> None:
    """Each format's runs alternate, so both see the same machine; the first run of each
    is reported apart (it starts Python workers, loads classes, warms the JIT)."""
    formats = ["ads"]
    if args.kafka_jars or args.kafka_packages:
        formats.append("kafka")
    best: dict[str, float] = {}
    for run in range(args.runs):
        for fmt in formats:
            began = time.monotonic()
            (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", args.topic).load()
             .write.format("noop").mode("overwrite").save())
            seconds = time.monotonic() - began
            what = "first run" if run == 0 else f"run {run + 1}"
            print(_line(f'batch read format("{fmt}"), {what}', args.records,
                        args.record_size, seconds), flush=True)
            if run:
                best[fmt] = min(best.get(fmt, seconds), seconds)
    for fmt, seconds in best.items():
        print(_line(f'batch read format("{fmt}"), best warm run', args.records,
                    args.record_size, seconds), flush=True)


def _spark_runs(args: argparse.Namespace, bootstrap: str, work: Path) -> None:
    from ads.spark.pipeline import LoadOptions, load

    spark = _session(args)
    try:
        print(f"load average (1 min) before the reads: {os.getloadavg()[0]:.1f}", flush=True)
        _batch_reads(spark, args, bootstrap)
        print(f"load average (1 min) after the reads: {os.getloadavg()[0]:.1f}", flush=True)
        if not args.skip_load:
            options = LoadOptions(bootstrap_servers=bootstrap, topics=(args.topic,),
                                  output=work / "lake", trigger="once")
            result = load(spark, options, report=lambda line: None)
            print(_line("pipeline load to Parquet (one batch, committed)", result.records,
                        args.record_size, result.seconds), flush=True)
        for n, fmt in enumerate(args.table):
            _table_run(spark, args, bootstrap, work / f"table-{n}", fmt)
        for n, fmt in enumerate(args.table_delay):
            _delay_run(spark, args, bootstrap, work / f"delay-{n}", fmt)
    finally:
        spark.stop()


def _table_run(spark: SparkSession, args: argparse.Namespace, bootstrap: str, work: Path,
               fmt: str) -> None:
    from ads.spark.tables import TableOptions, run_table

    options = TableOptions(bootstrap_servers=bootstrap, topic=args.topic, table_format=fmt,
                           path=work / fmt, checkpoint=work / f"checkpoint-{fmt}",
                           trigger="once")
    result = run_table(spark, options, report=lambda line: None)
    print(_line(f"pipeline table to {fmt} (--once, one micro-batch, committed)",
                result.records, args.record_size, result.seconds), flush=True)



def _delay_run(spark: SparkSession, args: argparse.Namespace, bootstrap: str, work: Path,
               fmt: str) -> None:
    from ads.spark.tables import TableOptions, run_table

    topic = f"{args.topic}-delay-{work.name}"
    _create_topic(bootstrap, topic, args.partitions)
    options = TableOptions(bootstrap_servers=bootstrap, topic=topic, table_format=fmt,
                           path=work / fmt, checkpoint=work / "checkpoint",
                           trigger=args.delay_trigger)
    failed: list[BaseException] = []

    def job() -> None:
        try:
            run_table(spark, options, report=lambda line: None)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failed.append(exc)

    runner = threading.Thread(target=job, name="ads-table-delay", daemon=True)
    runner.start()
    query = _started_query(spark, f"ads table {topic}", failed)
    count = int(args.delay_rate * args.delay_seconds)
    sent: dict[int, float] = {}
    producer = threading.Thread(target=_produce_steadily, name="ads-delay-producer",
                                args=(bootstrap, topic, args.partitions, args.delay_rate,
                                      count, sent))
    producer.start()
    seen = _watch(_table_reader(fmt, work / fmt, topic), count, producer, args.delay_poll,
                  args.delay_grace)
    producer.join()
    query.stop()
    runner.join(60)
    if failed:
        raise failed[0]
    delays = sorted(seen[seq] - sent[seq] for seq in seen)
    print(f"table delay to {fmt} (--trigger {args.delay_trigger}, {args.delay_rate:g} "
          f"records/s for {args.delay_seconds:g} s, read every {args.delay_poll:g} s): "
          f"p50 {_rank(delays, 0.5):.2f} s, p99 {_rank(delays, 0.99):.2f} s, max "
          f"{delays[-1] if delays else float('nan'):.2f} s ({len(delays)} records, "
          f"{count - len(delays)} not seen; load average (1 min) "
          f"{os.getloadavg()[0]:.1f})", flush=True)


def _rank(ordered: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of a sorted list."""
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _started_query(spark: SparkSession, name: str,
                   failed: list[BaseException]) -> StreamingQuery:
    """The job's query once its first trigger is done (before it, the delays would
    include starting the query)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not failed:
        for query in spark.streams.active:
            if query.name == name and query.lastProgress is not None:
                return query
        time.sleep(0.1)
    raise RuntimeError(f"the table job did not start: {failed}")


def _produce_steadily(bootstrap: str, topic: str, partitions: int, rate: float, count: int,
                      sent: dict[int, float]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    began = time.monotonic()
    for seq in range(count):
        # On a schedule, not after a sleep per record: a late send does not delay the rest.
        time.sleep(max(0.0, began + seq / rate - time.monotonic()))
        sent[seq] = time.time()
        producer.produce(topic, b"%d" % seq, partition=seq % partitions)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("records were not acknowledged")


def _table_reader(fmt: str, path: Path, topic: str) -> Callable[[], list[int]]:
    """A function returning the sequence numbers in the table when a new version of it
    was committed since its last call, and nothing otherwise."""
    last: list[object] = [None]

    def delta() -> list[int]:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(str(path)):
            return []
        table = DeltaTable(str(path))
        if table.version() == last[0]:
            return []
        last[0] = table.version()
        return [int(v) for v in table.to_pyarrow_table(columns=["value"])
                .column("value").to_pylist()]

    def iceberg() -> list[int]:
        from pyiceberg.exceptions import NoSuchTableError

        from ads.spark.tables import iceberg_identifier

        try:
            table = catalog.load_table(iceberg_identifier(topic))
        except NoSuchTableError:
            return []
        snapshot = table.current_snapshot()
        if snapshot is None or snapshot.snapshot_id == last[0]:
            return []
        last[0] = snapshot.snapshot_id
        return [int(v) for v in table.scan(selected_fields=("value",)).to_arrow()
                .column("value").to_pylist()]

    if fmt == "delta":
        return delta
    from ads.spark.tables import iceberg_catalog

    catalog = iceberg_catalog(path)
    return iceberg


def _watch(read: Callable[[], list[int]], count: int, producer: threading.Thread,
           poll_s: float, grace_s: float) -> dict[int, float]:
    """When each sequence number was first read from the table (epoch seconds)."""
    seen: dict[int, float] = {}
    deadline = None
    while len(seen) < count:
        if deadline is None and not producer.is_alive():
            deadline = time.monotonic() + grace_s
        if deadline is not None and time.monotonic() > deadline:
            break
        rows = read()
        now = time.time()
        for seq in rows:
            seen.setdefault(seq, now)
        time.sleep(poll_s)
    return seen


if __name__ == "__main__":
    sys.exit(main())
