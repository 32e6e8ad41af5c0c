"""The log of one partition: a directory ``<topic>-<partition>`` of segments.

Files in the directory: ``<base>.log`` / ``.index`` / ``.timeindex`` per segment
(``ads.storage.segment``), ``<offset>.snapshot`` producer-state snapshots
(``ads.storage.producer_state``) and ``leader-epoch-checkpoint`` (``ads.storage.epoch_cache``).

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``. The recovery
point is the offset below which everything is fsynced and validated; the log manager
checkpoints it, with the log start offset and the high watermark, in its log directory.

Crash rule: on an unclean start every segment from the one holding the recovery point on is
``recover``-ed (CRC-checked, torn tail truncated, indexes rebuilt); the first segment that
loses bytes also loses every later segment, since offsets must stay contiguous. Producer
state is then rebuilt from the newest snapshot at or below the recovery point by replaying
batch headers. After a clean shutdown (marker file, see ``ads.storage.manager``) nothing is
scanned: the snapshot taken at close covers the whole log.

Threading: every method runs on the owner thread (the broker's event loop) except ``flush``,
which a worker thread may run while the owner appends and reads; a lock guards the segment
list and the offsets, and ``flush`` holds it only while choosing segments, not while it
fsyncs. Scheduled tasks (flush after a roll, delayed file removal) are thread-safe too.

Log cleaner: a cleaner thread writes a compacted copy of some segments as ``.cleaned`` files,
then swaps it in with ``replace_segments`` (owner thread, since reads walk the segment list
without the lock) and ``finish_replace`` (any thread). The crash states of a swap and how
loading resolves them are in ``ads.storage.loader``.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ads.common.clock import Clock
from ads.common.files import fsync_dir
from ads.records.batch import BatchHeader, patch_base_offset, set_log_append_time
from ads.storage.config import LogConfig
from ads.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from ads.storage.errors import KafkaStorageError, OffsetOutOfRangeError, RecordBatchTooLargeError
from ads.storage.files import CLEANED_SUFFIX, SWAP_SUFFIX, BatchInfo, FileRegion, Scheduler
from ads.storage.loader import (
    prepare_directory,
    recover_segments,
    segment_base_offsets,
)
from ads.storage.producer_state import ProducerAppendInfo, ProducerStateManager
from ads.storage.segment import LogSegment
from ads.storage.timestamps import offset_for_timestamp

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


@dataclass(frozen=True, slots=True)
class ReadResult:
    regions: list[FileRegion]
    first_offset: int | None  # base offset of the first batch returned

    @property
    def size(self) -> int:
        return sum(r.length for r in self.regions)

    def read_bytes(self) -> bytes:
        return b"".join(r.read_bytes() for r in self.regions)


class Log:
    """Append, read, roll, truncate and retain the segments of one partition."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        scheduler: Scheduler | None,
    ) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock = clock
        self._scheduler = scheduler
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_end_offset = 0
        self.log_start_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        self.last_flush_ms = clock.time_ms()
        self._lock = threading.RLock()
        self._closed = False
        self.epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.producer_state = ProducerStateManager(directory)

    # ------------------------------------------------------------------------------ loading

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        clock: Clock,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        scheduler: Scheduler | None = None,
        high_watermark: int | None = None,
    ) -> Log:
        """Open (creating if needed) the partition directory and bring it to a valid state."""
        directory.mkdir(parents=True, exist_ok=True)
        prepare_directory(directory)
        log = cls(directory, topic, partition, config, clock, scheduler)
        for base in segment_base_offsets(directory):
            log._add_segment(LogSegment.open(directory, base, config, clock))
        recovered = not clean_shutdown and bool(log._segments)
        if recovered:
            log._recover_from(recovery_point)
        if not log._segments:
            log._add_segment(LogSegment.create(directory, log_start_offset, config, clock))
        log._log_end_offset = log._segments[-1].next_offset()
        log.log_start_offset = max(log_start_offset, log._segments[0].base_offset)
        if log.log_start_offset > log._log_end_offset:
            log._truncate_fully_and_start_at(log.log_start_offset)
        # Recovered segments were validated and fsynced, so the whole log is now recovered.
        log.recovery_point = (
            log._log_end_offset
            if clean_shutdown or recovered
            else min(recovery_point, log._log_end_offset)
        )
        log.epoch_cache.truncate_from_end(log._log_end_offset)
        log.epoch_cache.truncate_from_start(log.log_start_offset)
        if not clean_shutdown:
            log.producer_state.delete_snapshots_after(recovery_point)
        log._rebuild_producer_state()
        log.high_watermark = log.log_start_offset if high_watermark is None else high_watermark
        return log

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _recover_from(self, recovery_point: int) -> None:
        kept = recover_segments(
            self._segments,
            recovery_point,
            max(self.config.max_message_bytes, self.config.segment_bytes),
            self.epoch_cache,
        )
        del self._segments[len(kept) :], self._bases[len(kept) :]

    def _rebuild_producer_state(self) -> None:
        state = self.producer_state
        replay_from = state.truncate_and_reload(self.log_start_offset, self._log_end_offset)
        if replay_from >= self._log_end_offset:
            return
        first = max(bisect.bisect_right(self._bases, replay_from) - 1, 0)
        for segment in self._segments[first:]:
            for header in segment.iter_headers(replay_from):
                if header.has_producer_id:
                    state.replay(header)
        state.map_end_offset = self._log_end_offset
        state.truncate_head(self.log_start_offset)
        state.take_snapshot()

    # ----------------------------------------------------------------------------- offsets

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self.log_start_offset), self._log_end_offset)

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
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> Sequence[LogSegment]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for segment in self._segments:
                segment.config = config

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir} is closed")

    # ------------------------------------------------------------------------------ append

    def append(
        self,
        records: bytes | bytearray | memoryview,
        headers: Sequence[tuple[int, BatchHeader]],
        *,
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool,
    ) -> LogAppendInfo:
        """Append validated batches as leader; ``headers`` come from ``validate_batches``.

        Assigns offsets from the log end offset, checks idempotent producers (a retried
        batch is answered with its original offsets and nothing is written), rolls the
        segment if needed, writes once, and fsyncs when ``flush.messages`` is reached.
        """
        if not headers:
            return LogAppendInfo(-1, -1, -1, self.log_start_offset)
        last_pos, last_header = headers[-1]
        end = last_pos + last_header.size
        if end > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{end} bytes of batches exceed segment.bytes {self.config.segment_bytes}"
            )
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
                            duplicate.first_offset,
                            duplicate.last_offset,
                            duplicate.max_timestamp if log_append_time else -1,
                            self.log_start_offset,
                            duplicate=True,
                        )
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
            segment = self._maybe_roll(end, max_timestamp, next_offset - 1, now_ms)
            segment.append(
                buf, first_offset, next_offset - 1, max_timestamp, offset_of_max, batches
            )
            self._log_end_offset = next_offset
            self.epoch_cache.assign(leader_epoch, first_offset)
            if producer_info is not None:
                self.producer_state.commit(producer_info, next_offset)
            else:
                self.producer_state.map_end_offset = next_offset
            if self._log_end_offset - self.recovery_point >= self.config.flush_messages:
                self.flush()
        return LogAppendInfo(
            first_offset, next_offset - 1, now_ms if log_append_time else -1, self.log_start_offset
        )

    def _maybe_roll(
        self, size: int, max_timestamp: int, max_offset: int, now_ms: int
    ) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(size, max_timestamp, max_offset, now_ms):
            return self._roll()
        return segment

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active is empty)."""
        with self._lock:
            self._check_open()
            return self._roll()

    def _roll(self) -> LogSegment:
        active = self._segments[-1]
        new_base = self._log_end_offset
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            # An empty segment left behind by truncation: recreate it at the log end.
            self._segments.pop()
            self._bases.pop()
            active.delete(None)
            segment = LogSegment.create(self.dir, new_base, self.config, self._clock)
            self._add_segment(segment)
            return segment
        self.producer_state.map_end_offset = new_base
        self.producer_state.take_snapshot()
        active.on_become_inactive()
        segment = LogSegment.create(self.dir, new_base, self.config, self._clock)
        self._add_segment(segment)
        logger.debug("%s: rolled new segment at offset %d", self.dir, new_base)
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
        limit = min(max_offset, leo)
        regions: list[FileRegion] = []
        first_offset: int | None = None
        remaining, offset = max_bytes, fetch_offset
        i = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        segments, bases = self._segments, self._bases
        while offset < limit and i < len(segments):
            segment = segments[i]
            next_base = bases[i + 1] if i + 1 < len(bases) else leo
            max_position = None
            if limit < next_base:
                found = segment.locate(limit)
                max_position = segment.size if found is None else found[0]
            result = segment.read_with_base(
                offset, remaining, max_position, min_one_batch and not regions
            )
            if result is not None:
                region, base = result
                if region.length == 0:
                    break
                regions.append(region)
                if first_offset is None:
                    first_offset = base
                remaining -= region.length
                stop = segment.size if max_position is None else max_position
                if remaining <= 0 or region.offset + region.length < stop:
                    break
            offset, i = next_base, i + 1
        return ReadResult(regions, first_offset)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """``(offset, timestamp, leader_epoch)`` for ListOffsets (``ads.storage.timestamps``)."""
        with self._lock:
            return offset_for_timestamp(self._segments, timestamp, self.log_start_offset,
                                        self._log_end_offset, self.epoch_cache)

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
        doomed = 0
        while doomed + 1 < len(self._segments):
            segment, next_base = self._segments[doomed], self._bases[doomed + 1]
            if next_base > self._high_watermark or not predicate(segment, next_base):
                break
            doomed += 1
        if not doomed:
            return 0
        removed = self._segments[:doomed]
        del self._segments[:doomed], self._bases[:doomed]
        if self._bases[0] > self.log_start_offset:
            self._increment_log_start_offset(self._bases[0])
        for segment in removed:
            segment.delete(self._scheduler)
        self.producer_state.delete_snapshots_before(self._bases[0])
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
                return False
            if offset < self._bases[0]:
                self._truncate_fully_and_start_at(offset)
                return True
            keep = bisect.bisect_right(self._bases, offset)
            doomed = self._segments[keep:]
            del self._segments[keep:], self._bases[keep:]
            for segment in doomed:
                segment.delete(self._scheduler)
            new_end = offset
            cut = self._segments[-1].truncate_to(offset)
            if cut is not None:
                new_end = min(offset, cut[1])
            self._log_end_offset = new_end
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
        doomed = self._segments
        self._segments, self._bases = [], []
        for segment in doomed:
            segment.delete(self._scheduler)
        self._add_segment(LogSegment.create(self.dir, offset, self.config, self._clock))
        self._log_end_offset = self.log_start_offset = offset
        self._high_watermark = self.recovery_point = offset
        self.epoch_cache.clear()
        self.producer_state.delete_snapshots_after(-1)
        self.producer_state.clear(offset)
        self.producer_state.truncate_head(offset)

    # -------------------------------------------------------------------- flush and closing

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default: the log end offset) and move the
        recovery point there. Safe to call from a worker thread while the owner appends."""
        with self._lock:
            if self._closed:
                return
            end = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
            start = self.recovery_point
            if end <= start:
                return
            first = max(bisect.bisect_right(self._bases, start) - 1, 0)
            last = bisect.bisect_left(self._bases, end)
            chosen = self._segments[first : max(last, first + 1)]
        for segment in chosen:
            segment.flush()
        with self._lock:
            if end > self.recovery_point:
                self.recovery_point = min(end, self._log_end_offset)
                self.last_flush_ms = self._clock.time_ms()

    def close(self) -> None:
        """Snapshot the producer state and close the files (no flush: the manager does)."""
        with self._lock:
            if self._closed:
                return
            try:
                self.producer_state.take_snapshot()
            finally:
                self._closed = True
                for segment in self._segments:
                    segment.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -------------------------------------------------------------------------- log cleaner

    def replace_segments(
        self, new: LogSegment, old: Sequence[LogSegment], old_sizes: Sequence[int]
    ) -> bool:
        """Put the cleaner's ``new`` segment (files ``.cleaned``, fsynced) in place of ``old``.

        Owner thread only. ``old`` must still be a run of consecutive segments of this log,
        none of them active, with the sizes ``old_sizes`` the cleaner read (retention,
        truncation or a topic deletion may have got there first); otherwise ``new`` is
        deleted and the result is False. On success ``new``'s files are renamed ``.swap`` and
        it replaces ``old`` in the segment list, so reads see it at once; ``finish_replace``
        completes the swap on disk.
        """
        with self._lock:
            segments = self._segments
            first = next((i for i, s in enumerate(segments) if old and s is old[0]), -1)
            current = segments[first : first + len(old)] if first >= 0 else []
            unchanged = (
                len(current) == len(old) == len(old_sizes)
                and all(a is b and a.size == size
                        for a, b, size in zip(current, old, old_sizes, strict=True))
            )
            if (
                self._closed
                or not unchanged
                or first + len(old) >= len(segments)
                or new.base_offset != old[0].base_offset
                or new.log_path.parent != self.dir
            ):
                new.delete(None)
                return False
            new.change_file_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            kept = segments[:first] + [new] + segments[first + len(old) :]
            self._segments, self._bases = kept, [s.base_offset for s in kept]
            return True

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
            for segment in old:
                segment.delete(self._scheduler)
            if any(s is new for s in self._segments):
                new.change_file_suffix(SWAP_SUFFIX, "")
        fsync_dir(directory)

    def rename_dir(self, directory: Path) -> None:
        """Move the partition directory (files stay open and readable)."""
        with self._lock:
            self.dir.rename(directory)
            self.dir = directory
            for segment in self._segments:
                segment.rename_dir(directory)
            self.producer_state.directory = directory
            self.epoch_cache.rename_dir(directory)

    def delete(self) -> None:
        """Close the log and remove its directory (DeleteTopics)."""
        with self._lock:
            self._closed = True
            for segment in self._segments:
                segment.close()
            shutil.rmtree(self.dir, ignore_errors=True)
