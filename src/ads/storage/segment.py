"""One log segment: an append-only ``.log`` file of record batches plus its two indexes.

File layout: ``<base offset, 20 digits>.log`` is a plain concatenation of RecordBatch v2
batches exactly as the log handed them over (base offset and partition leader epoch already
assigned); there is no segment header or footer. Every batch's offsets are >= the segment's
base offset and within int32 of it, which is what lets the indexes store relative offsets.
``.index`` and ``.timeindex`` are described in ``ads.storage.index``, the aborted-transaction
index ``.txnindex`` (made on its first entry) in ``ads.storage.txn_index``.

Deletion renames the three files to ``<name>.deleted`` first and removes them
``file.delete.delay.ms`` later (Kafka's rule). File regions handed to the network layer keep
the log's descriptor open, so they stay readable even after the files are unlinked.

Descriptors: the ``.log`` file and the indexes' write ends are opened through the broker's
`OpenFiles` (``ads.storage.open_files``) on first use and may be closed by it whenever
another file needs the room; every use takes the file's handle first and holds it until
done. Opening a segment (``open``) only reads its size and time from the file system.

Crash rule: a segment past the recovery point is ``recover``-ed on an unclean start: batches
are read from position 0 in chunks and checked (length, magic, CRC, offsets within the
segment); the first bad or incomplete batch and everything after it is truncated, and both
indexes are rebuilt from the surviving batches. A leftover ``.deleted`` file is simply removed.

Reads (the fetch path) only read the ``.log`` file (``os.pread``) and the in-memory offset
index, and hand out file regions for ``sendfile``. A lookup starts at the offset index entry
at or before the wanted offset (or at one of the last batches appended, remembered by the
segment) and scans batch headers from there in chunks, skipping bodies; no record is decoded.

Threading: ``flush`` may run in a worker thread concurrently with ``append`` and ``read``
on the owner thread (it moves nothing a read looks at); ``close`` and the delayed removal
wait for a running ``flush``. All other methods belong to the owner thread.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ads.common.clock import Clock
from ads.records.batch import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    BatchHeader,
    iter_batches,
    read_batch_header,
    scan_valid_prefix,
)
from ads.storage.config import LogConfig
from ads.storage.errors import CorruptIndexError, KafkaStorageError
from ads.storage.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    O_CLOEXEC,
    TIME_INDEX_SUFFIX,
    BatchInfo,
    FileRegion,
    Scheduler,
    file_name,
    rename_deleted,
    rename_suffix,
    with_suffix,
)
from ads.storage.index import OffsetIndex, TimeIndex
from ads.storage.open_files import CachedFile, CachedPath, OpenFiles
from ads.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

__all__ = ["LogSegment"]

logger = logging.getLogger(__name__)

_INT32_MAX = 0x7FFFFFFF
# Batches whose place is remembered at append: a consumer at the log end asks for one of the
# last few, and finds it without the index lookup and header scan (7-12 us per fetch).
_RECENT_BATCHES = 16
_RECOVER_CHUNK = 1 << 20
_LENGTH_FIELD = struct.Struct(">i")
_SCAN_CHUNK = 8192
# base offset, batch length, last offset delta: all an offset lookup needs of a header
_SPAN = struct.Struct(">qi11xi")
# How a segment's .log is opened (again, after the open-file cache closed it).
_REOPEN = os.O_RDWR | os.O_APPEND | O_CLOEXEC


class LogSegment:
    """A segment file and its indexes. Create with ``create`` or ``open``."""

    # Slots: one of each per partition or segment, a hundred thousand of them in a broker.
    __slots__ = ("_bytes_since_last_index_entry", "_clock", "_closed", "_entries_before",
                 "_file", "_indexes_ready", "_lock", "_max_timestamp", "_offset_of_max_timestamp",
                 "_recent", "_roll_jitter_ms", "_rolling_based_timestamp", "_size", "base_offset",
                 "config", "created_ms", "damaged", "offset_index", "time_index", "txn_index")

    def __init__(
        self,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        file: CachedFile,
        size: int,
        created_ms: int,
        files: OpenFiles,
        file_suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.config = config
        self._clock = clock
        self._file = file
        self._size = size
        # Strings, not Paths: a broker start opens a segment for each of its partitions.
        stem = os.path.join(file.directory, file_name(base_offset, ""))  # noqa: PTH118
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX + file_suffix, base_offset,
                                        config.segment_index_bytes, files)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX + file_suffix, base_offset,
                                    config.segment_index_bytes, files)
        self.txn_index = TransactionIndex(stem + TXN_INDEX_SUFFIX + file_suffix, files)
        self.created_ms = created_ms
        self._indexes_ready = False
        self._bytes_since_last_index_entry = 0
        self._max_timestamp: int | None = None
        self._offset_of_max_timestamp = base_offset
        self._rolling_based_timestamp: int | None = None
        # base offset -> (position, size) of the last appended batches, oldest first
        self._recent: dict[int, tuple[int, int]] = {}
        jitter = config.segment_jitter_ms
        self._roll_jitter_ms = random.randrange(min(jitter, config.segment_ms)) if jitter else 0
        self._lock = threading.Lock()
        self._closed = False
        # Set when a failed append could not be undone: the files' tail is unknown.
        self.damaged = False
        # Index entry counts before the running append added any (see ``append``).
        self._entries_before: tuple[int, int] | None = None

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        files: OpenFiles,
        file_suffix: str = "",
    ) -> LogSegment:
        """A new, empty segment; stale files with the same name are replaced.

        ``file_suffix`` is appended to the three file names (the cleaner writes ``.cleaned``
        segments and renames them with ``change_file_suffix``). If a file cannot be made
        (``OSError``), those already made are removed again."""
        path = directory / (file_name(base_offset, LOG_SUFFIX) + file_suffix)
        file = files.create(path, _REOPEN | os.O_CREAT | os.O_TRUNC, _REOPEN)
        segment = cls(base_offset, config, clock, file, 0, clock.time_ms(), files, file_suffix)
        try:
            segment.offset_index.reset()
            segment.time_index.reset()
            segment.txn_index.reset()
        except OSError:
            segment.close()
            for made in segment._paths():
                made.unlink(missing_ok=True)
            raise
        segment._indexes_ready = True
        return segment

    @classmethod
    def open(
        cls,
        directory: str | Path,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        files: OpenFiles,
    ) -> LogSegment:
        """An existing segment; its file is opened and its indexes loaded (and checked) on
        first use."""
        # Strings, as in __init__.
        path = os.path.join(directory, file_name(base_offset, LOG_SUFFIX))  # noqa: PTH118
        stat = os.stat(path)  # noqa: PTH116
        return cls(base_offset, config, clock, files.file(path, _REOPEN), stat.st_size,
                   stat.st_mtime_ns // 1_000_000, files)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size})"

    @property
    def size(self) -> int:
        return self._size

    log_path = CachedPath()  # the file's, kept current through renames

    def pread(self, size: int, position: int) -> bytes:
        """Up to `size` bytes of the ``.log`` file at `position`."""
        handle = self._file.handle()
        return os.pread(handle.fd, size, position)

    # ----------------------------------------------------------------------------- indexes

    def ensure_indexes(self) -> None:
        if self._indexes_ready:
            return
        try:
            self.offset_index.load(self._size)
            self.time_index.load(self._size)
        except CorruptIndexError as exc:
            logger.warning("%s; rebuilding the indexes of %s", exc, self.log_path)
            self.recover(max(self.config.max_message_bytes, self.config.segment_bytes))
            return
        self._indexes_ready = True
        self._bytes_since_last_index_entry = self._size - self.offset_index.last_position

    def _load_max_timestamp(self) -> int:
        if self._max_timestamp is None:
            self._max_timestamp, self._offset_of_max_timestamp = self.time_index.last_entry()
        return self._max_timestamp

    def _index_batch(
        self, position: int, size: int, base_offset: int, last_offset: int, max_timestamp: int
    ) -> None:
        # Kafka's rule (LogSegment.append): one entry per index.interval.bytes of batches,
        # mapping the batch's last offset to its start.
        if max_timestamp > self._load_max_timestamp():
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = base_offset
        if (
            self._bytes_since_last_index_entry > self.config.index_interval_bytes
            and not self.offset_index.is_full
        ):
            if self._entries_before is None:
                self._entries_before = (self.offset_index.entries, self.time_index.entries)
            self.offset_index.append(last_offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(
                    self._load_max_timestamp(), self._offset_of_max_timestamp
                )
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    @property
    def max_timestamp(self) -> int:
        """Largest batch max timestamp in the segment, -1 if none carries one."""
        return self._load_max_timestamp()

    @property
    def offset_of_max_timestamp(self) -> int:
        """Base offset of the first batch carrying ``max_timestamp``."""
        self._load_max_timestamp()
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares with: the max timestamp, else the file's mtime."""
        ts = self._load_max_timestamp()
        if ts >= 0:
            return ts
        return self.log_path.stat().st_mtime_ns // 1_000_000 if self.log_path.exists() else -1

    # ------------------------------------------------------------------------------- append

    def append(
        self,
        data: bytes | bytearray | memoryview,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        batches: Sequence[BatchInfo] | None = None,
    ) -> int:
        """Write ``data`` (whole batches, offsets assigned) at the end; returns its position.

        ``batches`` describes each batch for the indexes; when omitted the headers in
        ``data`` are read. All or nothing: if a write to the log or an index fails (a full
        disk, an I/O error), whatever part of the append reached the files is cut off again,
        the segment is as before, and ``KafkaStorageError`` is raised. If even that cut
        fails, ``damaged`` is set: the owner must stop appending to this segment.
        """
        if first_offset < self.base_offset or last_offset - self.base_offset > _INT32_MAX:
            raise ValueError(f"offsets {first_offset}..{last_offset} do not fit {self!r}")
        self.ensure_indexes()
        self._load_max_timestamp()
        if batches is None:
            batches = [
                (pos, h.size, h.base_offset, h.last_offset, h.max_timestamp)
                for pos, h in iter_batches(data)
            ]
        position = self._size
        # A failed append needs the index entry counts from before it; _index_batch takes
        # them before it adds an entry (one append in several), so this costs one store.
        self._entries_before = None
        view, write = memoryview(data), self._file.write
        try:
            while view:
                view = view[write(view) :]
            recent = self._recent
            for pos, size, base, last, ts in batches:
                self._index_batch(position + pos, size, base, last, ts)
                recent[base] = (position + pos, size)
        except OSError as exc:
            for batch in batches:
                self._recent.pop(batch[2], None)
            self._undo_append(position)
            raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc
        self._size = position + len(data)
        if self._rolling_based_timestamp is None and position == 0:
            self._rolling_based_timestamp = max_timestamp
        while len(recent) > _RECENT_BATCHES:
            del recent[next(iter(recent))]
        if max_timestamp > self._load_max_timestamp():
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = offset_of_max_timestamp
        return position

    def _undo_append(self, position: int) -> None:
        try:
            if self._entries_before is not None:
                self.offset_index.truncate_entries(self._entries_before[0])
                self.time_index.truncate_entries(self._entries_before[1])
            self._file.ftruncate(position)
        except OSError:
            self.damaged = True
            logger.exception("cannot cut a failed append off %s", self.log_path)
        self._after_cut(position)

    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp, which segment.ms counts from (Kafka's rule)."""
        if self._rolling_based_timestamp is None and self._size > 0:
            header = read_batch_header(self.pread(BATCH_OVERHEAD, 0))
            self._rolling_based_timestamp = header.max_timestamp
        return self._rolling_based_timestamp

    def should_roll(
        self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int
    ) -> bool:
        """Kafka's roll conditions for an append of ``messages_size`` bytes."""
        if self._size > self.config.segment_bytes - messages_size:
            return True
        if self._size > 0:
            first = self.rolling_based_timestamp()
            waited = (
                max_timestamp - first
                if first is not None and first >= 0
                else (now_ms - self.created_ms)
            )
            if waited > self.config.segment_ms - self._roll_jitter_ms:
                return True
        self.ensure_indexes()
        return (
            self.offset_index.is_full
            or self.time_index.is_full
            or max_offset - self.base_offset > _INT32_MAX
        )

    def on_become_inactive(self) -> None:
        """Seal the segment after a roll: the time index gets the segment's max timestamp.

        The places of recent batches are dropped: readers at the log end read the new active
        segment, and a log may keep thousands of sealed ones."""
        self._recent.clear()
        max_timestamp = self._load_max_timestamp()
        if self._indexes_ready and max_timestamp >= 0:
            self.time_index.maybe_append(
                max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )

    # -------------------------------------------------------------------------------- reads

    def scan_headers(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """Batch headers from ``position`` to the end, read in chunks, bodies skipped."""
        end = self._size
        buf = b""
        buf_start = position
        handle = self._file.handle() if position < end else None  # held while scanning
        while position < end:
            rel = position - buf_start
            if rel + BATCH_OVERHEAD > len(buf):
                assert handle is not None
                buf = os.pread(handle.fd, min(_SCAN_CHUNK, end - position), position)
                buf_start, rel = position, 0
            header = read_batch_header(buf, rel)
            yield position, header
            position += header.size

    def _scan_spans(self, position: int) -> Iterator[tuple[int, int, int, int, bytes, int]]:
        """(position, size, base offset, last offset, chunk, position in chunk) per batch
        from ``position``: what lookups need, without the cost of a ``BatchHeader``."""
        end = self._size
        buf, buf_start, unpack = b"", position, _SPAN.unpack_from
        handle = self._file.handle() if position < end else None  # held while scanning
        while position < end:
            rel = position - buf_start
            if rel + BATCH_OVERHEAD > len(buf):
                assert handle is not None
                buf = os.pread(handle.fd, min(_SCAN_CHUNK, end - position), position)
                buf_start, rel = position, 0
            fits = len(buf) - rel >= BATCH_OVERHEAD
            base, length, delta = unpack(buf, rel) if fits else (0, 0, 0)
            if length < BATCH_OVERHEAD - LOG_OVERHEAD:
                read_batch_header(buf, rel)  # raises the matching CorruptRecordError
            size = length + LOG_OVERHEAD
            yield position, size, base, base + delta, buf, rel
            position += size

    def _first_span(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, int, int, int, bytes, int] | None:
        """The ``_scan_spans`` item of the first batch whose last offset is >= ``offset``,
        found through the offset index."""
        self.ensure_indexes()
        _, position = self.offset_index.lookup(offset)
        for span in self._scan_spans(max(position, start_position)):
            if span[3] >= offset:
                return span
        return None

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        span = self._first_span(offset, start_position)
        return None if span is None else (span[0], read_batch_header(span[4], span[5]))

    def locate(self, offset: int) -> tuple[int, int, int] | None:
        """``(position, size, base offset)`` of the first batch whose last offset is >=
        ``offset``: one of the last appended batches at once, else by index and scan."""
        recent = self._recent.get(offset)
        if recent is not None:
            return recent[0], recent[1], offset
        span = self._first_span(offset)
        return None if span is None else (span[0], span[1], span[2])

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_batch: bool = False,
    ) -> FileRegion | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes.

        Stops before ``max_position`` (a batch boundary: the position of the high watermark
        batch). With ``min_one_batch`` the first batch is returned even if larger than
        ``max_size`` (KIP-74). ``None`` if no batch here reaches ``start_offset``; a region of
        length 0 if not even one batch may be returned.
        """
        found = self.read_with_base(start_offset, max_size, max_position, min_one_batch)
        return None if found is None else found[0]

    def read_with_base(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_batch: bool = False,
    ) -> tuple[FileRegion, int] | None:
        """``read`` plus the base offset of the region's first batch."""
        found = self.locate(start_offset)
        if found is None:
            return None
        start, size, base = found
        limit = self._size if max_position is None else min(max_position, self._size)
        budget = max(max_size, size) if min_one_batch else max_size
        end_target = min(limit, start + budget)
        first_end = start + size
        handle = self._file.handle()  # the region holds it: open until sent
        if first_end > end_target:
            return FileRegion(handle.fd, start, 0, handle), base
        end = self._boundary_before(first_end, end_target)
        return FileRegion(handle.fd, start, end - start, handle), base

    def _boundary_before(self, low: int, high: int) -> int:
        """The last batch boundary in [low, high]; ``low`` must be a boundary."""
        if high >= self._size:
            return self._size
        _, position = self.offset_index.lookup_position(high)
        position = max(position, low)
        for pos, size, _, _, _, _ in self._scan_spans(position):
            if pos + size > high:
                return pos
        return self._size

    def next_offset(self) -> int:
        """One past the last offset in the segment (its base offset when empty)."""
        self.ensure_indexes()
        result = self.base_offset
        for _, header in self.scan_headers(self.offset_index.last_position):
            result = header.next_offset
        return result

    def iter_headers(self, start_offset: int = 0) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets >= ``start_offset`` (no CRC check)."""
        self.ensure_indexes()
        _, position = self.offset_index.lookup(start_offset)
        for _, header in self.scan_headers(position):
            if header.last_offset >= start_offset:
                yield header

    # ----------------------------------------------------------------------------- recovery

    def recover(
        self,
        max_batch_bytes: int,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> int:
        """Validate every batch, rebuild both indexes, cut off an invalid tail.

        Returns the number of bytes truncated. ``on_batch`` sees each valid header in order
        (the log rebuilds its leader epoch cache with it). The index files are written at
        the end, and only if they differ from what was rebuilt.
        """
        self.offset_index.rebuild()
        self.time_index.rebuild()
        try:
            return self._recover(max_batch_bytes, on_batch)
        finally:
            self.offset_index.finish_rebuild()
            self.time_index.finish_rebuild()

    def _recover(self, max_batch_bytes: int,
                 on_batch: Callable[[BatchHeader], None] | None) -> int:
        self._indexes_ready = True
        self._max_timestamp, self._offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        handle = self._file.handle()  # held while recovering
        file_size = os.fstat(handle.fd).st_size
        position, want, next_offset = 0, _RECOVER_CHUNK, self.base_offset
        reason = ""
        while position < file_size:
            buf = os.pread(handle.fd, min(want, file_size - position), position)
            valid_end, found = scan_valid_prefix(buf)
            for pos, header in found:
                if (
                    header.base_offset < max(self.base_offset, next_offset)
                    or header.last_offset - self.base_offset > _INT32_MAX
                ):
                    valid_end, reason = pos, f"batch offset {header.base_offset} out of order"
                    break
                self._index_batch(
                    position + pos,
                    header.size,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                )
                next_offset = header.next_offset
                if on_batch is not None:
                    on_batch(header)
            position += valid_end
            if reason:
                break
            reason, want = _after_valid_prefix(buf, valid_end, file_size - position,
                                               max_batch_bytes)
            if reason:
                break
        # Entries of markers that did not survive go; the log re-adds those it replays.
        self.txn_index.truncate_to(next_offset)
        truncated = file_size - position
        if truncated:
            logger.warning(
                "%s: %s at position %d; truncating %d bytes, the segment now ends at offset %d",
                self.log_path,
                reason,
                position,
                truncated,
                next_offset - 1,
            )
            self._file.ftruncate(position)
        self._size = position
        self._recent.clear()
        if self._max_timestamp >= 0:
            self.time_index.maybe_append(
                self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )
        return truncated

    def truncate_to(self, offset: int) -> tuple[int, int] | None:
        """Remove the batch holding ``offset`` and everything after it.

        Returns ``(bytes removed, base offset of the first removed batch)``, or ``None`` when
        nothing in the segment reaches ``offset``.
        """
        found = self.locate(offset)
        if found is None:
            return None
        position, _, base_offset = found
        self.offset_index.truncate_to(base_offset)
        self.time_index.truncate_to(base_offset)
        self.txn_index.truncate_to(base_offset)
        removed = self._size - position
        self._file.ftruncate(position)
        self._recent.clear()
        self._after_cut(position)
        if position == 0:
            self.created_ms = self._clock.time_ms()
            self._rolling_based_timestamp = None
        return removed, base_offset

    def _after_cut(self, position: int) -> None:
        """Bring the append state back in line with a log now ending at ``position``."""
        self._size = position
        self._bytes_since_last_index_entry = position - self.offset_index.last_position
        # The time index's last entry may now understate the maximum (its later entries held
        # batches that survive); batches before its offset are all below it, so rescan after.
        max_ts, offset_of_max = self.time_index.last_entry()
        _, scan_from = self.offset_index.lookup(offset_of_max)
        for _, kept in self.scan_headers(scan_from):
            if kept.max_timestamp > max_ts:
                max_ts, offset_of_max = kept.max_timestamp, kept.base_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max

    # ------------------------------------------------------------------------- file handling

    def flush(self) -> None:
        """fsync the log and its indexes; safe in a worker thread."""
        with self._lock:
            if self._closed:
                return
            self._file.fsync()
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._indexes_ready and self._load_max_timestamp() >= 0:
                try:
                    self.time_index.maybe_append(
                        self._load_max_timestamp(),
                        self._offset_of_max_timestamp,
                        skip_full_check=True,
                    )
                except OSError:
                    logger.exception("cannot finish the time index of %s", self.log_path)
            self.offset_index.close_writer()
            self.time_index.close_writer()
            self.txn_index.close()
            self._file.close()  # the descriptor closes unless a FileRegion still holds it

    @property
    def closed(self) -> bool:
        return self._closed

    def _paths(self) -> list[Path]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def rename_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory (open descriptors stay valid, and a
        file opened again is opened there)."""
        self.log_path = directory / self.log_path.name
        self.offset_index.path = directory / self.offset_index.path.name
        self.time_index.path = directory / self.time_index.path.name
        self.txn_index.path = directory / self.txn_index.path.name

    def change_file_suffix(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files from ``<name><old_suffix>`` to ``<name><new_suffix>``
        (open descriptors stay valid): the cleaner's ``.cleaned`` -> ``.swap`` -> live."""
        self.log_path = rename_suffix(self.log_path, old_suffix, new_suffix)
        for index in (self.offset_index, self.time_index):
            index.rename(with_suffix(index.path, old_suffix, new_suffix))
        self.txn_index.rename(with_suffix(self.txn_index.path, old_suffix, new_suffix))

    def delete(self, scheduler: Scheduler | None = None) -> None:
        """Rename the files to ``.deleted`` now; close and remove them after the delay."""
        self.log_path = rename_deleted(self.log_path)
        self.offset_index.rename(
            self.offset_index.path.with_name(self.offset_index.path.name + DELETED_SUFFIX)
        )
        self.time_index.rename(
            self.time_index.path.with_name(self.time_index.path.name + DELETED_SUFFIX)
        )
        self.txn_index.rename(
            self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX)
        )
        delay = self.config.file_delete_delay_ms
        if scheduler is not None and delay > 0:
            scheduler(delay, self._remove_files)
        else:
            self._remove_files()

    def _remove_files(self) -> None:
        self.close()
        for path in self._paths():
            path.unlink(missing_ok=True)


def _after_valid_prefix(buf: bytes, valid_end: int, left: int,
                        max_batch_bytes: int) -> tuple[str, int]:
    """What follows the valid batches at the start of a chunk ``recover`` read, with ``left``
    bytes of the file from there on: why recovery stops there, or ``""`` and how many bytes
    to read next."""
    rest = len(buf) - valid_end
    if rest == 0:
        return "", _RECOVER_CHUNK
    if rest < LOG_OVERHEAD:
        if rest < left:
            return "", _RECOVER_CHUNK  # the chunk cut the length field; read on from here
        return "incomplete batch header", 0
    size = _LENGTH_FIELD.unpack_from(buf, valid_end + 8)[0] + LOG_OVERHEAD
    if size <= rest or size < BATCH_OVERHEAD or size > max_batch_bytes:
        return f"invalid batch of {size} bytes (bad length, magic or CRC)", 0
    if size > left:
        return f"incomplete batch of {size} bytes", 0
    return "", size  # the chunk cut a batch: read it whole
