"""Crash-safe file replacement, shared by checkpoints, snapshots, metadata and commit logs.

Crash rule: a file is replaced by writing ``<name>.tmp``, fsyncing it, renaming it over
``<name>`` and fsyncing the directory, so a reader sees either the old or the new content,
never a mix. A leftover ``.tmp`` is the writer's to ignore or remove; the next write
overwrites it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["O_CLOEXEC", "atomic_write", "fsync_dir"]

# Descriptors opened by the broker must not leak into the processes it starts.
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def fsync_dir(directory: Path) -> None:
    """Make renames and creations inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    fsync_dir(path.parent)
