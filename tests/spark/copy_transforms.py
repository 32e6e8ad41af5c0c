"""Transforms for `ads pipeline copy --transform copy_transforms:FUNC` in the tests: a
top-level module of its own file, so the job ships it to the executors."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as f

PREFIX = b"copied:"


def _prefixed(batches: Iterator[pa.RecordBatch], pause_s: float
              ) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        i = batch.schema.get_field_index("value")
        tagged = pc.binary_join_element_wise(pa.scalar(PREFIX), batch.column(i), b"")
        yield batch.set_column(i, "value", tagged)
        time.sleep(pause_s)


def tag(df: DataFrame) -> DataFrame:
    """Prefixes every value, in Python on each Arrow batch of the executors; keys, headers
    and partitions pass through, so the order per partition is kept."""
    kept = df.select("key", "value", "headers", "partition")
    return kept.mapInArrow(lambda batches: _prefixed(batches, 0.0), kept.schema)


def tag_slowly(df: DataFrame) -> DataFrame:
    """``tag``, pausing after each Arrow batch: the sink's transaction stays open across the
    pauses, long enough for a test to kill the job inside it."""
    kept = df.select("key", "value", "headers", "partition")
    return kept.mapInArrow(lambda batches: _prefixed(batches, 0.05), kept.schema)


def tag_sql(df: DataFrame) -> DataFrame:
    """The same prefix as a Spark SQL expression (runs in the JVM); records at odd offsets
    dropped."""
    return (df.where(f.col("offset") % 2 == 0)
            .withColumn("value", f.concat(f.lit(PREFIX), f.col("value"))))


def not_a_frame(df: DataFrame) -> str:
    return "nothing"
