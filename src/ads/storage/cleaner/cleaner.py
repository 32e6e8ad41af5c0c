"""One cleaning pass over one log (Kafka's ``Cleaner``): map the dirty head, rewrite the tail.

A pass works on a ``LogToClean``, a plan taken on the log's owner thread (``plan_cleaning``):

- the **dirty section** is [first dirty offset, first uncleanable offset). The first dirty
  offset comes from ``cleaner-offset-checkpoint``; the first uncleanable offset is the lowest
  of the active segment's base offset, the high watermark, the first offset of an open
  transaction, and the base offset of the first segment holding a record younger than
  ``min.compaction.lag.ms``, so the head a consumer is reading, and every young record, are
  never touched;
- the **cleanable ratio** is dirty bytes / (clean + dirty bytes), counted in whole segments.

Then, on a cleaner thread:

1. Build the offset map from the dirty section, batch by batch, until it ends or the map is
   full (then the map ends at the last whole batch that fit; the rest stays dirty for the next
   pass). ``map_end`` is the offset after the last mapped batch.
2. Group the segments from the log start up to ``map_end`` so that each group fits one
   segment (``segment.bytes``, and offsets within int32 of the group's base offset): small
   cleaned segments merge again, pass after pass.
3. For each group, write every batch through ``BatchFilter`` into ``<base>.log.cleaned``
   (plus its ``.index.cleaned`` and ``.timeindex.cleaned``); batches at or after ``map_end``
   are copied untouched. fsync, then swap it in: ``Log.replace_segments`` on the owner thread
   (rename ``.cleaned`` -> ``.swap``, replace the segments in memory) and
   ``Log.finish_replace`` (old files -> ``.deleted``, ``.swap`` -> live). Only one group's
   output exists at a time: one extra segment of disk.
4. The next first dirty offset is ``map_end``.

Crash rule: nothing of the log changes until a swap; every swap is recoverable by the rules
in ``ads.storage.loader`` (a ``.cleaned`` file is deleted: old state; a ``.swap`` file is
finished: new state). A crash between groups leaves some groups cleaned and the checkpoint
unchanged, so the next pass redoes the rest. A group's last batch is always written (empty
if none of its records survive) so the swap file covers the group's whole offset range,
which is what recovery relies on to delete exactly the group's old segments.

Reads never wait for a pass: the old segments serve fetches until the in-memory swap, which
is a list assignment on the owner thread. Appends wait only for that assignment.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ads.common.clock import Clock
from ads.records.batch import ATTRIBUTES_OFFSET, BATCH_OVERHEAD, BatchHeader, read_batch_header
from ads.records.crc import crc32c
from ads.records.errors import CorruptRecordError
from ads.records.scan import batch_body, scan_records
from ads.storage.cleaner.filter import BatchFilter, FilterCounts
from ads.storage.cleaner.offset_map import OffsetMap
from ads.storage.cleaner.throttler import Throttler
from ads.storage.cleaner.txn_markers import CleanedTransactions
from ads.storage.config import LONG_MAX, LogConfig
from ads.storage.files import CLEANED_SUFFIX, O_CLOEXEC, BatchInfo
from ads.storage.log import Log
from ads.storage.open_files import OpenFiles
from ads.storage.segment import LogSegment
from ads.storage.transactions import AbortedRanges
from ads.storage.txn_index import AbortedTxn

__all__ = [
    "CleanerAbortedError",
    "CleanerStats",
    "LogToClean",
    "OwnerCall",
    "clean_log",
    "cleanable_ratio",
    "earliest_delete_horizon",
    "plan_cleaning",
]

logger = logging.getLogger("ads.storage.cleaner")

_INT32_MAX = 0x7FFFFFFF

# Runs a function on the thread that owns the logs and returns its result.
OwnerCall = Callable[[Callable[[], object]], object]


class CleanerAbortedError(Exception):
    """The pass was stopped (shutdown) or the log changed under it; nothing is lost."""


@dataclass(frozen=True, slots=True)
class LogToClean:
    """What a pass will clean, taken on the owner thread. ``segments`` excludes the active
    segment; ``ends[i]`` is the base offset of the segment after ``segments[i]``."""

    log: Log
    directory: Path
    files: OpenFiles  # the log's open files, which the cleaned segment joins
    config: LogConfig
    segments: tuple[LogSegment, ...]
    sizes: tuple[int, ...]
    ends: tuple[int, ...]
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    # Producer id -> (offset of its last data batch or -1, offset of its last batch): the
    # batches its state is rebuilt from, kept even when emptied.
    producer_last_offsets: dict[int, tuple[int, int]]
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int
    horizon_due: bool = False
    # Aborted transactions of the segments: their records are neither mapped nor kept.
    aborted_txns: tuple[AbortedTxn, ...] = ()
    aborted: AbortedRanges = AbortedRanges()

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def must_clean(self) -> bool:
        """Cleaning is due regardless of ``min.cleanable.dirty.ratio``."""
        return (self.max_compaction_delay_ms > 0 and self.cleanable_bytes > 0) or self.horizon_due

    @property
    def should_clean(self) -> bool:
        ratio = self.config.min_cleanable_dirty_ratio
        return self.must_clean or (self.cleanable_bytes > 0 and self.cleanable_ratio > ratio)


@dataclass(frozen=True, slots=True)
class CleanerStats:
    """One pass, for the log line and the metrics."""

    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int
    bytes_read: int
    map_bytes_read: int
    bytes_written: int
    messages_read: int
    messages_written: int
    keys: int
    map_utilization: float
    dirty_ratio_before: float
    dirty_ratio_after: float
    segments_in: int
    segments_out: int
    map_duration_s: float
    duration_s: float
    counts: FilterCounts = field(default_factory=FilterCounts)
    earliest_horizon_ms: int | None = None

    @property
    def read_mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.duration_s if self.duration_s > 0 else 0.0

    def describe(self) -> str:
        reduction = 100.0 * (1 - self.bytes_written / self.bytes_read) if self.bytes_read else 0.0
        return (
            f"cleaned log {self.topic}-{self.partition} (dirty section "
            f"[{self.first_dirty_offset}, {self.end_offset})): {self.bytes_read / 1e6:.1f} MB "
            f"read in {self.duration_s:.2f} s ({self.read_mb_per_s:.1f} MB/s); "
            f"{self.keys} keys mapped from {self.map_bytes_read / 1e6:.1f} MB in "
            f"{self.map_duration_s:.2f} s (map {100 * self.map_utilization:.1f}% full); "
            f"{self.bytes_written / 1e6:.1f} MB written ({reduction:.1f}% smaller); "
            f"{self.messages_read} -> {self.messages_written} messages; segments "
            f"{self.segments_in} -> {self.segments_out}; dirty ratio "
            f"{self.dirty_ratio_before:.3f} -> {self.dirty_ratio_after:.3f}"
        )


# ------------------------------------------------------------------------------- planning


def _bytes_between(plan_segments: Sequence[tuple[int, int, int]], start: int, end: int) -> int:
    """Bytes of the segments ``(base, end, size)`` overlapping [start, end)."""
    return sum(size for base, seg_end, size in plan_segments if base < end and seg_end > start)


def cleanable_ratio(
    segments: Sequence[tuple[int, int, int]], log_start: int, first_dirty: int, uncleanable: int
) -> tuple[int, int]:
    """``(clean bytes, cleanable bytes)`` of segments ``(base, end, size)``, Kafka's way."""
    clean = _bytes_between(segments, log_start, first_dirty)
    dirty = _bytes_between(segments, first_dirty, max(first_dirty, uncleanable))
    return clean, dirty


