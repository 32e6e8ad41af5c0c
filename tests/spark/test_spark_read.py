"""Batch reads with spark.read.format("ads") against a real broker: what comes back equals
what was produced, for each form of the starting and ending options."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.utils import AnalysisException

from ads.testing import EmbeddedBroker
from conftest import create_topic

TS = 1_700_000_000_000
TOPIC = "events"
PARTITIONS = 3
COUNT = 90




def produce(bootstrap: str, topic: str, count: int, partitions: int,
            ts: int = TS) -> list[dict[str, Any]]:
    """Produces ``count`` records round-robin over the partitions, timestamps 1 s apart;
    returns them with the offsets the broker gave."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produced: list[dict[str, Any]] = []

    def delivered(headers: Any) -> Any:
        def report(err: Any, msg: Any) -> None:
            assert err is None, err
            produced.append({"partition": msg.partition(), "offset": msg.offset(),
                             "key": msg.key(), "value": msg.value(),
                             "timestamp": msg.timestamp()[1],
                             "headers": [{"key": k, "value": v} for k, v in headers]
                             if headers else None})
        return report

    for i in range(count):
        headers = [("trace", b"t%d" % i), ("empty", None)] if i % 4 == 0 else None
        producer.produce(topic, value=b"value-%d" % i, key=None if i % 5 == 0 else b"k%d" % i,
                         partition=i % partitions, timestamp=ts + i * 1000, headers=headers,
                         on_delivery=delivered(headers))
    assert producer.flush(15) == 0
    return sorted(produced, key=lambda r: (r["partition"], r["offset"]))


@pytest.fixture(scope="module")
def produced(broker: EmbeddedBroker) -> list[dict[str, Any]]:
    create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    create_topic(broker.bootstrap_servers, "events-other", 1)
    produce(broker.bootstrap_servers, "events-other", 5, 1)
    return produce(broker.bootstrap_servers, TOPIC, COUNT, PARTITIONS)


