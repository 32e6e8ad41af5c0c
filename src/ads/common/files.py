"""Crash-safe file replacement, shared by checkpoints, snapshots, metadata and commit logs.

Crash rule: a file is replaced by writing ``<name>.tmp``, fsyncing it, renaming it over
``<name>`` and fsyncing the directory, so a reader sees either the old or the new content,
never a mix. A leftover ``.tmp`` is the writer's to ignore or remove; the next write
overwrites it.

``batched_replacements()`` keeps the rule for many files at once: inside it, ``atomic_write``
on the same thread writes only the ``.tmp``; leaving it fsyncs every ``.tmp`` (several at
once, which a disk serves faster than one after another), renames each, then fsyncs their
directories. Until then the final paths still hold the old content, so nothing inside may
read back a file it replaced.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

__all__ = ["O_CLOEXEC", "atomic_write", "batched_replacements", "fsync_dir"]

# Threads fsyncing one batch: on this project's test machine 1,000 small files took 2.7 s
# one after another and 1.0 s sixteen at a time.
_BATCH_WORKERS = 16
_batch = threading.local()

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
    pending: dict[Path, Path] | None = getattr(_batch, "pending", None)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if pending is None:
            os.fsync(fd)
    finally:
        os.close(fd)
    if pending is not None:
        pending[path] = tmp
        return
    tmp.replace(path)
    fsync_dir(path.parent)


@contextmanager
def batched_replacements() -> Iterator[None]:
    """Replacements by ``atomic_write`` on this thread inside the block complete, durably,
    when it ends (the module's docstring); nested blocks join the outer one."""
    if getattr(_batch, "pending", None) is not None:
        yield
        return
    pending: dict[Path, Path] = {}
    _batch.pending = pending
    try:
        yield
    finally:
        _batch.pending = None
        _complete(pending)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _complete(pending: dict[Path, Path]) -> None:
    # A .tmp gone by now went with its directory (a replica deleted in the same batch).
    present = {path: tmp for path, tmp in pending.items() if tmp.exists()}
    if not present:
        return
    with ThreadPoolExecutor(min(_BATCH_WORKERS, len(present))) as pool:
        list(pool.map(_fsync_file, present.values()))
        for path, tmp in present.items():
            tmp.replace(path)
        list(pool.map(fsync_dir, {path.parent for path in present}))
