"""One partition replica on this broker: its log, leader epoch, ISR and high watermark.

Every write reaches a partition through `ReplicaManager.append_records`: the leader appends
(`append`) and serves reads; a follower (made one by `ReplicaManager.become_follower`)
refuses both with NOT_LEADER_OR_FOLLOWER and copies the leader's batches instead
(`append_replicated`, origin REPLICATION, fed by `ads.replication.fetcher`; bytes, offsets
and leader epochs kept, each batch's CRC checked). `append` validates by origin: a
producer's batch (CLIENT) as described below, a batch this broker built (COORDINATOR: a
coordinator's records, or a transaction marker) only for its size; with acks=all,
`min.insync.replicas` is checked whatever the origin, capped at the number of replicas
(`effective_min_isr`, Kafka 4's rule: a topic whose `min.insync.replicas` exceeds its
replication factor stays writable with every replica in sync).

Invariants (docs/replication.md):
- The high watermark is the smallest log end offset over the in-sync replicas, advanced only
  by `maybe_advance_high_watermark` on the leader and never moved back there; a follower
  takes the leader's, bounded by its own log end offset.
- The leader knows each follower's log end offset from the offset it last fetched from
  (`record_follower_fetch`) and when it was last caught up: a follower is caught up when it
  fetched from the leader's log end offset, or from the log end offset the leader had at
  the follower's previous fetch (then it was caught up at that previous fetch's time).
- A follower joins the ISR once it has everything below the high watermark and everything
  of the current leader epoch's start (`may_join_isr`); an ISR member not caught up for
  `replica.lag.time.max.ms` leaves it (`out_of_sync`). Either change takes effect only once
  the controller's store has recorded it (`ReplicaManager`), so the ISR in memory is never
  smaller than the recorded one that a new leader is chosen from.

Transactions: a transactional batch is appended like any other (the produce handler has
checked it belongs to its producer's ongoing transaction, `ads.broker.txn_verify`; when the
coordinator was asked over the network, the `VerificationGuard` left in the producer state
must still be there, or a marker ended the transaction meanwhile and the append is
INVALID_TXN_STATE). A COORDINATOR control batch is a COMMIT or ABORT marker
(`ads.storage.log.Log.append_marker_batch`). `last_stable_offset` and
`aborted_transactions` serve read_committed fetches; the last stable offset stays below a
transaction until its marker is below the high watermark.

The produce path does per-batch work only: `validate_batches` reads each batch header and
runs one C CRC32C over it; the log patches base offsets in place and appends the bytes.
Records are decoded only when the topic's rules (`ads.records.checks`) could refuse one of
them: keys on a compacted topic, timestamps the header puts outside
`message.timestamp.before.max.ms` / `message.timestamp.after.max.ms`. Every refused record
is then reported (KIP-467), not just the first.
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ads.common.partitions import TopicPartition
from ads.protocol.errors import ErrorCode
from ads.records import batch as rb
from ads.records.checks import BadRecord, RecordRules, bad_records, summary
from ads.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from ads.records.recompress import recompress_batch, target_codec
from ads.storage.config import LONG_MAX, LogConfig
from ads.storage.errors import StorageError
from ads.storage.producer_state import ProducerStateEntry
from ads.storage.producer_state import VerificationGuard as VerificationGuard

if TYPE_CHECKING:
    import uuid

    from ads.storage.files import FileRegion
    from ads.storage.log import Log
    from ads.storage.txn_index import AbortedTxn

log = logging.getLogger("ads.replication")

_RECORD_ERRORS: list[tuple[type[RecordError], ErrorCode]] = [
    (RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (UnsupportedMagicError, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (UnsupportedCompressionError, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (InvalidRecordError, ErrorCode.INVALID_RECORD),
]


class AppendOrigin(Enum):
    """Who wrote a batch, which decides how it is validated (Kafka's AppendOrigin)."""

    CLIENT = "client"  # a producer's batch
    COORDINATOR = "coordinator"  # a coordinator's record or a transaction marker
    REPLICATION = "replication"  # a leader's batches, copied by a follower as they are


class PartitionError(Exception):
    """A per-partition failure carrying the Kafka error code for the response: the one
    error family of `replication/`; `of` maps the storage and record errors below it."""

    def __init__(self, code: ErrorCode, message: str | None = None,
                 record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
        # (batch index, message) of each refused record (Produce v8+, KIP-467).
        self.record_errors = record_errors

    def detached(self) -> PartitionError:
        """The same error without its traceback and cause, to be kept as a result: a
        caught exception refers to the frames it passed through, whose locals may hold a
        request's inflated records (a decompression bomb inflates up to its bound), and
        keeping it would keep them alive until the garbage collector finds the cycle."""
        return PartitionError(self.code, self.message, self.record_errors)

    @classmethod
    def of(cls, exc: StorageError | RecordError | OSError) -> PartitionError:
        """The Kafka error of a storage, record or file-system error (mapped here only)."""
        if isinstance(exc, StorageError):
            return cls(ErrorCode[exc.kafka_error], str(exc))
        if isinstance(exc, RecordError):
            for kind, code in _RECORD_ERRORS:
                if isinstance(exc, kind):
                    return cls(code, str(exc))
            return cls(ErrorCode.CORRUPT_MESSAGE, str(exc))
        return cls(ErrorCode.KAFKA_STORAGE_ERROR, str(exc))


def _refused(bad: list[BadRecord]) -> PartitionError:
    timestamps, message = summary(bad)
    code = ErrorCode.INVALID_TIMESTAMP if timestamps else ErrorCode.INVALID_RECORD
    return PartitionError(code, message, tuple((b.batch_index, b.message) for b in bad))


class ProduceResult(NamedTuple):  # a tuple: built on every append, cheaper than a dataclass
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    # The offset after the appended batch: acks=all waits until the high watermark reaches it.
    next_offset: int


class Partition:
    """One partition replica on this broker. Used from the event loop thread only."""

    def __init__(self, topic: str, topic_id: uuid.UUID, index: int, log_: Log,
                 leader_epoch: int, node_id: int, config: LogConfig, leader: bool = True
                 ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = log_
        self.node_id = node_id
        self.key = TopicPartition(topic, index)  # the purgatories' key, built once
        self.config = config  # also builds the record rules
        self.leader_epoch = leader_epoch
        self.is_leader = False
        self.leader_id = -1  # the broker this replica follows (-1: none known)
        self.isr: list[int] = []
        self.replicas: list[int] = [node_id]
        # Log end offsets of the followers as the leader knows them (its own is its log's);
        # the high watermark is the minimum over the ISR.
        self.replica_end_offsets: dict[int, int] = {}
        # Per follower: when it was last caught up, and (leader's log end offset, time) at
        # its previous fetch.
        self._caught_up_ms: dict[int, int] = {}
        self._last_fetch: dict[int, tuple[int, int]] = {}
        self._epoch_start_offset = 0  # where this leader's epoch began
        self.isr_change_pending = False  # an ISR change is being recorded
        if leader:
            self.make_leader(leader_epoch, [node_id])

    @property
    def effective_min_isr(self) -> int:
        """`min.insync.replicas`, but never more than the partition's replicas."""
        return min(self.config.min_insync_replicas, len(self.replicas))

    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int] | None = None,
                    now_ms: int = 0) -> None:
        """Leads from `leader_epoch` on: later appends carry it; older epochs are fenced.
        Followers in the ISR count as caught up now (as in Kafka); the others must fetch."""
        self.leader_epoch = leader_epoch
        self.is_leader = True
        self.leader_id = self.node_id
        self.isr = list(isr)
        self.replicas = list(replicas) if replicas else [self.node_id]
        if self.log.latest_epoch is None or self.log.latest_epoch < leader_epoch:
            self.log.assign_epoch(leader_epoch, self.log.log_end_offset)
        self._epoch_start_offset = self.log.log_end_offset
        self.replica_end_offsets = {}
        self._caught_up_ms = {r: now_ms for r in self.isr if r != self.node_id}
        self._last_fetch = {}
        self.maybe_advance_high_watermark()

    def make_follower(self, leader_epoch: int, leader_id: int = -1) -> None:
        """`leader_id` leads from `leader_epoch` on; this replica stops serving clients."""
        self.leader_epoch = leader_epoch
        self.is_leader = False
        self.leader_id = leader_id
        self.isr = []
        self.replica_end_offsets = {}
        self._caught_up_ms = {}
        self._last_fetch = {}

    # -- the leader's view of its followers ----------------------------------------------
    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched from `fetch_offset`: it has everything below it."""
        leader_end = self.log.log_end_offset
        caught_up = self._caught_up_ms.get(replica_id, -1)
        if fetch_offset >= leader_end:
            caught_up = now_ms
        else:
            previous = self._last_fetch.get(replica_id)
            if previous is not None and fetch_offset >= previous[0]:
                caught_up = max(caught_up, previous[1])
        self._caught_up_ms[replica_id] = caught_up
        self._last_fetch[replica_id] = (leader_end, now_ms)
        self.replica_end_offsets[replica_id] = fetch_offset

    def may_join_isr(self, replica_id: int) -> bool:
        end = self.replica_end_offsets.get(replica_id, -1)
        return (replica_id not in self.isr and replica_id in self.replicas
                and end >= self.log.high_watermark and end >= self._epoch_start_offset)

    def out_of_sync(self, now_ms: int, lag_ms: int) -> list[int]:
        """ISR members (never the leader) not caught up for more than `lag_ms`."""
        return [r for r in self.isr if r != self.node_id
                and now_ms - self._caught_up_ms.get(r, -1) > lag_ms]

    def set_isr(self, isr: list[int]) -> None:
        """The recorded ISR, same leader epoch (after this leader's change or from the store)."""
        self.isr = list(isr)
        for replica in self.isr:
            self._caught_up_ms.setdefault(replica, -1)

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self._rules = RecordRules(
            f"{self.topic}-{self.index}", require_key=config.compact,
            log_append_time=config.log_append_time,
            before_max_ms=config.timestamp_before_max_ms,
            after_max_ms=config.timestamp_after_max_ms)
        self._codec = target_codec(config.compression_type)  # None: keep the producer's
        self._log_append_time = config.message_timestamp_type == "LogAppendTime"
        # With Kafka's defaults only a batch claiming LogAppendTime needs `must_scan`.
        self._may_refuse = config.compact or (
            config.timestamp_before_max_ms < LONG_MAX or config.timestamp_after_max_ms < LONG_MAX)

    def maybe_advance_high_watermark(self) -> bool:
        """Moves the high watermark to the smallest log end offset in the ISR if that is
        ahead of it; returns whether it moved. Never moves it back."""
        candidate = self.log.log_end_offset
        if len(self.isr) > 1:  # the leader alone is the whole ISR; else its followers count
            ends = self.replica_end_offsets
            candidate = min(candidate, *(ends.get(r, -1) for r in self.isr if r != self.node_id))
        if candidate > self.log.high_watermark:
            self.log.high_watermark = candidate
            return True
        return False

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark."""
        return self.log.last_stable_offset

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        return self.log.aborted_transactions(fetch_offset, upper_offset)

    def append(self, records: memoryview | bytes | None, origin: AppendOrigin,
               required_acks: int, now_ms: int) -> ProduceResult:
        """Appends one partition's batch as its leader (`ReplicaManager.append_records`).

        CLIENT batches are validated as a producer's (one batch, no control batches, the
        topic's record rules, recompressed to its `compression.type`); COORDINATOR batches
        are built by this broker (a coordinator's records, or a transaction marker that
        ends its producer's transaction here) and kept as they are. With `required_acks`
        -1 an ISR smaller than `effective_min_isr` refuses the append, whatever its
        origin: a marker or a coordinator record is committed like data."""
        if records is None or len(records) == 0:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, "produce request without records")
        client = origin is AppendOrigin.CLIENT
        if client:
            records, headers = self._validate_client(
                records if isinstance(records, memoryview) else memoryview(records), now_ms)
        else:
            headers = self._validate_coordinator(records)
        if required_acks == -1 and len(self.isr) < self.effective_min_isr:
            raise PartitionError(ErrorCode.NOT_ENOUGH_REPLICAS)
        try:
            if not client and headers[0][1].is_control:
                info = self.log.append_marker_batch(records, self.leader_epoch, now_ms)
            else:
                info = self.log.append(
                    records, headers, leader_epoch=self.leader_epoch, now_ms=now_ms,
                    log_append_time=client and self._log_append_time)
        except (StorageError, RecordError) as exc:
            raise PartitionError.of(exc) from exc
        return ProduceResult(info.first_offset, info.log_append_time_ms, info.log_start_offset,
                             info.last_offset + 1)

    def start_verification(self, producer_id: int) -> VerificationGuard:
        """KIP-890: the guard an append checks once its transaction is verified."""
        return self.log.producer_state.start_verification(producer_id)

    def check_verification(self, guard: VerificationGuard) -> None:
        if not self.log.producer_state.verified(guard):
            raise PartitionError(
                ErrorCode.INVALID_TXN_STATE,
                f"the transaction of producer {guard.producer_id} ended while its write to "
                f"{self.topic}-{self.index} was being verified")

    def _validate_coordinator(self, batch: memoryview | bytes
                              ) -> list[tuple[int, rb.BatchHeader]]:
        # Built by this broker: not checked as a client's (a transactional TxnOffsetCommit
        # batch has no sequence, as Kafka's coordinator writes it).
        if len(batch) > self.config.max_message_bytes:
            raise PartitionError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"batch of {len(batch)} bytes exceeds max.message.bytes")
        try:
            return [(0, rb.read_batch_header(batch))]
        except RecordError as exc:
            raise PartitionError.of(exc) from exc

    def _validate_client(self, records: memoryview, now_ms: int
                         ) -> tuple[memoryview, list[tuple[int, rb.BatchHeader]]]:
        try:
            headers = rb.validate_batches(records, max_batch_bytes=self.config.max_message_bytes)
        except RecordError as exc:
            raise PartitionError.of(exc) from exc
        if len(headers) != 1:
            raise PartitionError(ErrorCode.INVALID_RECORD,
                                 "a produce request must carry exactly one record batch")
        header = headers[0][1]
        if header.is_control:
            raise PartitionError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
        if (self._may_refuse or header.attributes & rb.TIMESTAMP_TYPE_MASK) and (
                self._rules.must_scan(header, now_ms)):
            self._check_records(records, header, now_ms)
        if self._codec is not None and header.compression != self._codec:
            return self._recompress(records, header)
        return records, headers

    def _recompress(self, records: memoryview, header: rb.BatchHeader
                    ) -> tuple[memoryview, list[tuple[int, rb.BatchHeader]]]:
        # The topic's compression.type differs from the batch's codec: one batch in, one
        # out (`ads.records.recompress`); its size may change, so it is checked again.
        assert self._codec is not None
        try:
            out = recompress_batch(records, 0, header, self._codec,
                                   self.config.compression_level,
                                   self.config.max_inflated_bytes)
        except RecordError as exc:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
        if len(out) > self.config.max_message_bytes:
            raise PartitionError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {len(out)} bytes after recompression exceeds max.message.bytes "
                f"{self.config.max_message_bytes}")
        return memoryview(out), [(0, rb.read_batch_header(out, 0))]

    def _check_records(self, records: memoryview, header: rb.BatchHeader, now_ms: int) -> None:
        # Compaction keeps the last record per key, so a record without one could never be
        # kept or removed correctly; Kafka rejects it, and records out of the timestamp
        # bounds. The one place produce decodes records.
        try:
            bad = bad_records(records, 0, header, self._rules, now_ms,
                              self.config.max_inflated_bytes)
        except RecordError as exc:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
        if bad:
            raise _refused(bad)

    # -- a follower's copy -----------------------------------------------------------------
    def append_replicated(self, records: memoryview, leader_high_watermark: int,
                          leader_log_start_offset: int) -> ProduceResult:
        """Appends batches fetched from the leader (CRC-checked, bytes and offsets kept) and
        takes the leader's high watermark up to this log's end (origin REPLICATION, through
        `ReplicaManager.append_records`)."""
        if self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"{self.topic}-{self.index} is led here, not followed")
        end, headers = rb.scan_valid_prefix(records)
        if end < len(records) and not headers:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE,
                                 f"{self.topic}-{self.index}: replicated batch fails its CRC")
        first = self.log.log_end_offset
        try:
            self.log.append_as_follower(records[:end], headers)
            if leader_log_start_offset > self.log.log_start_offset:
                # The leader's retention or DeleteRecords moved its start: follow it.
                self.log.delete_records(min(leader_log_start_offset, self.log.high_watermark))
        except StorageError as exc:
            raise PartitionError.of(exc) from exc
        self.log.high_watermark = max(self.log.high_watermark,
                                      min(leader_high_watermark, self.log.log_end_offset))
        return ProduceResult(first, -1, self.log.log_start_offset, self.log.log_end_offset)

    def restart_at(self, log_start_offset: int) -> None:
        """A follower behind its leader's log start: the log starts over, empty, there."""
        try:
            self.log.truncate_fully_and_start_at(log_start_offset)
        except StorageError as exc:
            raise PartitionError.of(exc) from exc

    def truncate_to_leader(self, leader_epoch: int, leader_end_offset: int) -> None:
        """The leader says this log diverges after `leader_end_offset` of `leader_epoch`
        (KIP-101/279): cut it where both agree. Where this log's largest epoch up to
        `leader_epoch` is an older one, it is cut at that epoch's end and the next fetch
        finds out whether that is far enough (Kafka's rule)."""
        epoch, end = self.end_offset_for_epoch(leader_epoch)
        if leader_end_offset < 0:  # the leader knows no end: keep what is committed
            target = self.log.high_watermark
        elif epoch < 0:  # this log knows no epoch that old: keep what the leader keeps
            target = leader_end_offset
        elif epoch == leader_epoch:
            target = min(end, leader_end_offset)
        else:
            target = end
        try:
            if self.log.truncate_to(target):
                log.info("%s-%d: truncated to %d to match the leader (epoch %d ends at %d)",
                         self.topic, self.index, target, leader_epoch, leader_end_offset)
        except StorageError as exc:
            raise PartitionError.of(exc) from exc

    def read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool,
             max_offset: int) -> tuple[FileRegion | None, int]:
        """Returns (file region or None, its length) of whole batches from fetch_offset;
        a segment file that cannot be opened is KAFKA_STORAGE_ERROR."""
        try:
            result = self.log.read(fetch_offset, max_bytes, max_offset=max_offset,
                                   min_one_batch=min_one_batch)
        except (StorageError, OSError) as exc:
            raise self._read_failed(exc) from exc
        if not result.regions:
            return None, 0
        # Like Kafka, one fetch reads from one segment; the consumer continues after it.
        region = result.regions[0]
        return region, region.length

    def read_bytes(self, region: FileRegion) -> bytes:
        """The region's bytes, read now; a file that cannot be read is KAFKA_STORAGE_ERROR."""
        try:
            return region.read_bytes()
        except (StorageError, OSError) as exc:
            raise self._read_failed(exc) from exc

    def _read_failed(self, exc: StorageError | OSError) -> PartitionError:
        error = PartitionError.of(exc)
        if error.code == ErrorCode.KAFKA_STORAGE_ERROR:  # one line: what failed says it all
            log.error("%s-%d: reading failed: %s", self.topic, self.index, exc)
        return error

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """``(offset, timestamp, leader epoch)`` of the first record at or after
        `timestamp` (None: none); a stored batch that does not decode is this partition's
        error."""
        try:
            return self.log.fetch_offset_by_timestamp(timestamp)
        except StorageError as exc:
            raise PartitionError.of(exc) from exc

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` of the largest epoch up to `leader_epoch` (KIP-101)."""
        return self.log.end_offset_for_epoch(leader_epoch)

    @property
    def active_producers(self) -> list[ProducerStateEntry]:
        """The producer state of this replica (DescribeProducers)."""
        return list(self.log.producer_state.producers.values())

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    @property
    def log_dir(self) -> Path:
        """The directory (one of `log.dirs`) the partition's log is in."""
        return self.log.dir.parent

    @property
    def num_segments(self) -> int:
        return self.log.num_segments

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: offset -1 means the high watermark; returns the new log start."""
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE)
        try:
            return self.log.delete_records(target)
        except StorageError as exc:
            raise PartitionError.of(exc) from exc

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
        raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)
