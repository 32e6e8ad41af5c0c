"""Spark's own Kafka connector (`org.apache.spark:spark-sql-kafka-0-10_2.13`, the jars
`make test-deps` copies from tests/spark_kafka/pom.xml) against three `ads broker`
processes on ZooKeeper, every topic with replication factor 3.

In the tests' local[2] session: batch reads between JSON offsets with headers, equal to
what was produced; `kafka.isolation.level=read_committed` over transactions with aborts;
the Kafka sink. In a driver process of its own (`kafka_connector_job.py`) on local[2]: a
streaming query into a Parquet file sink, killed with SIGKILL mid-stream and started again
on its checkpoint, leaves every record in the sink exactly once; the restarted driver then
copies a transactional topic `read_committed` into another with the Kafka sink.
test_spark_standalone.py runs the same driver on a Spark standalone cluster. The module
refuses to run without the jars rather than skip."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from test_spark_copy import Record, feed, read_committed
from test_spark_read import TS, produce

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster, wait_until
from conftest import SPARK_KAFKA_JARS, spark_kafka_jars
from replication_support import create

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]

HERE = Path(__file__).parent
JOB_TIMEOUT_S = 180
STREAM_TOPIC = "sk-stream"
STREAM_RECORDS = 600
STREAM_PARTITIONS = 3
MAX_OFFSETS = 100
TXN_TOPIC = "sk-stream-txn"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    assert spark_kafka_jars(), (
        f"Spark's Kafka connector is copied by `make test-deps` (Maven, "
        f"{SPARK_KAFKA_JARS.parent}/pom.xml): {SPARK_KAFKA_JARS} is empty")
    with Cluster(tmp_path_factory.mktemp("spark-kafka"), 3, "default.replication.factor=3",
                 "offsets.topic.replication.factor=3",
                 "transaction.state.log.num.partitions=3").running() as c:
        yield c


def kafka_reader(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows(df: DataFrame) -> list[dict[str, Any]]:
    """The records as `produce` returns them, in (partition, offset) order."""
    out = []
    for r in df.selectExpr("partition", "offset", "key", "value",
                           "unix_millis(timestamp) AS timestamp", "headers").collect():
        out.append({"partition": r["partition"], "offset": r["offset"],
                    "key": None if r["key"] is None else bytes(r["key"]),
                    "value": bytes(r["value"]), "timestamp": r["timestamp"],
                    "headers": None if r["headers"] is None else [
                        {"key": h["key"],
                         "value": None if h["value"] is None else bytes(h["value"])}
                        for h in r["headers"]]})
    return sorted(out, key=lambda x: (x["partition"], x["offset"]))


def test_spark_kafka_connector_batch_offsets_and_headers(spark: SparkSession,
                                                         cluster: Cluster) -> None:
    create(cluster, "sk-read", 3, 3)
    produced = produce(cluster.bootstrap, "sk-read", 90, 3)
    everything = kafka_reader(spark, cluster.bootstrap, subscribe="sk-read",
                              includeHeaders="true")
    assert rows(everything) == produced

    starting = {"sk-read": {"0": 5, "1": -2, "2": 20}}
    ending = {"sk-read": {"0": 12, "1": 3, "2": -1}}
    df = kafka_reader(spark, cluster.bootstrap, subscribe="sk-read", includeHeaders="true",
                      startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    bounds = {0: (5, 12), 1: (0, 3), 2: (20, 30)}
    assert rows(df) == [r for r in produced
                        if bounds[r["partition"]][0] <= r["offset"] < bounds[r["partition"]][1]]

    # assign with the same JSON form, and without headers the column is absent.
    df = kafka_reader(spark, cluster.bootstrap, assign=json.dumps({"sk-read": [1]}),
                      startingOffsets=json.dumps({"sk-read": {"1": 28}}))
    assert "headers" not in df.columns
    assert [(r["offset"], bytes(r["value"])) for r in df.collect()] == [
        (r["offset"], r["value"]) for r in produced if r["partition"] == 1 and r["offset"] >= 28]


def per_partition(df: DataFrame) -> dict[int, list[Record]]:
    out: dict[int, list[Record]] = {}
    for r in df.orderBy("partition", "offset").collect():
        headers = ([(h["key"], bytes(h["value"])) for h in r["headers"]]
                   if r["headers"] is not None else None)
        out.setdefault(r["partition"], []).append(
            (None if r["key"] is None else bytes(r["key"]), bytes(r["value"]), headers))
    return out


def test_spark_kafka_connector_read_committed_skips_aborted(spark: SparkSession,
                                                            cluster: Cluster) -> None:
    create(cluster, "sk-txn", 2, 3)
    committed = feed(cluster.bootstrap, "sk-txn", 2, 0, 240, txn_size=20, abort_every=3)
    assert sum(map(len, committed.values())) == 160
    # A transaction left open: its records are past the last stable offset, where a
    # read_committed read ends (the connector asks ListOffsets for it).
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "sk-open"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("sk-txn", value=b"open-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    try:
        df = kafka_reader(spark, cluster.bootstrap, subscribe="sk-txn", includeHeaders="true",
                          **{"kafka.isolation.level": "read_committed"})
        assert per_partition(df) == committed
        # read_uncommitted shows the aborted and open records too, never a marker.
        df = kafka_reader(spark, cluster.bootstrap, subscribe="sk-txn")
        assert sorted(bytes(r["value"]) for r in df.select("value").collect()) == [
            b"open-%d" % i for i in range(4)] + [b"r%06d" % i for i in range(240)]
    finally:
        producer.abort_transaction(30)


def test_spark_kafka_connector_timestamps_and_deleted_records(spark: SparkSession,
                                                              cluster: Cluster) -> None:
    create(cluster, "sk-times", 2, 3)
    produce(cluster.bootstrap, "sk-times", 40, 2)  # record i at TS + i s, partition i % 2

    def offsets(df: DataFrame) -> list[tuple[int, int]]:
        return sorted((r["partition"], r["offset"]) for r in df.collect())

    # By timestamp (ListOffsets with a timestamp): the first offset at or after it.
    by_time = json.dumps({"sk-times": {"0": TS + 10_000, "1": TS + 15_000}})
    df = kafka_reader(spark, cluster.bootstrap, subscribe="sk-times",
                      startingOffsetsByTimestamp=by_time, endingTimestamp=str(TS + 30_000))
    assert offsets(df) == [(0, k) for k in range(5, 15)] + [(1, k) for k in range(7, 15)]

    # Records deleted below offset 6 of partition 0 (DeleteRecords): a start below the
    # log start offset is lost data, an error unless failOnDataLoss=false.
    admin = cluster.admin()
    for future in admin.delete_records([KafkaTopicPartition("sk-times", 0, 6)]).values():
        future.result(30)
    start = json.dumps({"sk-times": {"0": 2, "1": 18}})
    df = kafka_reader(spark, cluster.bootstrap, subscribe="sk-times", startingOffsets=start,
                      failOnDataLoss="false")
    assert offsets(df) == [(0, k) for k in range(6, 20)] + [(1, 18), (1, 19)]
    with pytest.raises(Py4JJavaError, match="Some data may have been lost"):
        kafka_reader(spark, cluster.bootstrap, subscribe="sk-times",
                     startingOffsets=start).collect()


def test_spark_kafka_connector_sink(spark: SparkSession, cluster: Cluster) -> None:
    create(cluster, "sk-sink", 3, 3)
    data = [(f"k{i}", f"v{i}", i % 3, [("n", str(i).encode())] if i % 2 else None)
            for i in range(300)]
    df = spark.createDataFrame(
        data, "key string, value string, partition int, "
              "headers array<struct<key:string,value:binary>>")
    (df.write.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap)
     .option("topic", "sk-sink").save())
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "sk-sink-check",
                         "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition("sk-sink", p, 0) for p in range(3)])
    got: list[tuple[str, str, int, list[tuple[str, bytes]] | None]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(data) and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append((m.key().decode(), m.value().decode(), m.partition(), m.headers()))
    finally:
        consumer.close()
    assert sorted(got) == sorted(data)


def job(master: str, bootstrap: str, checkpoint: Path, output: Path, *args: str,
        conf: dict[str, str] | None = None) -> list[str]:
    command = [sys.executable, str(HERE / "kafka_connector_job.py"), master, bootstrap,
               ",".join(spark_kafka_jars()), STREAM_TOPIC, str(checkpoint), str(output),
               "--max-offsets", str(MAX_OFFSETS), *args]
    for key, value in (conf or {}).items():
        command += ["--conf", f"{key}={value}"]
    return command


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def run_killed(command: list[str], checkpoint: Path, env: dict[str, str], log: Path) -> int:
    """Runs the streaming driver until it has committed two micro-batches, then kills its
    process group (the Python driver and its JVM) with SIGKILL; returns the batches
    committed by then."""
    with log.open("wb") as out:
        driver = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)
    try:
        wait_until(lambda: driver.poll() is None and committed_batches(checkpoint) >= 2,
                   "two committed micro-batches", JOB_TIMEOUT_S,
                   lambda: log.read_text(errors="replace")[-4000:])
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    return committed_batches(checkpoint)


class StreamInput(NamedTuple):
    """What the streaming driver reads: records with headers, and transactions with aborts
    for its copy (the committed records per partition)."""

    produced: list[dict[str, Any]]
    committed: dict[int, list[Record]]


def stream_input(bootstrap: str) -> StreamInput:
    """Fills `STREAM_TOPIC` and `TXN_TOPIC`, which the caller created."""
    return StreamInput(produce(bootstrap, STREAM_TOPIC, STREAM_RECORDS, STREAM_PARTITIONS),
                       feed(bootstrap, TXN_TOPIC, 2, 0, 240, txn_size=20, abort_every=3))


def stream_killed_and_restarted(spark: SparkSession, bootstrap: str, tmp_path: Path,
                                master: str, target: str, given: StreamInput,
                                conf: dict[str, str] | None = None) -> None:
    """The streaming driver killed after two micro-batches and run again on its checkpoint
    with `--available-now`, then copying `TXN_TOPIC` into `target` (which the caller
    created with two partitions); its Parquet sink and `target` are checked exactly."""
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    killed = (conf or {}) | {"spark.app.name": "kafka connector killed"}
    first = run_killed(job(master, bootstrap, checkpoint, output, conf=killed),
                       checkpoint, env, tmp_path / "first.log")
    starting = json.dumps({TXN_TOPIC: {"0": -2, "1": -2}})
    ending = json.dumps({TXN_TOPIC: {"0": -1, "1": -1}})
    done = subprocess.run(job(master, bootstrap, checkpoint, output, "--available-now",
                              "--then-copy", TXN_TOPIC, target, starting, ending, conf=conf),
                          capture_output=True, text=True, env=env, timeout=JOB_TIMEOUT_S,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert "copied" in done.stdout
    # The kill came mid-stream: the restarted query had batches left to run.
    assert first < committed_batches(checkpoint)
    assert committed_batches(checkpoint) >= STREAM_RECORDS // MAX_OFFSETS

    sunk = rows(spark.read.parquet(str(output)))
    assert len({(r["partition"], r["offset"]) for r in sunk}) == len(sunk)  # no duplicates
    assert sunk == given.produced
    assert read_committed(bootstrap, target, 2, 160, settle_s=1.0) == given.committed


def test_spark_kafka_connector_stream_killed_and_restarted(spark: SparkSession,
                                                           cluster: Cluster,
                                                           tmp_path: Path) -> None:
    create(cluster, STREAM_TOPIC, STREAM_PARTITIONS, 3)
    create(cluster, TXN_TOPIC, 2, 3)
    create(cluster, "sk-copied", 2, 3)
    given = stream_input(cluster.bootstrap)
    stream_killed_and_restarted(spark, cluster.bootstrap, tmp_path, "local[2]", "sk-copied",
                                given)
