"""Segment files: their names, suffixes and descriptors, and the file regions fetches send.

A segment is ``<base offset, 20 digits>.log`` with ``.index`` and ``.timeindex`` beside it
(Kafka's names). Suffixes appended to those names mark a file's state: ``.deleted`` (removed
from the log, unlinked ``file.delete.delay.ms`` later), ``.cleaned`` and ``.swap`` (the
cleaner's output before and during its swap-in; ``ads.storage.loader`` says what a crash in
each state leaves and how loading resolves it).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ads.common.files import O_CLOEXEC
from ads.storage.errors import KafkaStorageError

__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "O_CLOEXEC",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "BatchInfo",
    "FileHandle",
    "FileRegion",
    "Scheduler",
    "file_name",
    "file_names",
    "rename_deleted",
    "rename_suffix",
    "with_suffix",
]


LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# (delay_ms, task): runs ``task`` later, possibly on another thread. Every task this package
# schedules (delayed file removal, flush after a roll) is safe to run off the owner thread.
Scheduler = Callable[[int, Callable[[], None]], None]

# (position in the appended bytes, size, base offset, last offset, max timestamp)
BatchInfo = tuple[int, int, int, int, int]


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def file_names(directory: Path | str) -> list[str]:
    """The names in ``directory``: strings, not the ``Path`` per entry ``iterdir`` makes,
    which cost more than the listing at a start that lists every partition directory."""
    return os.listdir(directory)  # noqa: PTH208 - see above


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``length`` bytes at ``offset`` of the open file ``fd``: whole batches for ``sendfile``.

    The descriptor belongs to the segment, but a region keeps it open: a segment that is
    closed or deleted (retention, truncation) while a fetch response still holds its regions
    closes the descriptor only once the last region is dropped, so the number is never reused
    for another file under a pending ``sendfile``. Drop regions once sent.
    """

    fd: int
    offset: int
    length: int
    _handle: object = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return self.length

    def read_bytes(self) -> bytes:
        """Copy the bytes out (tests and TLS connections, which cannot sendfile)."""
        data = os.pread(self.fd, self.length, self.offset)
        while len(data) < self.length:
            more = os.pread(self.fd, self.length - len(data), self.offset + len(data))
            if not more:
                raise KafkaStorageError(f"file region ends early ({len(data)}/{self.length})")
            data += more
        return data

    def header_bytes(self, size: int) -> bytes:
        """The first `size` bytes of the region: the header of the batch it starts with,
        for a reader that decides on a batch without its records."""
        return os.pread(self.fd, min(size, self.length), self.offset)

    def batches(self) -> list[tuple[FileRegion, int, int]]:
        """Each batch of the region as (its own region, base offset, last offset): one
        read of the header's first 27 bytes per batch, the records stay on disk."""
        out: list[tuple[FileRegion, int, int]] = []
        pos, end = self.offset, self.offset + self.length
        while pos + _HEAD.size <= end:
            head = os.pread(self.fd, _HEAD.size, pos)
            if len(head) < _HEAD.size:
                raise KafkaStorageError(f"file region ends early at {pos}")
            base, length, last_delta = _HEAD.unpack(head)
            size = length + 12
            if size <= _HEAD.size or pos + size > end:
                raise KafkaStorageError(f"batch at {pos} overruns its region")
            out.append((replace(self, offset=pos, length=size), base, base + last_delta))
            pos += size
        return out


# baseOffset, batchLength, then partitionLeaderEpoch, magic, crc, attributes skipped, and
# lastOffsetDelta (`ads.records.batch` has the whole layout).
_HEAD = struct.Struct(">qi11xi")


class FileHandle:
    """Owns a descriptor and closes it when the last holder (segment or region) lets go."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        os.close(self.fd)


def with_suffix(path: Path, old_suffix: str, new_suffix: str) -> Path:
    name = path.name
    if old_suffix:
        if not name.endswith(old_suffix):
            raise ValueError(f"{path} does not end with {old_suffix!r}")
        name = name[: -len(old_suffix)]
    return path.with_name(name + new_suffix)


def rename_suffix(path: Path, old_suffix: str, new_suffix: str) -> Path:
    target = with_suffix(path, old_suffix, new_suffix)
    path.rename(target)
    return target


def rename_deleted(path: Path) -> Path:
    target = path.with_name(path.name + DELETED_SUFFIX)
    if path.exists():
        path.rename(target)
    return target
