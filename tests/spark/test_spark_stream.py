"""Streaming reads with spark.readStream.format("ads"): micro-batch sizes under
maxOffsetsPerTrigger, restart from the checkpoint without duplicates or gaps, AvailableNow,
and a fresh query starting at latest."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from test_spark_read import produce

from ads.testing import EmbeddedBroker
from conftest import create_topic


def stream(spark: SparkSession, broker: EmbeddedBroker, topic: str, **options: str
           ) -> DataFrame:
    r = (spark.readStream.format("ads")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("subscribe", topic))
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def to_parquet(df: DataFrame, out: Path, checkpoint: Path, *, available_now: bool = False
               ) -> StreamingQuery:
    writer = (df.select("partition", "offset", "value").writeStream.format("parquet")
              .option("path", str(out)).option("checkpointLocation", str(checkpoint)))
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def batch_sizes(query: StreamingQuery) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def loaded(out: Path) -> list[tuple[int, int]]:
    table = ds.dataset(str(out), format="parquet").to_table(columns=["partition", "offset"])
    return sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                      strict=True))


def test_spark_stream_rate_limit_and_restart(spark: SparkSession, broker: EmbeddedBroker,
                                             tmp_path: Path) -> None:
    create_topic(broker.bootstrap_servers, "clicks", 2)
    produce(broker.bootstrap_servers, "clicks", 100, 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = stream(spark, broker, "clicks", startingOffsets="earliest", maxOffsetsPerTrigger="30")
    query = to_parquet(df, out, checkpoint)
    try:
        query.processAllAvailable()
        assert batch_sizes(query) == [30, 30, 30, 10]
    finally:
        query.stop()
    produce(broker.bootstrap_servers, "clicks", 40, 2)
    query = to_parquet(df, out, checkpoint)
    try:
        query.processAllAvailable()
        assert sum(batch_sizes(query)) == 40
    finally:
        query.stop()
    assert loaded(out) == sorted((p, o) for p in (0, 1) for o in range(70))


def test_spark_stream_available_now(spark: SparkSession, broker: EmbeddedBroker,
                                    tmp_path: Path) -> None:
    create_topic(broker.bootstrap_servers, "views", 3)
    produce(broker.bootstrap_servers, "views", 90, 3)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = stream(spark, broker, "views", startingOffsets="earliest", maxOffsetsPerTrigger="40")
    query = to_parquet(df, out, checkpoint, available_now=True)
    assert query.awaitTermination(90)
    assert query.exception() is None
    # 40 shared by three equal backlogs is 13 each (Spark's rounding down), so 39 a batch.
    assert batch_sizes(query) == [39, 39, 12]
    assert loaded(out) == sorted((p, o) for p in range(3) for o in range(30))


def test_spark_stream_starts_at_latest(spark: SparkSession, broker: EmbeddedBroker,
                                       tmp_path: Path) -> None:
    create_topic(broker.bootstrap_servers, "late", 1)
    produce(broker.bootstrap_servers, "late", 15, 1)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = to_parquet(stream(spark, broker, "late"), out, checkpoint)
    try:
        query.processAllAvailable()
        produce(broker.bootstrap_servers, "late", 5, 1)
        query.processAllAvailable()
    finally:
        query.stop()
    assert loaded(out) == [(0, o) for o in range(15, 20)]


def test_spark_stream_unknown_topic_fails(spark: SparkSession, broker: EmbeddedBroker,
                                          tmp_path: Path) -> None:
    query = to_parquet(stream(spark, broker, "nowhere"), tmp_path / "o", tmp_path / "c")
    try:
        with pytest.raises(Exception, match="nowhere"):
            query.processAllAvailable()
    finally:
        query.stop()


def test_spark_stream_replayed_first_batch_after_restart(broker: EmbeddedBroker) -> None:
    from ads.spark.options import parse_source_options
    from ads.spark.planning import DataLossError
    from ads.spark.source import kafka_schema
    from ads.spark.stream import AdsStreamReader

    create_topic(broker.bootstrap_servers, "replay", 1)
    produce(broker.bootstrap_servers, "replay", 10, 1)

    def new_reader(**options: str) -> AdsStreamReader:
        parsed = parse_source_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                       "subscribe": "replay", **options}, streaming=True)
        return AdsStreamReader(parsed, kafka_schema())

    first_run = new_reader()
    start = first_run.initialOffset()
    assert start == {"replay": {"0": 10}} and first_run.initialOffset() is start
    logged_end = {"replay": {"0": 10}}
    produce(broker.bootstrap_servers, "replay", 5, 1)
    # The query restarts before batch 0 committed: "latest" now resolves past its end.
    restarted = new_reader()
    assert restarted.initialOffset() == {"replay": {"0": 15}}
    assert restarted.partitions(restarted.initialOffset(), logged_end) == []
    explicit = new_reader(startingOffsets='{"replay":{"0":12}}')
    with pytest.raises(DataLossError, match="offset was changed from 12 to 10"):
        explicit.partitions(explicit.initialOffset(), logged_end)
    explicit.stop()
    restarted.stop()
    first_run.stop()
