"""The log of one partition: offsets, producers and epochs over a directory of segments.

``Log`` is Kafka's UnifiedLog: it validates appends and assigns their offsets, keeps the
producer state (idempotence), the leader epoch cache, the high watermark, the log start
offset and the recovery point, and decides rolls, retention, DeleteRecords and truncation.
The segments themselves (files, rolls, reads across segments, removal) are its
``ads.storage.local_log.LocalLog``.

Files in the directory: ``<base>.log`` / ``.index`` / ``.timeindex`` / ``.txnindex`` per
segment (``ads.storage.segment``; the ``.txnindex``: ``ads.storage.txn_index``),
``<offset>.snapshot`` producer-state snapshots (``ads.storage.producer_state``) and
``leader-epoch-checkpoint`` (``ads.storage.epoch_cache``).

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``. The recovery
point is the offset below which everything is fsynced and validated; the log manager
checkpoints it, with the log start offset and the high watermark, in its log directory.

Crash rule: on an unclean start the segments past the recovery point are recovered
(``LocalLog.load``), then producer state is rebuilt from the newest snapshot at or below the
recovery point by replaying batch headers. After a clean shutdown (marker file, see
``ads.storage.manager``) nothing is scanned: the log end offset is the one the shutdown
recorded (checked only against the active segment's start and size), and the newest
snapshot holds the producer state at that end (``close`` writes one unless the newest, or
an empty state without any, already holds it).

Transactions: a transactional producer's batches are ordinary batches with the transactional
bit; the producer state (``ads.storage.producer_state``) remembers the first offset of each
producer's open transaction. A transaction ends with a marker, a control batch written by
the transaction coordinator (COMMIT or ABORT, ``records.batch.build_control_batch``),
appended with ``append_marker_batch``.

- The last stable offset (LSO, ``last_stable_offset``) is the first offset of the oldest
  transaction that is open or whose marker is not yet below the high watermark, or the high
  watermark when there is none (and never above it): read_committed consumers read below it
  only. A marker the leader has written but its followers not yet copied may be lost with
  the leader, so a transaction counts as ended only once its marker is committed.
- Each ABORT marker adds an entry (producer id, first offset, marker offset, LSO) to the
  ``.txnindex`` of the segment the marker lands in (``ads.storage.txn_index``); a
  read_committed fetch sends the entries overlapping what it returns
  (``aborted_transactions``).

Crash rule for transactions: the producer-state rebuild above (``_rebuild_producer_state``)
replays batch headers from the snapshot, and ``_on_marker`` re-adds the index entry of every
ABORT marker replayed, reading the marker's control record
(``ads.storage.transactions.control_record``; markers are rare, so the one place a record
is read here costs nothing on the produce and fetch paths). A follower's appends replay
their markers the same way.

Failures: an append is all or nothing. A write that fails (a full disk) is cut off again and
raises ``KafkaStorageError`` with the offsets, producer state and epochs unchanged; later
appends work once space is back. A roll that cannot make its files or snapshot raises the
same, leaving the old active segment. A failed fsync takes the log offline: the batch whose
flush failed is cut off and refused, and every later append, roll or truncation raises
``KafkaStorageError`` until the log is reopened (a restart), whose recovery re-validates
everything after the recovery point; reads go on. ``docs/storage.md`` says why.

Threading: every method runs on the owner thread (the broker's event loop) except ``flush``,
which a worker thread may run while the owner appends and reads; a lock guards the segment
list and the offsets, and ``flush`` holds it only while choosing segments, not while it
fsyncs. Scheduled tasks (flush after a roll, delayed file removal) are thread-safe too.

Log cleaner: ``replace_segments`` and ``finish_replace`` swap compacted segments in
(``ads.storage.local_log``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from ads.common.clock import Clock
from ads.common.files import fsync_dir
from ads.records.batch import (
    BatchHeader,
    ControlRecordType,
    build_control_batch,
    patch_base_offset,
    set_log_append_time,
)
from ads.storage.config import LogConfig
from ads.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from ads.storage.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    TransactionCoordinatorFencedError,
)
from ads.storage.files import BatchInfo, Scheduler, file_names
from ads.storage.loader import prepare_directory
from ads.storage.local_log import LocalLog, ReadResult
from ads.storage.open_files import OpenFiles
from ads.storage.producer_state import ProducerAppendInfo, ProducerStateManager
from ads.storage.replicated import describe_run, segment_groups
from ads.storage.segment import LogSegment
from ads.storage.timestamps import offset_for_timestamp
from ads.storage.transactions import control_record, read_marker
from ads.storage.txn_index import AbortedTxn

__all__ = [
    "Log",
    "LogAppendInfo",
    "OffsetOutOfRangeError",
    "ReadResult",
    "partition_dir_name",
]

logger = logging.getLogger(__name__)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogAppendInfo(NamedTuple):  # a tuple: built on every append, cheaper than a dataclass
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False


class Log:
    """Append, read, roll, truncate and retain the segments of one partition."""

    # Slots: one of each per partition or segment, a hundred thousand of them in a broker.
    __slots__ = ("_clock", "_closed", "_high_watermark", "_local", "_lock", "_log_end_offset",
                 "_offline_reason", "_scheduler", "config", "epoch_cache", "last_flush_ms",
                 "log_start_offset", "partition", "producer_state", "recovery_point", "topic")

    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig,
                 clock: Clock, scheduler: Scheduler | None, files: OpenFiles | None = None
                 ) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock = clock
        self._scheduler = scheduler
        self._local = LocalLog(directory, config, clock, scheduler,
                               OpenFiles() if files is None else files)
        self._log_end_offset = 0
        self.log_start_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        self.last_flush_ms = clock.time_ms()
        self._lock = threading.RLock()
        self._closed = False
        self._offline_reason: str | None = None  # set by a failed fsync
        self.epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.producer_state = ProducerStateManager(directory)

    # ------------------------------------------------------------------------------ loading

    @classmethod
    def open(  # noqa: PLR0913 - the state to open in and the services, by keyword
            cls, directory: Path, topic: str, partition: int, config: LogConfig, *,
            clock: Clock, recovery_point: int, log_start_offset: int, clean_shutdown: bool,
            scheduler: Scheduler | None = None, high_watermark: int | None = None,
            files: OpenFiles | None = None, log_end_offset: int | None = None,
            durable: bool = True) -> Log:
        """Open (creating if needed) the partition directory and bring it to a valid state.

        ``files`` is the broker's bound on open segment files, with the file layer every
        segment writes through (``ads.storage.open_files``); without it the log has its own.
        ``log_end_offset``, after a clean shutdown, is where the log ended then (the log
        manager's recovery-point checkpoint, which a clean shutdown writes once every log
        is on disk): trusted, so that no segment file is read; without it the active
        segment's tail is scanned for it. ``durable=False`` (after an unclean shutdown)
        leaves out the fsyncs of recovered segments and of the rebuilt producer snapshot,
        and the recovery point where it was: the caller syncs the whole file system once
        and then moves it (``mark_flushed``)."""
        try:
            names = file_names(directory)
        except FileNotFoundError:
            directory.mkdir(parents=True, exist_ok=True)
            names = []
        names = prepare_directory(directory, names)
        log = cls(directory, topic, partition, config, clock, scheduler, files)
        local = log._local
        recovered = local.load(names, recovery_point, clean_shutdown, log_start_offset,
                               log.epoch_cache, durable)
        log._log_end_offset = log._end_of_active(log_end_offset if clean_shutdown else None)
        # What the clean shutdown recorded holds: its producer snapshot may be trusted too.
        trusted = clean_shutdown and log._log_end_offset == log_end_offset
        log.log_start_offset = max(log_start_offset, local.bases[0])
        if log.log_start_offset > log._log_end_offset:
            log._truncate_fully_and_start_at(log.log_start_offset)
        # Recovered segments were validated, and fsynced when durable: the whole log is then
        # recovered. Otherwise the caller moves the recovery point once its sync is done.
        log.recovery_point = (log._log_end_offset if clean_shutdown or (recovered and durable)
                              else min(recovery_point, log._log_end_offset))
        log.epoch_cache.truncate_from_end(log._log_end_offset)
        log.epoch_cache.truncate_from_start(log.log_start_offset)
        if not clean_shutdown:
            log.producer_state.delete_snapshots_after(recovery_point)
        log._rebuild_producer_state(durable, trust_snapshot=trusted)
        log.high_watermark = log.log_start_offset if high_watermark is None else high_watermark
        return log

    def _end_of_active(self, recorded: int | None) -> int:
        """The log end offset: ``recorded`` if the active segment agrees with it (it starts
        at or below it, and holds batches exactly when it ends above its start), else
        read from the segment's tail."""
        active = self._local.active
        if recorded is not None:
            if active.base_offset <= recorded and (active.size > 0) == (
                    recorded > active.base_offset):
                return recorded
            logger.warning("%s: the recorded log end offset %d does not fit the active "
                           "segment %r; reading it from the segment", self.dir, recorded, active)
        return active.next_offset()

    def _rebuild_producer_state(self, durable: bool = True, trust_snapshot: bool = False
                                ) -> None:
        self.producer_state.rebuild(self.log_start_offset, self._log_end_offset,
                                    self._local.iter_headers, self._on_marker, durable=durable,
                                    trust_snapshot=trust_snapshot)

    # ----------------------------------------------------------------------------- offsets

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = hw = min(max(offset, self.log_start_offset), self._log_end_offset)
        # Transactions whose markers are now committed no longer hold the last stable offset
        # back; forgotten here, or a follower (never asked for it) would keep them all.
        self.producer_state.forget_replicated(hw)

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.epoch_cache.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch; ``(-1, -1)`` if unknown."""
        return self.epoch_cache.end_offset_for_epoch(epoch, self._log_end_offset)

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self.recovery_point

    @property
    def dir(self) -> Path:
        return self._local.dir

    @property
    def open_files(self) -> OpenFiles:
        return self._local.files

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

    @property
    def num_segments(self) -> int:
        return len(self._local.segments)

    @property
    def segments(self) -> Sequence[LogSegment]:
        return tuple(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self._local.update_config(config)

    @property
    def offline(self) -> bool:
        """True after a failed fsync: appends are refused until the log is reopened."""
        return self._offline_reason is not None

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir} is closed")
        if self._offline_reason is not None:
            raise KafkaStorageError(f"log {self.dir} is offline: {self._offline_reason}")

    def _take_offline(self, reason: str) -> None:
        if self._offline_reason is None:
            self._offline_reason = reason
            logger.error("%s: %s; the log refuses appends until it is reopened", self.dir, reason)

    # ------------------------------------------------------------------------------ append

    def append(self, records: bytes | bytearray | memoryview,
               headers: Sequence[tuple[int, BatchHeader]], *, leader_epoch: int, now_ms: int,
               log_append_time: bool) -> LogAppendInfo:
        """Append validated batches as leader; ``headers`` come from ``validate_batches``.

        Assigns offsets from the log end offset, checks idempotent producers (a retried
        batch is answered with its original offsets and nothing is written), rolls the
        segment if needed, writes once, and fsyncs when ``flush.messages`` is reached.
        All or nothing: ``KafkaStorageError`` (a full disk, a failed fsync) leaves the log
        as it was before the call (see the module docstring).
        """
        if not headers:
            return LogAppendInfo(-1, -1, -1, self.log_start_offset)
        last_pos, last_header = headers[-1]
        end = last_pos + last_header.size
        if end > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{end} bytes of batches exceed segment.bytes {self.config.segment_bytes}")
        with self._lock:
            self._check_open()
            first_offset = next_offset = self._log_end_offset
            producer_info: ProducerAppendInfo | None = None
            batches: list[BatchInfo] = []
            max_timestamp, offset_of_max = -1, first_offset
            for pos, header in headers:
                last = next_offset + header.last_offset_delta
                ts = now_ms if log_append_time else header.max_timestamp
                if header.has_producer_id:
                    if producer_info is None:
                        producer_info = self.producer_state.begin_append()
                    duplicate = producer_info.check(header)
                    if duplicate is not None:
                        return LogAppendInfo(
                            duplicate.first_offset, duplicate.last_offset,
                            duplicate.max_timestamp if log_append_time else -1,
                            self.log_start_offset, duplicate=True)
                    producer_info.append(header, next_offset, last, ts if ts >= 0 else now_ms)
                batches.append((pos, header.size, next_offset, last, ts))
                if ts > max_timestamp:
                    max_timestamp, offset_of_max = ts, next_offset
                next_offset = last + 1
            # A writable buffer (a produce request received into a buffer of its own) is
            # patched in place, so its bytes are copied once, into the page cache.
            view = memoryview(records)[:end]
            buf = view if not view.readonly else bytearray(view)
            for pos, _, base, _, _ in batches:
                patch_base_offset(buf, pos, base, leader_epoch)
                if log_append_time:
                    set_log_append_time(buf, pos, now_ms)
            self._write(buf, batches, [(leader_epoch, first_offset)], producer_info, now_ms,
                        max_timestamp, offset_of_max)
        return LogAppendInfo(first_offset, next_offset - 1, now_ms if log_append_time else -1,
                             self.log_start_offset)

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, headers: Sequence[tuple[int, BatchHeader]]
    ) -> int:
        """Append batches replicated from the leader as they are: their offsets, leader
        epochs and bytes unchanged. The first must start at the log end offset; a new
        leader epoch in a batch enters the epoch cache, producers' state (idempotence, open
        transactions, aborted ones' ``.txnindex`` entries) follows the batches without checks
        (the leader made them). Returns the log end offset."""
        if not headers:
            return self._log_end_offset
        with self._lock:
            self._check_open()
            if headers[0][1].base_offset != self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"{self.dir}: replicated batches start at {headers[0][1].base_offset}, "
                    f"not at the log end offset {self._log_end_offset}")
            view = memoryview(records)
            for group in segment_groups(headers, self.config.segment_bytes):
                run = describe_run(group, self.epoch_cache.latest_epoch)
                self._write(view[run.start:run.end], run.batches, run.epochs, None,
                            self._clock.time_ms(), run.max_timestamp, run.offset_of_max_timestamp)
                # Written first: an ABORT marker's .txnindex entry reads its control record.
                self.producer_state.replay_all((h for _, h in group), self._on_marker)
            return self._log_end_offset

    def _write(self, data: bytes | bytearray | memoryview, batches: list[BatchInfo],
               epochs: list[tuple[int, int]], producer_info: ProducerAppendInfo | None,
               now_ms: int, max_timestamp: int, offset_of_max: int) -> None:
        """Roll if needed, record the epochs, write the batches, move the log end offset."""
        first_offset, next_offset = batches[0][2], batches[-1][3] + 1
        segment = self._maybe_roll(len(data), max_timestamp, next_offset - 1, now_ms)
        # Before the write: an epoch entry at the log end offset with no batch after it
        # (the write then fails) is harmless, a batch without its epoch entry is not.
        try:
            for epoch, start_offset in epochs:
                self.epoch_cache.assign(epoch, start_offset)
        except OSError as exc:
            raise KafkaStorageError(f"{self.dir}: cannot write leader epochs: {exc}") from exc
        try:
            segment.append(data, first_offset, next_offset - 1, max_timestamp, offset_of_max,
                           batches)
        except KafkaStorageError:
            if segment.damaged:
                self._take_offline(f"a failed append could not be undone in {segment!r}")
            raise
        self._log_end_offset = next_offset
        if next_offset - self.recovery_point >= self.config.flush_messages:
            self._flush_appended(segment, first_offset, next_offset)
        if producer_info is not None:
            self.producer_state.commit(producer_info, next_offset)
        else:
            self.producer_state.map_end_offset = next_offset

    def _flush_appended(self, segment: LogSegment, first_offset: int, next_offset: int) -> None:
        """``flush.messages`` reached: fsync up to ``next_offset`` before acknowledging.

        On failure the new batches are cut off again (the producer is told they failed, so
        neither a reader nor a restart may see them) and the log goes offline."""
        try:
            self._flush_to(next_offset)
        except KafkaStorageError:
            self._log_end_offset = first_offset
            try:
                segment.truncate_to(first_offset)
            except OSError:
                logger.exception("%s: cannot cut off batches whose fsync failed", self.dir)
            raise

    def _maybe_roll(
        self, size: int, max_timestamp: int, max_offset: int, now_ms: int
    ) -> LogSegment:
        segment = self._local.segments[-1]
        if segment.should_roll(size, max_timestamp, max_offset, now_ms):
            return self._roll()
        return segment

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active is empty)."""
        with self._lock:
            self._check_open()
            return self._roll()

    def _roll(self) -> LogSegment:
        """Roll at the log end offset; ``KafkaStorageError`` leaves the old active segment."""
        new_base = self._log_end_offset
        try:
            if self._local.active.size == 0:
                # An empty segment left behind by truncation: recreate it at the log end.
                return self._local.roll(new_base)
            self.producer_state.map_end_offset = new_base
            self.producer_state.take_snapshot()
            segment = self._local.roll(new_base)
        except OSError as exc:
            raise KafkaStorageError(f"{self.dir}: cannot roll at {new_base}: {exc}") from exc
        if self._scheduler is not None:
            self._scheduler(0, lambda: self.flush(new_base))
        else:
            self.flush(new_base)
        return segment

    # -------------------------------------------------------------------------------- read

    def read(
        self, fetch_offset: int, max_bytes: int, *, max_offset: int, min_one_batch: bool
    ) -> ReadResult:
        """File regions of whole batches from the one holding ``fetch_offset``.

        At most ``max_bytes`` (except one whole first batch with ``min_one_batch``, KIP-74),
        possibly spanning segments, and only batches wholly below ``max_offset`` (the high
        watermark for consumers). Raises ``OffsetOutOfRangeError`` outside
        [log start offset, log end offset]; at the log end offset the result is empty.
        """
        leo = self._log_end_offset
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{self.log_start_offset}, {leo}] of {self.dir}"
            )
        return self._local.read(fetch_offset, max_bytes, min(max_offset, leo), leo, min_one_batch)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """``(offset, timestamp, leader_epoch)`` for ListOffsets (``ads.storage.timestamps``)."""
        with self._lock:
            return offset_for_timestamp(self._local.segments, timestamp, self.log_start_offset,
                                        self._log_end_offset, self.epoch_cache,
                                        self.config.max_inflated_bytes)

    # ------------------------------------------------------------------------ transactions

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest transaction that is open or whose marker is not
        yet below the high watermark; the high watermark when there is none."""
        hw = self._high_watermark
        first_unstable = self.producer_state.first_unstable_below(hw)
        return hw if first_unstable is None else min(first_unstable, hw)

    def append_marker(self, commit: bool, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        """Writes a COMMIT or ABORT marker for the producer's transaction
        (`append_marker_batch`)."""
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        batch = build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch,
                                    timestamp=now_ms)
        return self.append_marker_batch(batch, leader_epoch, now_ms)

    def append_marker_batch(self, batch: bytes | bytearray | memoryview, leader_epoch: int,
                            now_ms: int) -> LogAppendInfo:
        """Writes a marker batch (`records.batch.build_control_batch`) that ends its
        producer's transaction; an ABORT closing an open transaction gets its ``.txnindex``
        entry. Raises ``InvalidRecordError`` for a batch that is not one marker, the log's
        errors (an older producer epoch: ``InvalidProducerEpochError``) and, for a
        coordinator epoch older than the producer's last marker's,
        ``TransactionCoordinatorFencedError``."""
        header, kind, coordinator_epoch = read_marker(batch)
        producer_id = header.producer_id
        entry = self.producer_state.last_entry(producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            # A deposed coordinator still sending: the newer one decides this transaction.
            raise TransactionCoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}")
        first = None if entry is None else entry.current_txn_first_offset
        info = self.append(batch, [(0, header)], leader_epoch=leader_epoch, now_ms=now_ms,
                           log_append_time=False)
        updated = self.producer_state.last_entry(producer_id)
        if updated is not None:  # kept in the producer-state snapshots
            updated.coordinator_epoch = coordinator_epoch
        if kind == ControlRecordType.ABORT and first is not None:
            self._add_aborted(producer_id, first, info.first_offset)
        return info

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_offset), oldest first.

        A transaction begun below ``upper_offset`` may end in a later segment, so the indexes
        are read on until an entry's LSO reaches ``upper_offset`` (every transaction begun
        below it had ended by then), as Kafka does."""
        local = self._local
        out: list[AbortedTxn] = []
        for segment in local.segments[local.index_of(fetch_offset):]:
            out.extend(segment.txn_index.collect(fetch_offset, upper_offset))
            if segment.txn_index.stable_past(upper_offset):
                break
        return out

    def _on_marker(self, header: BatchHeader, first_offset: int | None) -> None:
        """What the producer-state replay calls for each marker with the first offset of the
        transaction it closes: re-adds the ``.txnindex`` entry of an ABORT and restores the
        producer's coordinator epoch."""
        kind, coordinator_epoch = control_record(self._segment_of(header.base_offset), header)
        entry = self.producer_state.last_entry(header.producer_id)
        if entry is not None and coordinator_epoch > entry.coordinator_epoch:
            entry.coordinator_epoch = coordinator_epoch
        if first_offset is not None and kind == ControlRecordType.ABORT:
            self._add_aborted(header.producer_id, first_offset, header.base_offset)

    def _add_aborted(self, producer_id: int, first_offset: int, marker_offset: int) -> None:
        # The entry's LSO: where the partition is stable once this transaction is gone (the
        # producer state no longer counts it), whatever the high watermark is yet.
        first_unstable = self.producer_state.first_unstable_offset(excluding=producer_id)
        end = marker_offset + 1
        lso = end if first_unstable is None else min(first_unstable, end)
        self._segment_of(marker_offset).txn_index.append(
            AbortedTxn(producer_id, first_offset, marker_offset, lso))

    def _segment_of(self, offset: int) -> LogSegment:
        return self._local.segments[self._local.index_of(offset)]

    # ------------------------------------------------------------------- deletion, retention

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move the log start offset to ``before_offset`` (-1: the high
        watermark) and delete the segments wholly below it. Returns the log start offset."""
        with self._lock:
            self._check_open()
            if before_offset == -1:
                before_offset = self._high_watermark
            if before_offset < 0 or before_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {before_offset}: high watermark is "
                    f"{self._high_watermark}"
                )
            if before_offset > self.log_start_offset:
                self._increment_log_start_offset(before_offset)
                self._delete_old_segments(lambda seg, next_base: next_base <= before_offset)
            return self.log_start_offset

    def _increment_log_start_offset(self, offset: int) -> None:
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        self.producer_state.truncate_head(offset)

    def _delete_old_segments(self, predicate: Callable[[LogSegment, int], bool]) -> int:
        """Delete the oldest segments while ``predicate`` holds, never the active one and
        never one with offsets at or above the high watermark."""
        doomed = self._local.deletable(predicate, self._high_watermark)
        if not doomed:
            return 0
        self._local.delete_oldest(doomed)
        first_base = self._local.bases[0]
        if first_base > self.log_start_offset:
            self._increment_log_start_offset(first_base)
        self.producer_state.delete_snapshots_before(first_base)
        logger.info(
            "%s: deleted %d segments, log start offset %d", self.dir, doomed, self.log_start_offset
        )
        return doomed

    def enforce_retention(self, now_ms: int) -> int:
        """Delete segments past retention.ms / retention.bytes; returns how many."""
        with self._lock:
            self._check_open()
            deleted = self._delete_old_segments(
                lambda seg, next_base: next_base <= self.log_start_offset
            )
            if not self.config.delete_enabled:
                return deleted
            retention_ms = self.config.retention_ms
            if retention_ms >= 0:
                deleted += self._delete_old_segments(
                    lambda seg, _: now_ms - seg.largest_timestamp > retention_ms
                )
            if self.config.retention_bytes >= 0:
                excess = self.size_bytes - self.config.retention_bytes

                def over_size(seg: LogSegment, _: int) -> bool:
                    nonlocal excess
                    if excess - seg.size < 0:
                        return False
                    excess -= seg.size
                    return True

                deleted += self._delete_old_segments(over_size)
            return deleted

    # ---------------------------------------------------------------------------- truncate

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or after ``offset`` (replication); True if anything went."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to {offset}")
            if offset >= self._log_end_offset:
                # No batch goes, but an epoch begun at the end (a leader's that wrote
                # nothing) does: a follower's last fetched epoch must be one with batches.
                self.epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            if offset < self._local.bases[0]:
                self._truncate_fully_and_start_at(offset)
                return True
            self._log_end_offset = self._local.truncate_to(offset)
            self._after_truncation()
            return True

    def _after_truncation(self) -> None:
        end = self._log_end_offset
        self.epoch_cache.truncate_from_end(end)
        self._high_watermark = min(self._high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self.producer_state.delete_snapshots_after(end)
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self._check_open()
            self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self._local.truncate_fully_and_start_at(offset)
        self._log_end_offset = self.log_start_offset = offset
        self._high_watermark = self.recovery_point = offset
        self.epoch_cache.clear()
        self.producer_state.delete_snapshots_after(-1)
        self.producer_state.clear(offset)
        self.producer_state.truncate_head(offset)

    # -------------------------------------------------------------------- flush and closing

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default: the log end offset) and move the
        recovery point there. Safe to call from a worker thread while the owner appends.

        A failed fsync takes the log offline and raises ``KafkaStorageError``: after one the
        kernel may have dropped dirty pages, so nothing unflushed is known to be on disk."""
        with self._lock:
            end = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        self._flush_to(end)

    def _flush_to(self, end: int) -> None:
        with self._lock:
            if self._closed or self._offline_reason is not None:
                return
            start = self.recovery_point
            if end <= start:
                return
            chosen = self._local.segments_to_flush(start, end)
        try:
            for segment in chosen:
                segment.flush()
        except OSError as exc:
            with self._lock:
                self._take_offline(f"fsync failed: {exc}")
            raise KafkaStorageError(f"{self.dir}: fsync failed: {exc}") from exc
        with self._lock:
            if end > self.recovery_point:
                self.recovery_point = min(end, self._log_end_offset)
                self.last_flush_ms = self._clock.time_ms()

    def close(self, durable: bool = True) -> None:
        """Snapshot the producer state and close the files (no flush: the manager does).
        ``durable=False``: the snapshot is not fsynced either (the manager syncs the whole
        file system afterwards)."""
        with self._lock:
            if self._closed:
                return
            try:
                # Unless the newest snapshot holds this state: after a clean shutdown the
                # next start takes the newest one for the state at the log end.
                self.producer_state.take_snapshot(durable=durable, unless_unchanged=True)
            finally:
                self._closed = True
                self._local.close()

    def mark_flushed(self, offset: int) -> None:
        """Move the recovery point to ``offset`` (at most the log end offset) after the
        caller made everything of the log below it durable another way: one ``syncfs``
        of the file system for every log of a directory (the log manager, at shutdown and
        after recovery). An offline log keeps its recovery point."""
        with self._lock:
            if self._offline_reason is None and offset > self.recovery_point:
                self.recovery_point = min(offset, self._log_end_offset)
                self.last_flush_ms = self._clock.time_ms()

    @property
    def closed(self) -> bool:
        return self._closed

    # -------------------------------------------------------------------------- log cleaner

    def replace_segments(
        self, new: LogSegment, old: Sequence[LogSegment], old_sizes: Sequence[int]
    ) -> bool:
        """Swap the cleaner's ``new`` segment in for ``old`` (``LocalLog.replace``); owner
        thread only. False (and ``new`` deleted) if the log is closed or ``old`` changed."""
        with self._lock:
            if self._closed:
                new.delete(None)
                return False
            return self._local.replace(new, old, old_sizes)

    def finish_replace(self, new: LogSegment, old: Sequence[LogSegment]) -> None:
        """Second half of ``replace_segments``; any thread.

        The ``.swap`` rename is made durable first, then ``old``'s files become ``.deleted``
        (removed after ``file.delete.delay.ms``) and ``new``'s take the live names. If the log
        was closed, moved or truncated past ``new`` meanwhile, ``old`` is only closed: the
        ``.swap`` file left behind is finished by the next load, or goes with its directory.
        """
        directory = new.log_path.parent
        fsync_dir(directory)
        with self._lock:
            if self._closed or self.dir != directory:
                for segment in old:
                    segment.close()
                return
            self._local.finish_replace(new, old)
        fsync_dir(directory)

    def rename_dir(self, directory: Path) -> None:
        """Move the partition directory (files stay open and readable)."""
        with self._lock:
            self._local.rename_dir(directory)
            self.producer_state.directory = str(directory)
            self.epoch_cache.rename_dir(directory)

    def delete(self) -> None:
        """Close the log and remove its directory (DeleteTopics)."""
        with self._lock:
            self._closed = True
            self._local.delete()
