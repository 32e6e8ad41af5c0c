"""The aborted-transaction index of one segment: ``<base offset, 20 digits>.txnindex``.

Each entry is an aborted transaction whose ABORT marker lies in the segment. A
read_committed fetch collects the entries that overlap what it returns and sends them as
``aborted_transactions``, so the client drops those producers' records between their first
offset and the marker, batch by batch, without the broker looking inside a batch.

Layout, Kafka's, fixed 34-byte entries, big-endian, no header::

    offset  size  field
    0       2     version              int16  0
    2       8     producer_id          int64
    10      8     first_offset         int64  first offset of the aborted transaction
    18      8     last_offset          int64  offset of its ABORT marker
    26      8     last_stable_offset   int64  the partition's LSO once the marker was written

Entries are in the order of their markers (``last_offset`` increases). The file is made on
the first entry; a segment without aborted transactions has none.

Crash rule: an entry is written right after its marker's batch and fsynced with the segment
(``LogSegment.flush``), so whatever the recovery point covers has its entries. On load a
torn tail (a length not a multiple of 34) is cut off, and an entry of an unknown version
discards the file. After an unclean start the log replays every batch header after its
producer-state snapshot and re-appends the entry of each ABORT marker it meets; ``append``
ignores an entry not after the last one, so re-appending is harmless, and entries past a
truncation point are cut by ``truncate_to``.

Not thread-safe: the owner (the partition's log) calls it from one thread, except ``flush``
which the segment runs under its own lock.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ads.storage.files import O_CLOEXEC
from ads.storage.open_files import CachedPath, OpenFiles

__all__ = ["TXN_INDEX_SUFFIX", "AbortedTxn", "TransactionIndex"]

logger = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    # Slots: one of each per partition or segment, a hundred thousand of them in a broker.
    __slots__ = ("_entries", "_file")

    def __init__(self, path: Path | str, files: OpenFiles) -> None:
        # Opened (and made) on its first entry, through the broker's open files.
        self._file = files.file(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | O_CLOEXEC)
        self._entries: list[AbortedTxn] | None = None  # loaded on first use

    path = CachedPath()  # the file's, kept current through renames

    def _load(self) -> list[AbortedTxn]:
        if self._entries is not None:
            return self._entries
        entries: list[AbortedTxn] = []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        whole = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, whole, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != _VERSION:
                logger.warning("%s: entry of unknown version %d; the index is rebuilt empty",
                               self.path, version)
                entries, whole = [], 0
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        if whole != len(data):
            logger.warning("%s: cutting %d bytes of a torn tail", self.path, len(data) - whole)
            self._cut(whole)
        self._entries = entries
        return entries

    def _cut(self, length: int) -> None:
        if length == 0 and not self._file.is_open:
            self.path.unlink(missing_ok=True)
            return
        self._file.ftruncate(length)

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, entry: AbortedTxn) -> None:
        """Adds the entry of an ABORT marker; one not after the last entry is ignored."""
        entries = self._load()
        if entries and entry.last_offset <= entries[-1].last_offset:
            return
        self._file.write(_ENTRY.pack(_VERSION, entry.producer_id, entry.first_offset,
                                     entry.last_offset, entry.last_stable_offset))
        entries.append(entry)

    def collect(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Entries whose transaction overlaps [fetch_offset, upper_offset)."""
        return [e for e in self._load()
                if e.last_offset >= fetch_offset and e.first_offset < upper_offset]

    def stable_past(self, offset: int) -> bool:
        """Whether an entry's LSO reached ``offset``: every transaction begun below it had
        ended by that entry's marker."""
        entries = self._load()
        return bool(entries) and entries[-1].last_stable_offset >= offset

    def truncate_to(self, offset: int) -> None:
        """Drops the entries whose marker is at or after ``offset``."""
        entries = self._load()
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if keep < len(entries):
            del entries[keep:]
            self._cut(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Empty (segment recovery rebuilds the entries)."""
        self._entries = []
        if self._file.is_open or self.path.exists():
            self._cut(0)

    def flush(self) -> None:
        self._file.fsync()

    def close(self) -> None:
        self._file.close()

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self.path.rename(path)
        self.path = path
