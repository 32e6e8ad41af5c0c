"""File regions in responses: what goes out with sendfile and what is cheaper inline.

A response chunk that is not bytes-like is a file region (`fd`, `offset`, `length`); the
connection sends it with sendfile, except regions up to `SENDFILE_MIN_BYTES`, which are
read and written with the response's other bytes (docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

Chunk = Any  # bytes-like, or a file region with fd/offset/length

# File regions up to this size are read and sent inline rather than with sendfile.
SENDFILE_MIN_BYTES = 64 << 10
_BYTES_LIKE = (bytes, bytearray, memoryview)


class FileRegion(Protocol):
    fd: int
    offset: int
    length: int


def inline_small_regions(chunks: Sequence[Chunk]) -> tuple[Sequence[Chunk], bool]:
    """Replaces file regions of at most `SENDFILE_MIN_BYTES` by their bytes.

    Returns the chunks and whether a (larger) region remains for sendfile. A small region
    costs less read and sent with the response's other bytes than sendfile'd: asyncio's
    sendfile needs a task, a drained transport and a syscall of its own per region
    (docs/benchmarks.md has the measurements).
    """
    if all(isinstance(c, _BYTES_LIKE) for c in chunks):
        return chunks, False
    out: list[Chunk] = []
    large = False
    for chunk in chunks:
        if isinstance(chunk, _BYTES_LIKE):
            out.append(chunk)
        elif chunk.length > SENDFILE_MIN_BYTES:
            out.append(chunk)
            large = True
        elif chunk.length:
            out.append(_pread_exactly(chunk.fd, chunk.length, chunk.offset))
    return out, large


def _pread_exactly(fd: int, length: int, offset: int) -> bytes:
    data = os.pread(fd, length, offset)
    while len(data) < length:
        more = os.pread(fd, length - len(data), offset + len(data))
        if not more:
            # The size prefix already counts these bytes: the response cannot be finished.
            raise ConnectionAbortedError(f"file region ends early ({len(data)}/{length})")
        data += more
    return data
