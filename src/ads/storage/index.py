"""Sparse segment indexes: ``OffsetIndex`` (``.index``) and ``TimeIndex`` (``.timeindex``).

Both files are named like their segment (``00000000000000000000.index``) and hold fixed-size
big-endian entries, appended in order, with no header and no preallocation::

    .index       relative_offset int32 | position int32            8 bytes per entry
    .timeindex   timestamp int64       | relative_offset int32     12 bytes per entry

``relative_offset`` is an offset minus the segment's base offset. An offset-index entry maps
the last offset of a batch to the file position where that batch starts; the log appends one
after every ``index.interval.bytes`` of batches, so a lookup lands at most that far before
the wanted batch. A time-index entry ``(t, o)`` says the largest timestamp in the segment up to
offset ``o`` is ``t`` and that ``o`` is the first offset reaching it; timestamps strictly
increase from entry to entry.

Entries live in memory (two ``array`` columns, searched by bisection) once the file is loaded;
sealed segments load their indexes on first use. Each append is written to the file at once
(one small write through the broker's open files, ``ads.storage.open_files``, which may
close the write end whenever another file needs the room); ``flush`` fsyncs. A write that
fails is cut off the file again, so the file keeps whole entries only.

Crash rule: indexes are not trusted after an unclean shutdown. Segments past the recovery
point are re-scanned and their indexes rebuilt from the log (in memory, then written over the
file only where it differs: ``rebuild`` / ``finish_rebuild``); any index whose size is not a
multiple of its entry size, whose entries are out of order, or which points past the end of
its log fails ``load`` with ``CorruptIndexError`` and is rebuilt the same way.

Not thread-safe, except ``flush``, which may run in another thread while the owner appends.
"""

from __future__ import annotations

import bisect
import operator
import os
import struct
import sys
from array import array
from pathlib import Path

from ads.storage.errors import CorruptIndexError
from ads.storage.files import O_CLOEXEC
from ads.storage.open_files import CachedFile, CachedPath, OpenFiles

