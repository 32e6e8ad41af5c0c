"""The batch reader of the ``ads`` source and the task-side fetch loop it shares with the
streaming reader.

PySpark runs ``read`` on an unpickled copy of the reader made before planning, so each
``RangePartition`` carries everything its task needs: the offset range and the connection
settings. A task fetches its range from the partition leader, keeping the next fetch in
flight while the last response is decoded into Arrow (``ads.spark.columns``), and yields one
Arrow record batch per fetch response.

Failures: a broker that cannot be reached, or that keeps answering with leader errors,
fails the task and Spark retries it from the start of its range. Offsets that are gone
(``OFFSET_OUT_OF_RANGE``, or a log that ends before the range does) are data loss: the task
fails when ``failOnDataLoss`` is true, and otherwise skips to what is still there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ads.protocol.errors import ErrorCode
from ads.spark.columns import AbortedTransaction, decode_fetched, record_set_end
from ads.spark.options import SourceOptions
from ads.spark.planning import OffsetRange, Planner, report_data_loss
from ads.spark.wire import (
    EARLIEST,
    LATEST,
    BrokerConnection,
    Cluster,
    FetchedPartition,
    KafkaWireError,
    TopicPartition,
)

__all__ = ["AdsBatchReader", "FetchSettings", "RangePartition", "read_range"]

log = logging.getLogger(__name__)

_LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_ENOUGH_REPLICAS,
})
_ATTEMPTS = 8
_BACKOFF_S = 0.25
_STALLED_FETCHES = 50


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """What a task needs to reach the cluster; copied from the source options."""

    bootstrap_servers: str
    client_id: str
    include_headers: bool
    read_committed: bool
    fail_on_data_loss: bool
    fetch_max_bytes: int
    fetch_max_wait_ms: int
    request_timeout_ms: int
    check_crcs: bool
    security: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_options(cls, o: SourceOptions) -> FetchSettings:
        return cls(o.bootstrap_servers, o.client_id, o.include_headers, o.read_committed,
                   o.fail_on_data_loss, o.fetch_max_bytes, o.fetch_max_wait_ms,
                   o.request_timeout_ms, o.check_crcs, o.security)


class RangePartition(InputPartition):
    """One Spark input partition: one offset range of one topic partition."""

    def __init__(self, offset_range: OffsetRange, settings: FetchSettings) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.settings = settings

    def __repr__(self) -> str:
        r = self.offset_range
        return f"RangePartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


def read_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        return iter(())  # PySpark's placeholder when a plan has no ranges
    return read_range(partition.offset_range, partition.settings)


def read_range(r: OffsetRange, s: FetchSettings) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records of ``r``, in offset order."""
    if r.start >= r.end:
        return
    tp = r.topic_partition
    with Cluster(s.bootstrap_servers, client_id=s.client_id,
                 timeout_s=s.request_timeout_ms / 1000, security=dict(s.security)) as cluster:
        cluster.refresh([r.topic])
        fetcher = _Fetcher(cluster, tp, s)
        pos = r.start
        stalled = 0
        while pos < r.end:
            fetched = fetcher.fetch(pos)
            if fetched is None:
                continue
            if fetched.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                pos = _after_out_of_range(cluster, tp, pos, r.end, s)
                continue
            if fetched.error != ErrorCode.NONE:
                raise KafkaWireError(f"Fetch of {tp} at offset {pos} failed: "
                                     f"{fetched.error.name}", fetched.error)
            ahead = record_set_end(fetched.records)
            if ahead is not None and pos < ahead < r.end:
                fetcher.send(ahead)
            aborted = None
            if s.read_committed and fetched.aborted:
                aborted = [AbortedTransaction(p, o) for p, o in fetched.aborted]
            chunk = decode_fetched(fetched.records, topic=r.topic, partition=r.partition,
                                   start=pos, end=r.end, include_headers=s.include_headers,
                                   aborted=aborted, check_crcs=s.check_crcs)
            if chunk.batch is not None:
                yield chunk.batch
            if chunk.next_offset > pos:
                pos = chunk.next_offset
                stalled = 0
                continue
            stalled += 1
            if stalled >= _STALLED_FETCHES:
                raise KafkaWireError(f"Fetches of {tp} at offset {pos} return no records "
                                     f"though the log goes on to {fetched.high_watermark}")
            stable = fetched.last_stable_offset if s.read_committed else fetched.high_watermark
            if 0 <= stable <= pos:
                # The log ends before the planned range does: truncated or deleted data.
                report_data_loss(s.fail_on_data_loss,
                                 f"Cannot fetch offset {pos} of {tp}: the log ends at {stable}")
                return


