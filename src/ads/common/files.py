"""Crash-safe file replacement, shared by checkpoints, snapshots, metadata and commit logs.

Crash rule: a file is replaced by writing ``<name>.tmp``, fsyncing it, renaming it over
``<name>`` and fsyncing the directory, so a reader sees either the old or the new content,
never a mix. A leftover ``.tmp`` is the writer's to ignore or remove; the next write
overwrites it. ``atomic_write(..., durable=False)`` leaves out both fsyncs, for a writer
that makes a whole file system durable at once afterwards (``syncfs``): until then a crash
may leave the old file, the new one, or a new one cut short, so only formats that detect
a short file (a CRC, an entry count) are written that way.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["HAS_SYNCFS", "O_CLOEXEC", "atomic_write", "fsync_dir", "syncfs"]

# Descriptors opened by the broker must not leak into the processes it starts.
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _libc_syncfs() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    call = getattr(libc, "syncfs", None)
    if call is not None:
        call.argtypes, call.restype = [ctypes.c_int], ctypes.c_int
    return call


# Linux's syncfs(2), which Python's os module does not wrap; None elsewhere.
_SYNCFS = _libc_syncfs()
HAS_SYNCFS = _SYNCFS is not None


def syncfs(fd: int) -> None:
    """Write back everything of the file system holding ``fd`` and wait for it: one call
    instead of an fsync per file when many files changed (a broker's shutdown). Raises
    ``OSError`` when writeback failed anywhere on that file system since ``fd`` was opened
    (Linux 5.8 and later report it), and ``OSError(ENOSYS)`` where the call does not
    exist (``HAS_SYNCFS`` is False: the caller fsyncs file by file instead)."""
    if _SYNCFS is None:
        raise OSError(errno.ENOSYS, "syncfs is not available here")
    if _SYNCFS(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def fsync_dir(directory: Path) -> None:
    """Make renames and creations inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file
    (``durable=False``: see the module docstring)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    if durable:
        fsync_dir(path.parent)
