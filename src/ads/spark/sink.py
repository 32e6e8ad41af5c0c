"""The sink of the ``ads`` format: ``df.write.format("ads")`` and ``df.writeStream``.

Columns as Spark's Kafka sink: ``value`` (string or binary) is required; ``key`` (string or
binary), ``topic`` (string), ``partition`` (int) and ``headers``
(``array<struct<key:string,value:binary>>``) are optional. The ``topic`` option, when given,
wins over the column. A row with no partition goes where the producer's partitioner puts it:
murmur2 of the key, Kafka's Java default, so keys land where Spark's own sink puts them.

Delivery is at-least-once, like Spark's: each task produces its rows through
confluent-kafka, flushes, and fails if any record was not acknowledged, so Spark's retry
may write a task's rows twice. ``exactlyOnce=true`` (one transaction per micro-batch and
partition, committed with the batch id) needs the transactional producer, which ADS brokers
do not support yet: the option fails at planning time with an explanation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from ads.spark.options import SinkOptions, SourceOptionError

__all__ = ["AdsBatchWriter", "AdsStreamWriter", "SinkCommit", "check_producer_config",
           "check_sink_schema"]

_FLUSH_TIMEOUT_S = 120.0
EXACTLY_ONCE_UNSUPPORTED = (
    "Option 'exactlyOnce' needs transactional producers (one transaction per micro-batch "
    "and partition), which ADS brokers do not support yet. Remove the option to write "
    "at-least-once, as Spark's Kafka sink does.")


@dataclass
class SinkCommit(WriterCommitMessage):
    records: int


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's Kafka sink rules for the input columns, checked at planning time."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if options.topic is None:
        if "topic" not in fields:
            raise SourceOptionError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic.")
        if not isinstance(fields["topic"], StringType):
            raise SourceOptionError(
                f"Topic type must be a string, got {fields['topic'].simpleString()}")
    if "value" not in fields:
        raise SourceOptionError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise SourceOptionError(
                f"{name} attribute type must be a string or binary, got "
                f"{fields[name].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SourceOptionError(
            f"partition attribute type must be an int, got "
            f"{fields['partition'].simpleString()}")
    if "headers" in fields and not _is_headers(fields["headers"]):
        raise SourceOptionError(
            "headers attribute type must be an array<struct<key:string,value:binary>>, got "
            f"{fields['headers'].simpleString()}")


def _is_headers(dtype: Any) -> bool:
    if not isinstance(dtype, ArrayType) or not isinstance(dtype.elementType, StructType):
        return False
    inner = {f.name: f.dataType for f in dtype.elementType.fields}
    return (set(inner) == {"key", "value"} and isinstance(inner["key"], StringType)
            and isinstance(inner["value"], BinaryType))


def producer_config(options: SinkOptions) -> dict[str, Any]:
    config: dict[str, Any] = {"partitioner": "murmur2_random", "linger.ms": 5}
    config.update(dict(options.producer_config))
    config["bootstrap.servers"] = options.bootstrap_servers
    return config


def check_producer_config(options: SinkOptions) -> None:
    """Builds (and drops) a producer so that a bad ``kafka.*`` option fails at planning
    time rather than in every task."""
    try:
        Producer(producer_config(options))
    except (KafkaException, ValueError, TypeError) as exc:
        raise SourceOptionError(f"Invalid kafka.* option for the ads sink: {exc}") from exc


class _Producing:
    """One task's producer: every row produced, flushed, and checked."""

    def __init__(self, options: SinkOptions) -> None:
        self.producer = Producer(producer_config(options))
        self.topic = options.topic
        self.failures: list[KafkaError] = []
        self.count = 0

    def _delivered(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.failures.append(err)

    def write(self, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
        for batch in batches:
            self._write_batch(batch)
            self._check()
        remaining = self.producer.flush(_FLUSH_TIMEOUT_S)
        self._check()
        if remaining:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                            f"{remaining} records were not acknowledged"))
        return SinkCommit(self.count)

    def _check(self) -> None:
        if self.failures:
            raise KafkaException(self.failures[0])

    def _write_batch(self, batch: pa.RecordBatch) -> None:
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        n = batch.num_rows
        values = _bytes_column(batch, names.get("value"), n)
        keys = _bytes_column(batch, names.get("key"), n)
        if self.topic is not None:
            topics: Sequence[str | None] = [self.topic] * n
        else:
            topics = batch.column(names["topic"]).to_pylist()
        partitions = (batch.column(names["partition"]).to_pylist()
                      if "partition" in names else [None] * n)
        headers = (batch.column(names["headers"]).to_pylist()
                   if "headers" in names else [None] * n)
        produce = self.producer.produce
        delivered = self._delivered
        for topic, key, value, partition, hdrs in zip(topics, keys, values, partitions,
                                                      headers, strict=True):
            if topic is None:
                raise SourceOptionError(
                    "null topic present in the data. Use the topic option for setting a "
                    "topic.")
            kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            if hdrs:
                kwargs["headers"] = [(h["key"], h["value"]) for h in hdrs]
            while True:
                try:
                    produce(topic, **kwargs)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.count += 1
        self.producer.poll(0)


def _bytes_column(batch: pa.RecordBatch, index: int | None, n: int) -> list[bytes | None]:
    if index is None:
        return [None] * n
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[bytes | None] = column.to_pylist()
    return values


class AdsBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return _Producing(self.options).write(iterator)


class AdsStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return _Producing(self.options).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Records are acknowledged by the tasks; nothing is left to commit."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """At-least-once: what the tasks wrote stays written."""