__all__ = ["OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = 0x7FFFFFFF
_BIG_ENDIAN_HOST = sys.byteorder == "big"


def _strictly_increasing(values: array[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))


def _non_decreasing(values: array[int]) -> bool:
    return all(map(operator.le, values, values[1:]))


class _IndexFile:
    """An append-only file of fixed-size entries, opened for writing on first append."""

    # Slots: one of each per partition or segment, a hundred thousand of them in a broker.
    __slots__ = ("_file", "_loaded", "_rebuilding", "base_offset", "max_entries")

    entry_size = 0
    _relative: array[int]  # relative offsets, one per entry, kept by both subclasses

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int,
                 files: OpenFiles) -> None:
        self._file: CachedFile = files.file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND
                                            | O_CLOEXEC)
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // self.entry_size, 1)
        self._loaded = False
        self._rebuilding = False  # between rebuild and finish_rebuild: entries in memory only

    path = CachedPath()  # the file's, kept current through renames

    def _write(self, data: bytes) -> None:
        if self._rebuilding:
            return
        file = self._file
        try:
            written = file.write(data)
            while written < len(data):  # a short write: write the rest
                written += file.write(data[written:])
        except OSError:
            # Keep whole entries only; if even this fails the index is rebuilt on load.
            file.ftruncate(self.entries * self.entry_size)
            raise

    def _drop(self, entries: int) -> None:
        raise NotImplementedError

    def _clear(self) -> None:
        raise NotImplementedError

    def _encode(self) -> bytes:
        """Every entry, as the file holds them."""
        raise NotImplementedError

    def rebuild(self) -> None:
        """Start again with no entry (a segment's recovery), in memory only: the entries
        appended until ``finish_rebuild`` reach the file then, at once."""
        self._clear()
        self._rebuilding = self._loaded = True

    def finish_rebuild(self) -> None:
        """Write the rebuilt entries, unless the file holds them already. A recovery mostly
        finds the index it rebuilds intact or barely changed (the time index's last entry),
        and on this machine's file system a truncation that frees blocks cost 150-300 us,
        at each of a hundred thousand partitions: the file is left alone, or written over
        in place (``CachedFile.rewrite``)."""
        self._rebuilding = False
        data = self._encode()
        try:
            if self.path.read_bytes() == data:
                return
        except FileNotFoundError:
            pass
        try:
            self._file.rewrite(data)
        except OSError:
            # No entry rather than a mix of old and new: an index may lack entries (a
            # lookup then scans further), never hold wrong ones.
            self._file.ftruncate(0)
            raise

    def truncate_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries (undoes appends of a failed segment append)."""
        if entries < self.entries:
            self._drop(entries)
            self._truncate_file(entries)

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def entries(self) -> int:
        # Both indexes keep a relative-offset column with one item per entry.
        return len(self._relative)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def _truncate_file(self, entries: int) -> None:
        # Creates the file if missing: an index file always exists next to a written segment,
        # so a missing one means it was lost and must be rebuilt.
        self._file.ftruncate(entries * self.entry_size)

    def _read_file(self, required: bool) -> bytes:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            if required:
                raise CorruptIndexError(f"{self.path} is missing") from None
            return b""
        if len(data) % self.entry_size:
            raise CorruptIndexError(
                f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}"
            )
        return data

    def _check_relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise ValueError(f"offset {offset} does not fit segment {self.base_offset}")
        return relative

    def flush(self) -> None:
        self._file.fsync()

    def close_writer(self) -> None:
        """Close the write handle (a sealed segment's index is only read from memory)."""
        self._file.close()

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self.path.rename(path)
        self.path = path

    def delete_file(self) -> None:
        self.close_writer()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """Maps batch last offsets to file positions; ``lookup`` finds where to start a scan."""

    __slots__ = ("_positions", "_relative")

    entry_size = _OFFSET_ENTRY.size

    def __init__(
        self, path: Path | str, base_offset: int, max_index_size: int, files: OpenFiles
    ) -> None:
        super().__init__(path, base_offset, max_index_size, files)
        self._relative = array("i")
        self._positions = array("i")

    def _drop(self, entries: int) -> None:
        del self._relative[entries:]
        del self._positions[entries:]

    def _clear(self) -> None:
        self._relative, self._positions = array("i"), array("i")

    def _encode(self) -> bytes:
        raw = array("i", bytes(len(self._relative) * self.entry_size))
        raw[0::2], raw[1::2] = self._relative, self._positions
        if not _BIG_ENDIAN_HOST:
            raw.byteswap()
        return raw.tobytes()

    def load(self, log_size: int) -> None:
        """Read the file into memory, raising ``CorruptIndexError`` if it is not sane."""
        raw = array("i", self._read_file(required=log_size > 0))
        if not _BIG_ENDIAN_HOST:
            raw.byteswap()
        relative, positions = raw[0::2], raw[1::2]
        if relative and (
            relative[0] < 0
            or positions[0] < 0
            or positions[-1] >= log_size
            or not _strictly_increasing(relative)
            or not _strictly_increasing(positions)
        ):
            raise CorruptIndexError(f"{self.path}: entries out of order or past the log end")
        self._relative, self._positions = relative, positions
        self._loaded = True

    def reset(self) -> None:
        """Drop every entry, in memory and on disk."""
        self._relative, self._positions = array("i"), array("i")
        self._truncate_file(0)
        self._loaded = True

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._relative[-1] if self._relative else self.base_offset

    @property
    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    def append(self, offset: int, position: int) -> None:
        relative = self._check_relative(offset)
        if self._relative and (relative <= self._relative[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) is not past the last one")
        if self.is_full:
            raise ValueError(f"{self.path} is full")
        self._write(_OFFSET_ENTRY.pack(relative, position))
        self._relative.append(relative)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry with offset <= ``offset``, else the start."""
        i = bisect.bisect_right(self._relative, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i], self._positions[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry at or before file ``position``."""
        i = bisect.bisect_right(self._positions, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i], self._positions[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        keep = bisect.bisect_left(self._relative, offset - self.base_offset)
        if keep < len(self._relative):
            del self._relative[keep:]
            del self._positions[keep:]
            self._truncate_file(keep)


class TimeIndex(_IndexFile):
    """Maps timestamps to the first offset at which the segment reached them."""

    __slots__ = ("_relative", "_timestamps")

    entry_size = _TIME_ENTRY.size

    def __init__(
        self, path: Path | str, base_offset: int, max_index_size: int, files: OpenFiles
    ) -> None:
        super().__init__(path, base_offset, max_index_size, files)
        self._timestamps = array("q")
        self._relative = array("i")

    def _drop(self, entries: int) -> None:
        del self._timestamps[entries:]
        del self._relative[entries:]

    def _clear(self) -> None:
        self._timestamps, self._relative = array("q"), array("i")

    def _encode(self) -> bytes:
        pack = _TIME_ENTRY.pack
        return b"".join(pack(ts, rel) for ts, rel in zip(self._timestamps, self._relative,
                                                         strict=True))

    def load(self, log_size: int) -> None:
        data = self._read_file(required=log_size > 0)
        timestamps, relative = array("q"), array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            timestamps.append(ts)
            relative.append(rel)
        if relative and (
            relative[0] < 0 or not _strictly_increasing(timestamps) or not _non_decreasing(relative)
        ):
            raise CorruptIndexError(f"{self.path}: entries out of order")
        self._timestamps, self._relative = timestamps, relative
        self._loaded = True

    def reset(self) -> None:
        self._timestamps, self._relative = array("q"), array("i")
        self._truncate_file(0)
        self._loaded = True

    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(-1, base_offset)`` if empty.

        Reads only the file's last entry when the index is not loaded, so retention can ask
        every segment for its largest timestamp without loading whole indexes.
        """
        if not self._loaded:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size == 0 or size % self.entry_size:
                return -1, self.base_offset
            with self.path.open("rb") as f:
                f.seek(size - self.entry_size)
                ts, rel = _TIME_ENTRY.unpack(f.read(self.entry_size))
            return ts, self.base_offset + rel
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is larger than the last entry's."""
        # An empty index behaves as if its last timestamp were -1 (no timestamp), like Kafka.
        if timestamp <= (self._timestamps[-1] if self._timestamps else -1):
            return
        relative = self._check_relative(offset)
        if self._relative and relative < self._relative[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        if not skip_full_check and self.is_full:
            raise ValueError(f"{self.path} is full")
        self._write(_TIME_ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._relative.append(relative)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry with timestamp <= ``timestamp``.

        ``(-1, base_offset)`` when every entry is later: the scan starts at the segment start.
        """
        i = bisect.bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._relative[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        keep = bisect.bisect_left(self._relative, offset - self.base_offset)
        if keep < len(self._relative):
            del self._timestamps[keep:]
            del self._relative[keep:]
            self._truncate_file(keep)