def plan_cleaning(
    log: Log,
    checkpoint_offset: int | None,
    now_ms: int,
    *,
    pending_horizon_ms: int | None = None,
) -> LogToClean:
    """Owner thread: the sections of ``log`` as they are now (see the module docstring)."""
    config = log.config
    segments = log.segments
    active = segments[-1]
    max_lag = config.max_compaction_lag_ms
    if (
        max_lag < LONG_MAX
        and active.size > 0
        and 0 <= (active.rolling_based_timestamp() or -1) < now_ms - max_lag
        and active.created_ms < now_ms - max_lag  # old timestamps alone must not roll forever
    ):
        # The active segment is never cleaned; roll it so a record cannot stay dirty longer.
        log.roll()
        segments = log.segments
        active = segments[-1]
    sealed = segments[:-1]
    ends = tuple(s.base_offset for s in segments[1:])
    log_start = log.log_start_offset
    first_dirty = log_start if checkpoint_offset is None else checkpoint_offset
    if first_dirty < log_start or first_dirty > log.log_end_offset:
        first_dirty = log_start
    uncleanable = min(active.base_offset, log.high_watermark)
    unstable = log.producer_state.first_unstable_offset()
    if unstable is not None:
        uncleanable = min(uncleanable, unstable)
    min_lag = config.min_compaction_lag_ms
    delay = 0
    for segment, end in zip(sealed, ends, strict=True):
        if end <= first_dirty:
            continue
        if min_lag > 0 and segment.largest_timestamp > now_ms - min_lag:
            uncleanable = min(uncleanable, segment.base_offset)
            break
        first_ts = segment.rolling_based_timestamp()
        if first_ts is not None and first_ts >= 0 and config.max_compaction_lag_ms < LONG_MAX:
            delay = max(delay, now_ms - config.max_compaction_lag_ms - first_ts)
    sizes = tuple(s.size for s in sealed)
    triples = [(s.base_offset, end, size) for s, end, size in zip(sealed, ends, sizes, strict=True)]
    clean, dirty = cleanable_ratio(triples, log_start, first_dirty, uncleanable)
    producers = {
        pid: (entry.batches[-1].last_offset if entry.batches else -1, entry.last_offset)
        for pid, entry in log.producer_state.producers.items()
    }
    # The active segment's too: a marker there may end a transaction begun before it.
    aborted = tuple(a for s in segments for a in s.txn_index.entries)
    return LogToClean(
        log=log,
        directory=log.dir,
        files=log.open_files,
        config=config,
        segments=tuple(sealed),
        sizes=sizes,
        ends=ends,
        log_start_offset=log_start,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=max(first_dirty, uncleanable),
        now_ms=now_ms,
        producer_last_offsets=producers,
        clean_bytes=clean,
        cleanable_bytes=dirty,
        max_compaction_delay_ms=delay if first_dirty < uncleanable else 0,
        horizon_due=pending_horizon_ms is not None and pending_horizon_ms <= now_ms,
        aborted_txns=aborted,
        aborted=AbortedRanges(aborted),
    )


