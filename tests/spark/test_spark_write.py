"""Batch and streaming writes with format("ads"): records land in the right topics and
partitions with their keys and headers; bad columns and options fail at planning;
exactlyOnce streaming writes neither duplicate a replayed micro-batch nor let a zombie
task's rows through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.utils import AnalysisException
from test_spark_read import produce

from ads.testing import EmbeddedBroker
from conftest import create_topic


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int
                ) -> list[dict[str, Any]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ads-spark-test",
                         "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[dict[str, Any]] = []
    try:
        for _ in range(100):
            for msg in consumer.consume(500, timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append({"partition": msg.partition(), "key": msg.key(),
                            "value": msg.value(), "headers": msg.headers()})
            if len(out) >= expected:
                break
    finally:
        consumer.close()
    return sorted(out, key=lambda r: (r["partition"], r["value"]))


def test_spark_write_batch_columns(spark: SparkSession, broker: EmbeddedBroker) -> None:
    create_topic(broker.bootstrap_servers, "w-a", 3)
    create_topic(broker.bootstrap_servers, "w-b", 1)
    df = spark.createDataFrame(
        [("w-a", "k1", b"v1", 2, [("h", b"x")]), ("w-b", None, b"v2", None, None),
         ("w-a", "k3", b"v3", 0, [])],
        "topic string, key string, value binary, partition int, "
        "headers array<struct<key:string,value:binary>>")
    (df.write.format("ads").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .mode("append").save())
    assert consume_all(broker.bootstrap_servers, "w-a", 3, 2) == [
        {"partition": 0, "key": b"k3", "value": b"v3", "headers": None},
        {"partition": 2, "key": b"k1", "value": b"v1", "headers": [("h", b"x")]}]
    assert consume_all(broker.bootstrap_servers, "w-b", 1, 1) == [
        {"partition": 0, "key": None, "value": b"v2", "headers": None}]


def test_spark_write_default_mode_and_topic_option(spark: SparkSession,
                                                   broker: EmbeddedBroker) -> None:
    create_topic(broker.bootstrap_servers, "w-c", 2)
    df = spark.createDataFrame([("ignored", f"key-{i}", f"value-{i}") for i in range(20)],
                               "topic string, key string, value string")
    # No mode: Spark's Kafka sink appends by default, and so does this one.
    (df.write.format("ads").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", "w-c").save())
    got = consume_all(broker.bootstrap_servers, "w-c", 2, 20)
    assert sorted(r["value"] for r in got) == sorted(b"value-%d" % i for i in range(20))
    # Keys are partitioned with murmur2, as Kafka's Java producer (and so Spark) does.
    by_key = {r["key"]: r["partition"] for r in got}
    assert len(set(by_key.values())) == 2
    again = consume_all(broker.bootstrap_servers, "w-c", 2, 20)
    assert {r["key"]: r["partition"] for r in again} == by_key


def test_spark_write_rejects_bad_input(spark: SparkSession, broker: EmbeddedBroker) -> None:
    def write(df: Any, **options: str) -> None:
        w = df.write.format("ads").option("kafka.bootstrap.servers", broker.bootstrap_servers)
        for key, value in options.items():
            w = w.option(key, value)
        w.mode("append").save()

    errors = (PySparkException, AnalysisException)
    with pytest.raises(errors, match="Required attribute 'value' not found"):
        write(spark.createDataFrame([("k",)], "key string"), topic="w-a")
    with pytest.raises(errors, match="topic option required"):
        write(spark.createDataFrame([("v",)], "value string"))
    with pytest.raises(errors, match="value attribute type must be a string or binary"):
        write(spark.createDataFrame([(1,)], "value int"), topic="w-a")
    with pytest.raises(errors, match="partition attribute type must be an int"):
        write(spark.createDataFrame([("v", "p")], "value string, partition string"),
              topic="w-a")
    with pytest.raises(errors, match="Invalid kafka.* option.*no.such.setting"):
        write(spark.createDataFrame([("v",)], "value string"), topic="w-a",
              **{"kafka.no.such.setting": "1"})
    with pytest.raises(errors, match="Overwrite not allowed"):
        (spark.createDataFrame([("v",)], "value string").write.format("ads")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", "w-a")
         .mode("overwrite").save())


def test_spark_write_stream(spark: SparkSession, broker: EmbeddedBroker,
                            tmp_path: Path) -> None:
    create_topic(broker.bootstrap_servers, "s-in", 2)
    create_topic(broker.bootstrap_servers, "s-out", 2)
    produce(broker.bootstrap_servers, "s-in", 40, 2)
    source = (spark.readStream.format("ads")
              .option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", "s-in").option("startingOffsets", "earliest")
              .option("includeHeaders", "true").load())
    query = (source.selectExpr("key", "value", "partition", "headers").writeStream
             .format("ads").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("topic", "s-out")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(90)
    assert query.exception() is None
    copied = consume_all(broker.bootstrap_servers, "s-out", 2, 40)
    original = consume_all(broker.bootstrap_servers, "s-in", 2, 40)
    assert copied == original


def _stream_copy(spark: SparkSession, bootstrap: str, source_topic: str, topic: str,
                 checkpoint: Path, exactly_once: bool) -> None:
    source = (spark.readStream.format("ads").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source_topic).option("startingOffsets", "earliest").load())
    query = (source.select("value").writeStream.format("ads")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
             .option("exactlyOnce", str(exactly_once).lower())
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(90)
    assert query.exception() is None


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ads-spark-verify",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    try:
        for _ in range(15):  # about 3 s: long enough for duplicates to show up
            values += [m.value() for m in consumer.consume(500, timeout=0.2) if not m.error()]
    finally:
        consumer.close()
    return sorted(values)


def _forget_last_batch(checkpoint: Path) -> None:
    """As if the query died after its tasks committed but before Spark logged the batch:
    the restarted query replays it."""
    (checkpoint / "commits" / "0").unlink()
    (checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)


def test_spark_write_exactly_once_replayed_batch_written_once(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "x-in", 2)
    create_topic(bootstrap, "x-out", 2)
    create_topic(bootstrap, "x-out-plain", 2)
    produce(bootstrap, "x-in", 30, 2)
    expected = sorted(r["value"] for r in consume_all(bootstrap, "x-in", 2, 30))
    for topic, exactly_once in (("x-out", True), ("x-out-plain", False)):
        checkpoint = tmp_path / f"checkpoint-{topic}"
        _stream_copy(spark, bootstrap, "x-in", topic, checkpoint, exactly_once)
        _forget_last_batch(checkpoint)
        _stream_copy(spark, bootstrap, "x-in", topic, checkpoint, exactly_once)
    assert _read_committed(bootstrap, "x-out", 2) == expected
    # The same replay without exactlyOnce writes the batch twice (at-least-once).
    assert _read_committed(bootstrap, "x-out-plain", 2) == sorted(expected * 2)


def test_spark_write_exactly_once_fences_a_zombie_task(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    """A task killed inside its transaction leaves it open; the next attempt of the same
    partition fences it and aborts it, so its rows never reach read_committed readers."""
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "z-in", 1)
    create_topic(bootstrap, "z-out", 1)
    produce(bootstrap, "z-in", 10, 1)
    checkpoint = tmp_path / "checkpoint"
    _stream_copy(spark, bootstrap, "z-in", "z-out", checkpoint, exactly_once=True)
    query_id = json.loads((checkpoint / "metadata").read_text())["id"]
    zombie = Producer({"bootstrap.servers": bootstrap,
                       "transactional.id": f"ads-sink-{query_id}-0"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("z-out", value=b"from-a-zombie")
    zombie.flush(30)
    produce(bootstrap, "z-in", 5, 1)  # a second micro-batch for the restarted query
    _stream_copy(spark, bootstrap, "z-in", "z-out", checkpoint, exactly_once=True)
    expected = sorted(r["value"] for r in consume_all(bootstrap, "z-in", 1, 15))
    assert _read_committed(bootstrap, "z-out", 1) == expected


def test_spark_write_exactly_once_needs_a_stream_and_a_topic(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    create_topic(broker.bootstrap_servers, "e-in", 1)
    source = (spark.readStream.format("ads")
              .option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", "e-in").load())
    with pytest.raises((PySparkException, AnalysisException),
                       match="'exactlyOnce' needs the 'topic' option"):
        query = (source.selectExpr("'s-out' AS topic", "value").writeStream.format("ads")
                 .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                 .option("exactlyOnce", "true")
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    df = spark.createDataFrame([("v",)], ["value"])
    with pytest.raises((PySparkException, AnalysisException),
                       match="'exactlyOnce' applies to streaming writes"):
        (df.write.format("ads").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("topic", "s-out").option("exactlyOnce", "true").mode("append").save())
