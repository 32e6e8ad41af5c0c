"""Finding and reading batches in a segment: the fetch path's half of ``LogSegment``.

``SegmentReads`` is a base class of ``ads.storage.segment.LogSegment``: its methods only read
the ``.log`` file (``os.pread``) and the in-memory offset index, and hand out file regions
for ``sendfile``; they never change a file. A lookup starts at the offset index entry at or
before the wanted offset (or at one of the last batches appended, remembered by the segment)
and scans batch headers from there in chunks, skipping bodies; no record is decoded.

Threading: the owner thread's, like the segment's appends (a concurrent ``flush`` does not
move anything these methods read).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from ads.records.batch import BATCH_OVERHEAD, LOG_OVERHEAD, BatchHeader, read_batch_header
from ads.storage.files import FileHandle, FileRegion
from ads.storage.index import OffsetIndex

__all__ = ["SegmentReads"]

_SCAN_CHUNK = 8192
# base offset, batch length, last offset delta: all an offset lookup needs of a header
_SPAN = struct.Struct(">qi11xi")


class SegmentReads:
    """Read-side methods of a segment; ``LogSegment`` provides the state they read."""

    base_offset: int
    _fd: int
    _size: int
    _handle: FileHandle | None
    # base offset -> (position, size) of the last appended batches, oldest first
    _recent: dict[int, tuple[int, int]]
    offset_index: OffsetIndex

    def ensure_indexes(self) -> None:
        raise NotImplementedError

    def scan_headers(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """Batch headers from ``position`` to the end, read in chunks, bodies skipped."""
        end = self._size
        buf = b""
        buf_start = position
        while position < end:
            rel = position - buf_start
            if rel + BATCH_OVERHEAD > len(buf):
                buf = os.pread(self._fd, min(_SCAN_CHUNK, end - position), position)
                buf_start, rel = position, 0
            header = read_batch_header(buf, rel)
            yield position, header
            position += header.size

    def _scan_spans(self, position: int) -> Iterator[tuple[int, int, int, int, bytes, int]]:
        """(position, size, base offset, last offset, chunk, position in chunk) per batch
        from ``position``: what lookups need, without the cost of a ``BatchHeader``."""
        end = self._size
        buf, buf_start, unpack = b"", position, _SPAN.unpack_from
        while position < end:
            rel = position - buf_start
            if rel + BATCH_OVERHEAD > len(buf):
                buf = os.pread(self._fd, min(_SCAN_CHUNK, end - position), position)
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
        if first_end > end_target:
            return FileRegion(self._fd, start, 0, self._handle), base
        end = self._boundary_before(first_end, end_target)
        return FileRegion(self._fd, start, end - start, self._handle), base

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