# --------------------------------------------------------------------------------- reading


def _read_batches(
    fd: int, start: int, end: int, chunk: int, on_read: Callable[[int], None]
) -> Iterator[tuple[bytes, int, BatchHeader, int]]:
    """``(buffer, position in it, header, file position)`` of each batch in the file range
    [start, end), read in chunks of about ``chunk`` bytes."""
    position = start
    while position < end:
        buf = os.pread(fd, min(chunk, end - position), position)
        if len(buf) < BATCH_OVERHEAD:
            raise CorruptRecordError(f"segment ends early at position {position}")
        header = read_batch_header(buf)
        if header.size > end - position:
            raise CorruptRecordError(
                f"batch at position {position} claims {header.size} bytes, "
                f"{end - position} remain"
            )
        if header.size > len(buf):
            # One batch larger than the chunk: read it whole.
            buf = os.pread(fd, header.size, position)
            if len(buf) < header.size:
                raise CorruptRecordError(f"segment ends inside the batch at {position}")
        rel = 0
        while rel + BATCH_OVERHEAD <= len(buf):
            header = read_batch_header(buf, rel)
            if rel + header.size > len(buf):
                break
            yield buf, rel, header, position + rel
            rel += header.size
        position += rel
        on_read(rel)


def earliest_delete_horizon(files: Sequence[tuple[Path, int]]) -> int | None:
    """The earliest delete horizon among the batches of the segment files ``(path, size)``,
    reading only batch headers; a file that went away meanwhile is skipped. The cleaner
    learns it this way for logs it has not cleaned since the broker started, so tombstones
    are removed on time after a restart too."""
    earliest: int | None = None
    for path, size in files:
        try:
            fd = os.open(path, os.O_RDONLY | O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            position = 0
            while position + BATCH_OVERHEAD <= size:
                header = read_batch_header(os.pread(fd, BATCH_OVERHEAD, position))
                horizon = header.delete_horizon_ms
                if horizon is not None and (earliest is None or horizon < earliest):
                    earliest = horizon
                position += header.size
        finally:
            os.close(fd)
    return earliest


# -------------------------------------------------------------------------------- the pass


@dataclass(slots=True)
class _Pass:
    """Mutable state of one pass."""

    plan: LogToClean
    offset_map: OffsetMap
    throttler: Throttler | None
    check_abort: Callable[[], None]
    io_buffer_size: int
    max_uncompressed_bytes: int
    bytes_read: int = 0
    map_bytes_read: int = 0
    bytes_written: int = 0
    segments_out: int = 0

    def on_read(self, n: int) -> None:
        self.bytes_read += n
        if self.throttler is not None:
            self.throttler.maybe_throttle(n)
        self.check_abort()


def _open(segment: LogSegment) -> int:
    try:
        return os.open(segment.log_path, os.O_RDONLY | O_CLOEXEC)
    except FileNotFoundError:
        raise CleanerAbortedError(f"{segment.log_path} went away") from None


def _build_offset_map(state: _Pass) -> int:
    """Map the dirty section; returns ``map_end``, the offset after the last mapped batch."""
    plan, offset_map = state.plan, state.offset_map
    start, stop = plan.first_dirty_offset, plan.first_uncleanable_offset
    offset_map.clear(start)
    map_end = start
    for segment, seg_end, size in zip(plan.segments, plan.ends, plan.sizes, strict=True):
        if seg_end <= start or segment.base_offset >= stop:
            continue
        fd = _open(segment)
        try:
            before = state.bytes_read
            for buf, pos, header, _ in _read_batches(
                fd, 0, size, state.io_buffer_size, state.on_read
            ):
                if header.last_offset < start:
                    continue
                if header.last_offset >= stop or not offset_map.can_hold(header.last_offset):
                    return map_end
                if header.is_control or plan.aborted.holds(header):
                    map_end = header.next_offset  # an aborted value never supersedes
                    continue
                with memoryview(buf) as view:
                    crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + header.size])
                if crc != header.crc:
                    # Keys read from a corrupt batch could make good records look superseded.
                    raise CorruptRecordError(
                        f"CRC mismatch in batch at offset {header.base_offset} of {segment!r}"
                    )
                body, b_start, b_end = batch_body(buf, pos, header, state.max_uncompressed_bytes)
                scan = scan_records(body, b_start, b_end, header.records_count)
                base = header.base_offset
                keys = scan.keys
                offsets = [base + d for d in scan.offset_deltas]
                if base < start:
                    # DeleteRecords may leave the log start (and so the first dirty offset)
                    # inside a batch; the records before it are not part of the log any more.
                    first = next((i for i, o in enumerate(offsets) if o >= start), len(keys))
                    keys, offsets = keys[first:], offsets[first:]
                if offset_map.put_many(keys, offsets) < len(keys):
                    return map_end
                map_end = header.next_offset
        finally:
            os.close(fd)
            state.map_bytes_read += state.bytes_read - before
    return map_end


