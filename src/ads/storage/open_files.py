"""The broker's open segment files, bounded: a cache of descriptors.

Every file a segment writes or reads through a descriptor (its ``.log``, and the write ends
of ``.index``, ``.timeindex`` and ``.txnindex``) is a `CachedFile`: a path and the flags to
open it with, holding a descriptor only while the broker's one `OpenFiles` keeps it.
`CachedFile.handle()` opens the file on first use, closing a file not used lately when
`limit` are open (the second-chance approximation of least recently used: a use only sets
a flag, so the hot path takes no lock; eviction passes over flagged files once, clearing
their flag). So the descriptors a broker holds do not grow with its partitions or
segments: a partition that is neither written nor read holds none (Kafka keeps one per
segment and its operators raise ``ulimit -n`` for it).

A descriptor is closed when the last holder of its `FileHandle` lets go. Evicting a file
drops the cache's reference only: a `FileRegion` in a fetch response being sent with
``sendfile``, or a caller in the middle of a write or ``fsync``, holds the handle and keeps
the descriptor open until it is done, so eviction never closes a descriptor in use, and a
descriptor number is never reused under a pending ``sendfile``. `limit` bounds the
descriptors the cache keeps; those in use beyond it are the requests in flight.

Reopening uses the flags a file was made to be reopened with (never ``O_TRUNC``), and the
path its owner keeps current through renames (``.cleaned`` -> ``.swap`` -> live,
``.deleted``, a partition directory renamed for deletion).

``log.open.files.max`` sets `limit` (``ads.broker.config``); 0 means half of the process's
open-file limit (``RLIMIT_NOFILE``, whose soft limit the broker first raises to the hard
one, as the JVM does for Kafka), leaving the other half to connections.

Thread-safe: the event loop, background flushes and the cleaner share it; opening and
eviction take one lock, a use of an open file none.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ads.storage.fileio import OS_FILE_IO, FileIO
from ads.storage.files import O_CLOEXEC, FileHandle

__all__ = [
    "DEFAULT_LIMIT",
    "CachedFile",
    "CachedPath",
    "OpenFiles",
    "default_limit",
    "process_limit",
    "raise_process_limit",
]

# The limit of a cache made without one (a log opened on its own, in tests and tools).
DEFAULT_LIMIT = 1024
# Descriptors a broker keeps for everything else (listeners, ZooKeeper, files it opens
# briefly) when its open-file limit is small.
_RESERVE = 64


def raise_process_limit() -> None:
    """Raises the process's soft open-file limit to its hard one, as the JVM does for
    Kafka (``ads broker`` does at start; an embedded broker leaves its host's alone)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def process_limit() -> int:
    """The process's soft open-file limit (``ulimit -n``)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 30 if soft == resource.RLIM_INFINITY else soft


def default_limit() -> int:
    """What ``log.open.files.max=0`` means: half the process's open-file limit, leaving
    the other half to connections and everything else, and never less than 16."""
    soft = process_limit()
    return max(16, min(soft // 2, soft - _RESERVE))


class OpenFiles:
    """The bounded set of open segment files. See the module docstring."""

    def __init__(self, io: FileIO = OS_FILE_IO, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"open file limit must be positive, not {limit}")
        self.io = io  # the file layer every open, write and fsync goes through
        self.limit = limit
        self._lru: OrderedDict[CachedFile, None] = OrderedDict()
        self._lock = threading.Lock()
        self.opens = 0  # every open, first ones and reopens after eviction
        self.evictions = 0

    def __len__(self) -> int:
        """Files open in the cache now."""
        return len(self._lru)

    def file(self, path: Path | str, flags: int) -> CachedFile:
        """A file opened with `flags` on first use (and again after eviction)."""
        return CachedFile(self, path, flags)

    def create(self, path: Path, create_flags: int, flags: int) -> CachedFile:
        """A file opened now with `create_flags` (``O_CREAT``, ``O_TRUNC``, ...), and with
        `flags` whenever it is opened again."""
        cached = CachedFile(self, path, flags)
        cached._open(create_flags)
        return cached

    def _admit(self, cached: CachedFile, flags: int) -> FileHandle:
        # Called with the lock held.
        self._evict(len(self._lru) - self.limit + 1)
        try:
            fd = self.io.open(cached._path, flags, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._lru:
                raise
            # The process ran out elsewhere (connections, files in flight beyond the
            # limit): give back half of what is kept, and try once more.
            self._evict(max(1, len(self._lru) // 2))
            fd = self.io.open(cached._path, flags, 0o644)
        handle = FileHandle(fd)
        cached._handle = handle
        self._lru[cached] = None
        self.opens += 1
        return handle

    def _evict(self, count: int) -> None:
        # Called with the lock held. Oldest first; a file used since it was last passed over
        # gets a second chance, so this ends within two passes.
        lru = self._lru
        while count > 0 and lru:
            old = next(iter(lru))
            if old._referenced:
                old._referenced = False
                lru.move_to_end(old)
                continue
            del lru[old]
            old._handle = None  # closed now, or when its last holder lets go
            self.evictions += 1
            count -= 1


class CachedFile:
    """One file of a segment, open while its `OpenFiles` keeps it; its writes, truncations
    and fsyncs go through the cache's file layer. `path` is kept current by the owner
    across renames. The path is kept as a string (a `Path` object costs three times as
    much, and a broker keeps four of these per partition)."""

    __slots__ = ("_files", "_handle", "_path", "_referenced", "_unsynced", "flags")

    def __init__(self, files: OpenFiles, path: Path | str, flags: int) -> None:
        self._files = files
        self._path = str(path)
        self.flags = flags
        self._handle: FileHandle | None = None
        self._referenced = False  # used since eviction last passed over it
        self._unsynced = False  # written or truncated since the last fsync

    @property
    def path(self) -> Path:
        return Path(self._path)

    @path.setter
    def path(self, path: Path) -> None:
        self._path = str(path)

    @property
    def directory(self) -> str:
        """The directory the file is in, as a string (no ``Path`` made)."""
        return os.path.dirname(self._path)  # noqa: PTH120 - a string, see above

    def handle(self) -> FileHandle:
        """The open file, opened now if it is not; hold the handle while using its
        descriptor (it stays open until the last holder lets go)."""
        handle = self._handle
        if handle is not None:  # no lock: an eviction racing this leaves `handle` valid
            self._referenced = True
            return handle
        files = self._files
        with files._lock:
            handle = self._handle
            if handle is not None:
                return handle
            return files._admit(self, self.flags)

    def _open(self, flags: int) -> FileHandle:
        with self._files._lock:
            return self._files._admit(self, flags)

    @property
    def is_open(self) -> bool:
        return self._handle is not None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """One write at the end (the flags hold ``O_APPEND``); returns the bytes written."""
        handle = self.handle()
        self._unsynced = True
        return self._files.io.write(handle.fd, data)

    def ftruncate(self, length: int) -> None:
        handle = self.handle()
        self._unsynced = True
        self._files.io.ftruncate(handle.fd, length)

    def rewrite(self, data: bytes) -> None:
        """Make `data` the file's whole content: written over the old from the start (a
        descriptor of its own, without ``O_APPEND``), then cut to its length if the old
        was longer. Cheaper than truncating to zero and appending when the content barely
        changes: no block is freed and allocated again."""
        io = self._files.io
        self._unsynced = True
        fd = io.open(self._path, os.O_WRONLY | os.O_CREAT | O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[io.write(fd, view):]
            if os.fstat(fd).st_size > len(data):
                io.ftruncate(fd, len(data))
        finally:
            os.close(fd)

    def fsync(self) -> None:
        """fsyncs what was written since the last fsync, reopening the file if it was
        evicted meanwhile: fsync applies to the file, not to the descriptor."""
        if not self._unsynced:
            return
        # Cleared first: a write on the owner's thread while this runs in a flusher's
        # sets it again and is synced next time.
        self._unsynced = False
        try:
            self._files.io.fsync(self.handle().fd)
        except BaseException:
            self._unsynced = True
            raise

    def close(self) -> None:
        """Leaves the cache; the descriptor closes once no holder is left. The file may
        be opened again (`handle`)."""
        files = self._files
        with files._lock:
            if self._handle is not None:
                self._handle = None
                files._lru.pop(self, None)


class CachedPath:
    """An owner's path that is its `_file`'s (a `CachedFile`): setting it (a rename)
    moves where the file is opened again."""

    def __get__(self, owner: Any, owner_type: type | None = None) -> Path:
        path: Path = owner._file.path
        return path

    def __set__(self, owner: Any, path: Path) -> None:
        owner._file.path = path