def reader(spark: SparkSession, broker: EmbeddedBroker, **options: str) -> DataFrame:
    r = spark.read.format("ads").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    if not {"subscribe", "subscribePattern", "assign"} & set(options):
        r = r.option("subscribe", TOPIC)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def rows(df: DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in df.collect():
        d = row.asDict(recursive=True)
        d["timestamp"] = int(d["timestamp"].timestamp() * 1000)
        d["key"] = bytes(d["key"]) if d["key"] is not None else None
        d["value"] = bytes(d["value"])
        if d.get("headers") is not None:
            d["headers"] = [{"key": h["key"], "value": None if h["value"] is None
                             else bytes(h["value"])} for h in d["headers"]]
        out.append(d)
    return sorted(out, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def expect(produced: list[dict[str, Any]], headers: bool = False, **bounds: Any
           ) -> list[dict[str, Any]]:
    """``bounds``: per-partition (start, end) offsets as ``p0=(s, e)``."""
    out = []
    for r in produced:
        lo, hi = bounds.get(f"p{r['partition']}", (0, 1 << 62))
        if lo <= r["offset"] < hi:
            row = {**r, "topic": TOPIC, "timestampType": 0}
            if not headers:
                row.pop("headers")
            out.append(row)
    return out


def test_spark_read_equals_produced_with_headers(spark: SparkSession, broker: EmbeddedBroker,
                                                 produced: list[dict[str, Any]]) -> None:
    df = reader(spark, broker, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert rows(df) == expect(produced, headers=True)
    assert rows(reader(spark, broker)) == expect(produced)


def offsets_of(produced: list[dict[str, Any]], partition: int) -> list[int]:
    return [r["offset"] for r in produced if r["partition"] == partition]


@pytest.mark.parametrize("form", ["json", "timestamp", "by-timestamp", "assign", "pattern"])
def test_spark_read_starting_and_ending_forms(spark: SparkSession, broker: EmbeddedBroker,
                                              produced: list[dict[str, Any]],
                                              form: str) -> None:
    per = {p: offsets_of(produced, p) for p in range(PARTITIONS)}
    if form == "json":
        df = reader(spark, broker,
                    startingOffsets=json.dumps({TOPIC: {"0": -2, "1": 4, "2": 10}}),
                    endingOffsets=json.dumps({TOPIC: {"0": 7, "1": -1, "2": 12}}))
        want = expect(produced, p0=(0, 7), p1=(4, 1 << 62), p2=(10, 12))
    elif form == "timestamp":
        # Records i go to partition i % 3 at TS + i s; the range is i in [30, 60).
        df = reader(spark, broker, startingTimestamp=str(TS + 30_000),
                    endingTimestamp=str(TS + 60_000))
        want = expect(produced, p0=(10, 20), p1=(10, 20), p2=(10, 20))
    elif form == "by-timestamp":
        df = reader(spark, broker,
                    startingOffsetsByTimestamp=json.dumps(
                        {TOPIC: {"0": TS, "1": TS + 3_000 * 5 + 1_000, "2": TS + 10**9}}),
                    startingOffsetsByTimestampStrategy="latest",
                    endingOffsetsByTimestamp=json.dumps(
                        {TOPIC: {"0": TS + 3_000 * 3, "1": TS + 10**9, "2": TS + 10**9}}))
        want = expect(produced, p0=(0, 3), p1=(5, 1 << 62), p2=(len(per[2]), 1 << 62))
    elif form == "assign":
        df = reader(spark, broker, assign=json.dumps({TOPIC: [2]}),
                    startingOffsets=json.dumps({TOPIC: {"2": 25}}))
        want = expect(produced, p0=(0, 0), p1=(0, 0), p2=(25, 1 << 62))
    else:
        df = reader(spark, broker, subscribePattern="ev.nts")
        want = expect(produced)
    assert rows(df) == want


def test_spark_read_min_partitions_splits_ranges(spark: SparkSession, broker: EmbeddedBroker,
                                                 produced: list[dict[str, Any]]) -> None:
    df = reader(spark, broker, minPartitions="8")
    assert df.rdd.getNumPartitions() >= 8
    assert rows(df) == expect(produced)


def error_text(exc: BaseException) -> str:
    return str(exc)


def test_spark_read_unknown_topic(spark: SparkSession, broker: EmbeddedBroker,
                                  produced: list[dict[str, Any]]) -> None:
    with pytest.raises(PySparkException) as failed:
        reader(spark, broker, subscribe="no-such-topic").collect()
    assert "no-such-topic" in error_text(failed.value)
    assert "failOnDataLoss" in error_text(failed.value)
    assert reader(spark, broker, subscribe="no-such-topic", failOnDataLoss="false").count() == 0


def test_spark_read_timestamp_without_match(spark: SparkSession, broker: EmbeddedBroker,
                                            produced: list[dict[str, Any]]) -> None:
    late = str(TS + 10**9)
    with pytest.raises(PySparkException, match="No offset matched"):
        reader(spark, broker, startingTimestamp=late).collect()
    assert reader(spark, broker, startingTimestamp=late,
                  startingOffsetsByTimestampStrategy="latest").count() == 0


def test_spark_read_bad_options_fail_at_planning(spark: SparkSession, broker: EmbeddedBroker,
                                                 produced: list[dict[str, Any]]) -> None:
    with pytest.raises(PySparkException, match="must specify all TopicPartitions"):
        reader(spark, broker, startingOffsets=json.dumps({TOPIC: {"0": 1}})).collect()
    with pytest.raises(PySparkException, match="can't be latest for batch"):
        reader(spark, broker, startingOffsets="latest").collect()
    with pytest.raises(PySparkException, match="after the ending offset"):
        reader(spark, broker, startingOffsets=json.dumps({TOPIC: {"0": 9, "1": 0, "2": 0}}),
               endingOffsets=json.dumps({TOPIC: {"0": 3, "1": -1, "2": -1}})).collect()
    with pytest.raises((PySparkException, AnalysisException), match="fixed schema"):
        (spark.read.format("ads").schema("value string")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("subscribe", TOPIC).load().collect())


def test_spark_read_offsets_deleted_by_retention(spark: SparkSession,
                                                 broker: EmbeddedBroker) -> None:
    create_topic(broker.bootstrap_servers, "trimmed", 1)
    produce(broker.bootstrap_servers, "trimmed", 20, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.delete_records([KafkaTopicPartition("trimmed", 0, 8)])
    for future in futures.values():
        future.result(15)
    explicit = json.dumps({"trimmed": {"0": 2}})
    with pytest.raises(PySparkException, match="earliest offset is now 8"):
        reader(spark, broker, subscribe="trimmed", startingOffsets=explicit).collect()
    df = reader(spark, broker, subscribe="trimmed", startingOffsets=explicit,
                failOnDataLoss="false")
    assert [r["offset"] for r in rows(df)] == list(range(8, 20))
    assert [r["offset"] for r in rows(reader(spark, broker, subscribe="trimmed"))] == list(
        range(8, 20))


def test_spark_read_explicit_registration(spark: SparkSession, broker: EmbeddedBroker,
                                          produced: list[dict[str, Any]]) -> None:
    import ads.spark

    ads.spark.register(spark)
    assert reader(spark, broker).count() == COUNT


def test_spark_read_committed_never_shows_aborted_records(spark: SparkSession,
                                                          broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "txn-read", 2)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "spark-read-tx"})
    p.init_transactions(30)
    for commit in (True, False, True):
        p.begin_transaction()
        for i in range(6):
            p.produce("txn-read", value=f"{'kept' if commit else 'dropped'}-{i}".encode(),
                      partition=i % 2)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)

    def values(isolation: str) -> list[bytes]:
        df = (spark.read.format("ads").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "txn-read").option("kafka.isolation.level", isolation)
              .load())
        return sorted(bytes(r.value) for r in df.select("value").collect())

    kept = sorted(f"kept-{i}".encode() for i in range(6)) * 2
    assert values("read_committed") == sorted(kept)
    # read_uncommitted sees the aborted records too, never the markers.
    assert values("read_uncommitted") == sorted(kept + [f"dropped-{i}".encode()
                                                        for i in range(6)])