def _group_segments(plan: LogToClean, map_end: int) -> list[list[int]]:
    """Indexes of ``plan.segments`` to clean, grouped so each group fits one segment."""
    limit = plan.config.segment_bytes
    groups: list[list[int]] = []
    for i, segment in enumerate(plan.segments):
        if segment.base_offset >= map_end:
            break
        if groups:
            group = groups[-1]
            first = plan.segments[group[0]].base_offset
            size = sum(plan.sizes[j] for j in group)
            if size + plan.sizes[i] <= limit and plan.ends[i] - 1 - first <= _INT32_MAX:
                group.append(i)
                continue
        groups.append([i])
    return groups


def _clean_group(state: _Pass, group: list[int], batch_filter: BatchFilter, map_end: int,
                 clock: Clock) -> LogSegment:
    """Write the cleaned copy of the segments ``group`` as a ``.cleaned`` segment."""
    plan = state.plan
    first = plan.segments[group[0]]
    cleaned = LogSegment.create(
        plan.directory, first.base_offset, plan.config, clock, files=plan.files,
        file_suffix=CLEANED_SUFFIX
    )
    try:
        # The filter adds the entries of the ABORT markers it keeps; above the map end,
        # where batches are copied as they are, every marker keeps its entry.
        batch_filter.txn_index = cleaned.txn_index
        out = bytearray()
        infos: list[BatchInfo] = []
        max_ts, offset_of_max = -1, first.base_offset

        def flush() -> None:
            nonlocal out, infos, max_ts, offset_of_max
            if not infos:
                return
            cleaned.append(out, infos[0][2], infos[-1][3], max_ts, offset_of_max, infos)
            state.bytes_written += len(out)
            if state.throttler is not None:
                state.throttler.maybe_throttle(len(out))
            out, infos, max_ts = bytearray(), [], -1

        for n, i in enumerate(group):
            segment, size = plan.segments[i], plan.sizes[i]
            last_segment = n == len(group) - 1
            fd = _open(segment)
            try:
                for buf, pos, header, file_pos in _read_batches(
                    fd, 0, size, state.io_buffer_size, state.on_read
                ):
                    if header.base_offset >= map_end:
                        kept: bytes | bytearray | memoryview | None = memoryview(buf)[
                            pos : pos + header.size
                        ]
                        batch_filter.counts.messages_read += header.records_count
                        batch_filter.counts.messages_written += header.records_count
                        entry = batch_filter.txns.entry_at(header.base_offset)
                        if header.is_control and entry is not None:
                            cleaned.txn_index.append(entry)
                    else:
                        is_last = last_segment and file_pos + header.size >= size
                        kept = batch_filter.filter(buf, pos, header, retain_empty=is_last)
                    if kept is None:
                        continue
                    kept_header = read_batch_header(kept)
                    infos.append((len(out), len(kept), kept_header.base_offset,
                                  kept_header.last_offset, kept_header.max_timestamp))
                    if kept_header.max_timestamp > max_ts:
                        max_ts, offset_of_max = kept_header.max_timestamp, kept_header.base_offset
                    out += kept
                    if len(out) >= state.io_buffer_size:
                        flush()
            finally:
                os.close(fd)
        flush()
        cleaned.on_become_inactive()
        cleaned.flush()
    except Exception:
        cleaned.delete(None)
        raise
    return cleaned


