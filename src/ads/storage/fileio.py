"""The file layer: the writes, fsyncs, truncations and opens of segments and their indexes.

``LogManager`` takes one (``file_io=``) and hands it to every log, segment and index it
opens; ``OS_FILE_IO``, the default, is the operating system itself. The real layer's
methods *are* ``os.write`` / ``os.fsync`` / ``os.ftruncate`` / ``os.open`` (static
attributes, no wrapper frame), so going through it costs one attribute lookup per call.

``FaultyFileIO`` is the test double (like franz-go kfake's failing file system): it fails the
next write or fsync with a chosen errno, makes short writes, or runs out of space after a
budget of bytes, so tests can show what a full or failing disk does to an append. Reads
(``os.pread``, ``sendfile``) do not go through the layer: a failing read is a fetch error, not
a risk to acknowledged data.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Protocol

from ads.common.files import HAS_SYNCFS, syncfs

__all__ = ["OS_FILE_IO", "FaultyFileIO", "FileIO", "OsFileIO"]

Bytes = bytes | bytearray | memoryview
PathArg = str | os.PathLike[str]


class FileIO(Protocol):
    """What segments and indexes call to change files."""

    def write(self, fd: int, data: Bytes, /) -> int: ...

    def fsync(self, fd: int, /) -> None: ...

    def ftruncate(self, fd: int, length: int, /) -> None: ...

    def open(self, path: PathArg, flags: int, mode: int = 0o777, /) -> int: ...

    # Whether ``syncfs`` exists here; without it the log manager fsyncs file by file.
    has_syncfs: bool

    def syncfs(self, fd: int, /) -> None: ...


class OsFileIO:
    """The operating system's own calls, bound as static attributes (no extra frame)."""

    write = staticmethod(os.write)
    fsync = staticmethod(os.fsync)
    ftruncate = staticmethod(os.ftruncate)
    open = staticmethod(os.open)
    syncfs = staticmethod(syncfs)
    has_syncfs = HAS_SYNCFS


OS_FILE_IO: FileIO = OsFileIO()


class FaultyFileIO:
    """A ``FileIO`` that injects faults; thread-safe (background flushes call ``fsync``).

    - ``fail_next_write(errno, skip=n)`` / ``fail_next_fsync(errno)`` /
      ``fail_next_open(errno)``: the next call of that kind (after ``skip`` writes that
      succeed) raises ``OSError(errno)``; later ones succeed again. A ``syncfs`` (the
      sync of a whole file system) counts as an fsync.
    - ``has_syncfs = False``: behave as a system without ``syncfs``.
    - ``short_writes(n)``: the next ``n`` writes store only half of their bytes (at least
      one) and report that, as a write interrupted by a signal or a full disk does.
    - ``space_left(n)``: ENOSPC once ``n`` more bytes have been written; a write crossing the
      limit stores what fits and reports it, the next one raises (Linux's behaviour).
      ``space_left(None)`` frees the disk again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fail_write: int | None = None
        self._fail_write_skip = 0
        self._fail_fsync: int | None = None
        self._fail_open: int | None = None
        self._short_writes = 0
        self._space: int | None = None
        self.writes = 0
        self.fsyncs = 0
        self.syncfs_calls = 0
        self.has_syncfs = HAS_SYNCFS

    def fail_next_write(self, code: int = errno.EIO, *, skip: int = 0) -> None:
        with self._lock:
            self._fail_write, self._fail_write_skip = code, skip

    def fail_next_fsync(self, code: int = errno.EIO) -> None:
        with self._lock:
            self._fail_fsync = code

    def fail_next_open(self, code: int = errno.ENOSPC) -> None:
        with self._lock:
            self._fail_open = code

    def short_writes(self, count: int) -> None:
        with self._lock:
            self._short_writes = count

    def space_left(self, nbytes: int | None) -> None:
        with self._lock:
            self._space = nbytes

    def clear(self) -> None:
        """Stop injecting faults."""
        with self._lock:
            self._fail_write = self._fail_fsync = self._fail_open = self._space = None
            self._short_writes = 0

    def write(self, fd: int, data: Bytes, /) -> int:
        view = memoryview(data)
        with self._lock:
            self.writes += 1
            if self._fail_write is not None:
                if self._fail_write_skip:
                    self._fail_write_skip -= 1
                else:
                    code, self._fail_write = self._fail_write, None
                    raise OSError(code, os.strerror(code))
            length = len(view)
            if self._short_writes and length > 1:
                self._short_writes -= 1
                length //= 2
            if self._space is not None:
                if self._space <= 0 and length:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                length = min(length, self._space)
                self._space -= length
        return os.write(fd, view[:length])

    def fsync(self, fd: int, /) -> None:
        with self._lock:
            self.fsyncs += 1
            if self._fail_fsync is not None:
                code, self._fail_fsync = self._fail_fsync, None
                raise OSError(code, os.strerror(code))
        os.fsync(fd)

    def syncfs(self, fd: int, /) -> None:
        with self._lock:
            self.syncfs_calls += 1
            if self._fail_fsync is not None:
                code, self._fail_fsync = self._fail_fsync, None
                raise OSError(code, os.strerror(code))
        syncfs(fd)

    def ftruncate(self, fd: int, length: int, /) -> None:
        os.ftruncate(fd, length)

    def open(self, path: PathArg, flags: int, mode: int = 0o777, /) -> int:
        with self._lock:
            if self._fail_open is not None:
                code, self._fail_open = self._fail_open, None
                raise OSError(code, os.strerror(code))
        return os.open(path, flags, mode)
