"""ListOffsets by timestamp: which record of a log a time, or a special timestamp, names.

-2 (earliest) and -4 (earliest local) name the log start offset, -1 (latest) the log end
offset (the broker substitutes the high watermark or last stable offset for clients), -3 the
first record holding the largest timestamp; other negative values (tiered storage) name
nothing here. A real timestamp names the first record whose timestamp is >= it.

The time index and the batch headers find the batch; only that batch is decoded to find the
record. ListOffsets is rare, so this is the one lookup allowed to look inside a batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ads.records.batch import BatchHeader, Record, iter_records
from ads.records.errors import RecordError
from ads.storage.epoch_cache import LeaderEpochCache
from ads.storage.errors import CorruptRecordsError
from ads.storage.segment import LogSegment

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "first_at_or_after",
    "offset_for_timestamp",
]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


def offset_for_timestamp(
    segments: Sequence[LogSegment],
    timestamp: int,
    log_start_offset: int,
    log_end_offset: int,
    epoch_cache: LeaderEpochCache,
    max_inflated_bytes: int = 64 << 20,
) -> tuple[int, int, int] | None:
    """``(offset, timestamp, leader_epoch)``, ``None`` if nothing matches; the caller holds
    the log's lock. A batch read inside may inflate to ``max_inflated_bytes`` at most
    (``CorruptRecordsError`` past it)."""
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return log_start_offset, -1, epoch_cache.epoch_for_offset(log_start_offset)
    if timestamp == LATEST_TIMESTAMP:
        return log_end_offset, -1, epoch_cache.latest_epoch
    found: tuple[int, int] | None = None
    if timestamp == MAX_TIMESTAMP:
        best = max(segments, key=lambda s: s.max_timestamp, default=None)
        if best is not None:
            found = _first_with_max_timestamp(best, log_start_offset, max_inflated_bytes)
    elif timestamp >= 0:
        for segment in segments:
            if segment.max_timestamp >= timestamp:
                found = first_at_or_after(segment, timestamp, log_start_offset,
                                           max_inflated_bytes)
                if found is not None:
                    break
    if found is None:
        return None
    return found[0], found[1], epoch_cache.epoch_for_offset(found[0])


def first_at_or_after(
    segment: LogSegment, timestamp: int, start_offset: int, max_inflated_bytes: int = 64 << 20
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the segment's first record at or after ``timestamp`` and
    at an offset >= ``start_offset``."""
    segment.ensure_indexes()
    _, offset = segment.time_index.lookup(timestamp)
    _, position = segment.offset_index.lookup(max(offset, start_offset))
    for pos, header in segment.scan_headers(position):
        if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
            for record in _records_at(segment, pos, header, max_inflated_bytes):
                if record.offset >= start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
    return None


def _first_with_max_timestamp(segment: LogSegment, start_offset: int, max_inflated_bytes: int
                              ) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record holding the segment's largest timestamp."""
    segment.ensure_indexes()
    largest = segment.max_timestamp
    if largest < 0:
        return None
    _, position = segment.offset_index.lookup(max(segment.offset_of_max_timestamp, start_offset))
    for pos, header in segment.scan_headers(position):
        if header.max_timestamp == largest and header.last_offset >= start_offset:
            for record in _records_at(segment, pos, header, max_inflated_bytes):
                if record.offset >= start_offset and record.timestamp == largest:
                    return record.offset, record.timestamp
    return None


def _records_at(segment: LogSegment, position: int, header: BatchHeader,
                max_inflated_bytes: int) -> Iterator[Record]:
    """The batch's records one at a time (the caller stops at the first that matches).

    A produced batch is stored without being inflated, so it may be a decompression bomb or
    hold records that do not parse: that fails this lookup (CORRUPT_MESSAGE), nothing else.
    """
    if header.is_control:
        return
    data = segment.pread(header.size, position)
    try:
        yield from iter_records(data, max_uncompressed_bytes=max_inflated_bytes)
    except RecordError as exc:
        raise CorruptRecordsError(
            f"batch at offset {header.base_offset} of {segment.log_path}: {exc}") from exc
