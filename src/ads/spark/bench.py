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
  and table commit included.

Records/s count records; MB/s count record values (10^6 bytes). The 1-minute load average
is printed before and after the reads: figures taken on a busy machine spread widely.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def _produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
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


if __name__ == "__main__":
    sys.exit(main())