class _Fetcher:
    """Fetches of one partition, with leader-change retries and at most one fetch in
    flight (sent ahead while the previous response is decoded)."""

    def __init__(self, cluster: Cluster, tp: TopicPartition, s: FetchSettings) -> None:
        self.cluster = cluster
        self.tp = tp
        self.s = s
        self.inflight: tuple[BrokerConnection, int] | None = None
        self.failures = 0

    def send(self, offset: int) -> None:
        if self.inflight is not None:
            return
        try:
            conn = self.cluster.send_fetch(
                self.tp, offset, max_bytes=self.s.fetch_max_bytes,
                max_wait_ms=self.s.fetch_max_wait_ms, read_committed=self.s.read_committed)
        except KafkaWireError as exc:
            self._retry_later(exc)
            return
        self.inflight = (conn, offset)

    def fetch(self, offset: int) -> FetchedPartition | None:
        """The response for ``offset``, or None after a retriable failure (call again)."""
        if self.inflight is not None and self.inflight[1] != offset:
            self._take()  # sent ahead for an offset the reader no longer wants
        self.send(offset)
        return self._take()

    def _take(self) -> FetchedPartition | None:
        if self.inflight is None:
            return None
        (conn, offset), self.inflight = self.inflight, None
        try:
            fetched = self.cluster.receive_fetch(conn)
        except KafkaWireError as exc:
            self.cluster.forget(conn)
            self._retry_later(exc)
            return None
        if fetched.error in _LEADER_ERRORS:
            self._retry_later(KafkaWireError(
                f"Fetch of {self.tp} at offset {offset}: {fetched.error.name}", fetched.error))
            return None
        self.failures = 0
        return fetched

    def _retry_later(self, exc: KafkaWireError) -> None:
        self.failures += 1
        if self.failures >= _ATTEMPTS:
            raise exc
        log.info("retrying after %s", exc)
        time.sleep(_BACKOFF_S * self.failures)
        try:
            self.cluster.refresh([self.tp.topic])
        except KafkaWireError as refresh_error:
            log.info("metadata refresh failed: %s", refresh_error)


def _after_out_of_range(cluster: Cluster, tp: TopicPartition, pos: int, end: int,
                        s: FetchSettings) -> int:
    """Where reading resumes after OFFSET_OUT_OF_RANGE at ``pos`` (``end`` to stop)."""
    bounds = cluster.list_offsets({tp: EARLIEST}, read_committed=s.read_committed)
    earliest = bounds[tp][0]
    if pos < earliest:
        report_data_loss(s.fail_on_data_loss,
                         f"Cannot fetch offset {pos} of {tp}: the earliest offset is now "
                         f"{earliest}")
        return min(earliest, end)
    latest = cluster.list_offsets({tp: LATEST}, read_committed=s.read_committed)[tp][0]
    report_data_loss(s.fail_on_data_loss,
                     f"Cannot fetch offset {pos} of {tp}: the log ends at {latest}")
    return end


class AdsBatchReader(DataSourceReader):
    """``spark.read.format("ads")``: ranges are resolved once, at planning."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        settings = FetchSettings.from_options(self.options)
        with Cluster(self.options.bootstrap_servers, client_id=self.options.client_id,
                     timeout_s=self.options.request_timeout_ms / 1000,
                     security=dict(self.options.security)) as cluster:
            ranges = Planner(self.options, cluster).batch_ranges()
        return [RangePartition(r, settings) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)