def clean_log(
    plan: LogToClean,
    offset_map: OffsetMap,
    *,
    clock: Clock,
    run_on_owner: OwnerCall,
    throttler: Throttler | None = None,
    check_abort: Callable[[], None] = lambda: None,
    io_buffer_size: int = 1 << 20,
    on_swap: Callable[[str], None] | None = None,
) -> tuple[int, CleanerStats]:
    """Run one pass (cleaner thread); returns the next first dirty offset and the stats.

    ``on_swap`` sees each step of each swap ("cleaned", "swapped", "finished"); fault tests
    use it to stop a pass at every point a crash could hit.
    """
    started = time.monotonic()
    state = _Pass(
        plan=plan,
        offset_map=offset_map,
        throttler=throttler,
        check_abort=check_abort,
        io_buffer_size=max(io_buffer_size, BATCH_OVERHEAD),
        max_uncompressed_bytes=plan.config.max_inflated_bytes,
    )
    map_end = _build_offset_map(state)
    map_duration = time.monotonic() - started
    batch_filter = BatchFilter(
        offset_map,
        now_ms=plan.now_ms,
        delete_retention_ms=plan.config.delete_retention_ms,
        producer_last_offsets=plan.producer_last_offsets,
        max_uncompressed_bytes=state.max_uncompressed_bytes,
        txns=CleanedTransactions(plan.aborted_txns),
    )
    groups = _group_segments(plan, map_end)
    after: list[tuple[int, int, int]] = []
    for group in groups:
        check_abort()
        cleaned = _clean_group(state, group, batch_filter, map_end, clock)
        if on_swap is not None:
            on_swap("cleaned")
        old = [plan.segments[i] for i in group]
        sizes = [plan.sizes[i] for i in group]
        def swap(c: LogSegment = cleaned, o: list[LogSegment] = old,
                 s: list[int] = sizes) -> bool:
            return plan.log.replace_segments(c, o, s)

        try:
            swapped = run_on_owner(swap)
        except Exception:
            cleaned.delete(None)  # the list was not changed: the old segments still serve
            raise
        if not swapped:
            raise CleanerAbortedError(f"{plan.directory}: the log changed during cleaning")
        if on_swap is not None:
            on_swap("swapped")
        plan.log.finish_replace(cleaned, old)
        if on_swap is not None:
            on_swap("finished")
        state.segments_out += 1
        after.append((cleaned.base_offset, plan.ends[group[-1]], cleaned.size))
    cleaned_count = sum(len(g) for g in groups)
    untouched = [
        (s.base_offset, end, size)
        for s, end, size in zip(plan.segments[cleaned_count:], plan.ends[cleaned_count:],
                                plan.sizes[cleaned_count:], strict=True)
    ]
    clean, dirty = cleanable_ratio(
        after + untouched, plan.log_start_offset, map_end, plan.first_uncleanable_offset
    )
    counts = batch_filter.counts
    stats = CleanerStats(
        topic=plan.log.topic,
        partition=plan.log.partition,
        first_dirty_offset=plan.first_dirty_offset,
        end_offset=map_end,
        bytes_read=state.bytes_read,
        map_bytes_read=state.map_bytes_read,
        bytes_written=state.bytes_written,
        messages_read=counts.messages_read,
        messages_written=counts.messages_written,
        keys=offset_map.size,
        map_utilization=offset_map.utilization,
        dirty_ratio_before=plan.cleanable_ratio,
        dirty_ratio_after=dirty / (clean + dirty) if clean + dirty else 0.0,
        segments_in=cleaned_count,
        segments_out=state.segments_out,
        map_duration_s=map_duration,
        duration_s=time.monotonic() - started,
        counts=counts,
        earliest_horizon_ms=batch_filter.earliest_horizon_ms,
    )
    return max(map_end, plan.first_dirty_offset), stats
