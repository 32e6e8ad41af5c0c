"""Transforms for `ads pipeline copy --transform copy_transforms:FUNC` in the tests: a
top-level module of its own file, so the job ships it to the executors."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as f

PREFIX = b"copied:"


def tag(df: DataFrame) -> DataFrame:
    """Prefixes every value, in Python on each Arrow batch of the executors; keys, headers
    and partitions pass through, so the order per partition is kept."""
    def prefix(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            i = batch.schema.get_field_index("value")
            tagged = pc.binary_join_element_wise(pa.scalar(PREFIX), batch.column(i), b"")
            yield batch.set_column(i, "value", tagged)

    kept = df.select("key", "value", "headers", "partition")
    return kept.mapInArrow(prefix, kept.schema)


def tag_sql(df: DataFrame) -> DataFrame:
    """The same prefix as a Spark SQL expression (runs in the JVM); records at odd offsets
    dropped."""
    return (df.where(f.col("offset") % 2 == 0)
            .withColumn("value", f.concat(f.lit(PREFIX), f.col("value"))))


def not_a_frame(df: DataFrame) -> str:
    return "nothing"
