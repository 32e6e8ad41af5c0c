"""The sink of the ``ads`` format: ``df.write.format("ads")`` and ``df.writeStream``.

Columns as Spark's Kafka sink: ``value`` (string or binary) is required; ``key`` (string or
binary), ``topic`` (string), ``partition`` (int) and ``headers``
(``array<struct<key:string,value:binary>>``) are optional. The ``topic`` option, when given,
wins over the column. A row with no partition goes where the producer's partitioner puts it:
murmur2 of the key, Kafka's Java default, so keys land where Spark's own sink puts them.

Delivery is at-least-once, like Spark's: each task produces its rows through
confluent-kafka, flushes, and fails if any record was not acknowledged, so Spark's retry
may write a task's rows twice.

``exactlyOnce=true`` on a streaming write: each task writes its rows of a micro-batch in one
transaction of transactional id ``ads-sink-<query id>-<task partition>`` and commits in the
same transaction, as the consumer offset of group ``ads-sink-<query id>-<task partition>``
on partition 0 of the ``topic`` option's topic, the number of the next micro-batch to write
(batch id + 1). A task first calls ``init_transactions`` (which fences a zombie attempt of
the same partition and aborts what it left open), then reads that offset (read_committed,
so no pending one): if it is past this batch id, the batch was written already (the query
stopped after the transaction committed but before Spark recorded the batch) and the task
writes nothing. So a replayed micro-batch is never written twice and an aborted one is
written again. The query id and batch id come from the task's local properties
(``sql.streaming.queryId``, ``streaming.sql.batchId``); the query id is kept in the
checkpoint, so a restarted query finds its progress. Needs the ``topic`` option, and the
same task partitioning on a replay (the source replays a batch over the same partitions).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pyspark import TaskContext
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

from ads.client.security import librdkafka_properties
from ads.spark.options import SinkOptions, SourceOptionError

__all__ = ["AdsBatchWriter", "AdsStreamWriter", "SinkCommit", "check_producer_config",
           "check_sink_schema"]

_FLUSH_TIMEOUT_S = 120.0
EXACTLY_ONCE_NEEDS_TOPIC = (
    "Option 'exactlyOnce' needs the 'topic' option: each task records the micro-batches it "
    "wrote as a committed offset on that topic, in the same transaction as its rows.")
EXACTLY_ONCE_BATCH_ONLY = (
    "Option 'exactlyOnce' applies to streaming writes (writeStream); a batch write is "
    "at-least-once. Remove the option.")
_QUERY_ID_KEY = "sql.streaming.queryId"
_BATCH_ID_KEY = "streaming.sql.batchId"


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
    config.update(librdkafka_properties(dict(options.producer_config)))
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

    def __init__(self, options: SinkOptions, extra: dict[str, Any] | None = None) -> None:
        self.producer = Producer({**producer_config(options), **(extra or {})})
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


class _TransactionalProducing(_Producing):
    """exactlyOnce: one task's rows of one micro-batch in one transaction, with the batch
    recorded as written (see the module docstring)."""

    def __init__(self, options: SinkOptions) -> None:
        ctx = TaskContext.get()
        query_id = ctx.getLocalProperty(_QUERY_ID_KEY) if ctx is not None else None
        batch_id = ctx.getLocalProperty(_BATCH_ID_KEY) if ctx is not None else None
        if ctx is None or query_id is None or batch_id is None or options.topic is None:
            raise SourceOptionError("exactlyOnce: the task has no streaming query or batch id")
        self.name = f"ads-sink-{query_id}-{ctx.partitionId()}"
        self.batch_id = int(batch_id)
        super().__init__(options, {"transactional.id": self.name})
        self.progress_topic = options.topic
        self.options = options

    def write(self, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
        producer = self.producer
        producer.init_transactions(_FLUSH_TIMEOUT_S)
        group = Consumer({**librdkafka_properties(dict(self.options.security)),
                          "bootstrap.servers": self.options.bootstrap_servers,
                          "group.id": self.name, "isolation.level": "read_committed",
                          "enable.auto.commit": False})
        try:
            progress = TopicPartition(self.progress_topic, 0)
            done = group.committed([progress], _FLUSH_TIMEOUT_S)[0].offset
            if done > self.batch_id:
                return SinkCommit(0)  # written by an earlier attempt or run
            producer.begin_transaction()
            try:
                for batch in batches:
                    self._write_batch(batch)
                    self._check()
                producer.flush(_FLUSH_TIMEOUT_S)
                self._check()
                producer.send_offsets_to_transaction(
                    [TopicPartition(self.progress_topic, 0, self.batch_id + 1)],
                    group.consumer_group_metadata(), _FLUSH_TIMEOUT_S)
                producer.commit_transaction(_FLUSH_TIMEOUT_S)
            except BaseException:
                producer.abort_transaction(_FLUSH_TIMEOUT_S)
                raise
        finally:
            group.close()
        return SinkCommit(self.count)


class AdsBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return _Producing(self.options).write(iterator)


class AdsStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        if self.options.exactly_once:
            return _TransactionalProducing(self.options).write(iterator)
        return _Producing(self.options).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Records are acknowledged (or their transactions committed) by the tasks; nothing
        is left to commit."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """At-least-once: what the tasks wrote stays written."""
