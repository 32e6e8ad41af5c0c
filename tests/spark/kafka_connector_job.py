"""A Spark driver that reads through Spark's own Kafka connector, run as a process of its
own so a test can kill it with SIGKILL and start it again on the same checkpoint
(tests/spark/test_spark_kafka_connector.py).

A Structured Streaming query, `format("kafka")` with headers from the topic's beginning
into a Parquet file sink, at most `--max-offsets` records per micro-batch: a micro-batch
every 200 ms until killed, or with `--available-now` what exists at start and then exit.
`--then-copy` then reads a topic as a batch, `read_committed` between JSON offsets, and
writes it with `df.write.format("kafka")` to another (the source and the sink run on the
executors, so on a cluster's workers).

Usage: kafka_connector_job.py MASTER BOOTSTRAP JARS TOPIC CHECKPOINT OUTPUT
           [--max-offsets N] [--available-now] [--conf K=V ...]
           [--then-copy TOPIC TARGET STARTING ENDING]
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import DataFrame, SparkSession


def session(master: str, jars: str, conf: list[str]) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master(master).appName("kafka connector job")
               .config("spark.jars", jars).config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))
    for item in conf:
        key, _, value = item.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stream(spark: SparkSession, bootstrap: str, args: argparse.Namespace) -> None:
    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", args.topic).option("startingOffsets", "earliest")
          .option("includeHeaders", "true")
          .option("maxOffsetsPerTrigger", str(args.max_offsets)).load())
    writer = (df.writeStream.format("parquet").option("path", args.output)
              .option("checkpointLocation", args.checkpoint))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="200 milliseconds")
    query = writer.start()
    print("started", query.id, flush=True)
    query.awaitTermination()
    print("stopped", flush=True)


def copy(spark: SparkSession, bootstrap: str, topic: str, target: str, starting: str,
         ending: str) -> None:
    df: DataFrame = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                     .option("subscribe", topic).option("includeHeaders", "true")
                     .option("kafka.isolation.level", "read_committed")
                     .option("startingOffsets", starting)
                     .option("endingOffsets", ending).load())
    (df.selectExpr("key", "value", "headers", "partition")
     .write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", target).save())
    print("copied", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("master", "bootstrap", "jars", "topic", "checkpoint", "output"):
        parser.add_argument(name)
    parser.add_argument("--conf", action="append", default=[])
    parser.add_argument("--max-offsets", type=int, default=50)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--then-copy", nargs=4, metavar=("TOPIC", "TARGET", "START", "END"))
    args = parser.parse_args()
    spark = session(args.master, args.jars, args.conf)
    try:
        stream(spark, args.bootstrap, args)
        if args.then_copy:
            copy(spark, args.bootstrap, *args.then_copy)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
