"""File regions in responses: what the network layer sends from files, and how.

A fetch response's record data is a file region (`fd`, `offset`, `length`). Regions up to
`SENDFILE_MIN_BYTES` are read and sent with the response's other bytes; larger ones go with
sendfile on a plain socket. Over TLS, sendfile cannot encrypt: a large region is read in a
worker thread (it may be cold) and written through the TLS transport in one piece.
"""

from __future__ import annotations

import asyncio
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
            out.append(pread_exactly(chunk.fd, chunk.length, chunk.offset))
    return out, large


def pread_exactly(fd: int, length: int, offset: int) -> bytes:
    data = os.pread(fd, length, offset)
    while len(data) < length:
        more = os.pread(fd, length - len(data), offset + len(data))
        if not more:
            # The size prefix already counts these bytes: the response cannot be finished.
            raise ConnectionAbortedError(f"file region ends early ({len(data)}/{length})")
        data += more
    return data


async def write_chunks(transport: asyncio.Transport, chunks: Sequence[Chunk], sock_fd: int,
                       *, tls: bool) -> None:
    """Writes a response's chunks in order; `sock_fd` is the plain socket for sendfile (-1
    where there is none)."""
    loop = asyncio.get_running_loop()
    chunks, _ = inline_small_regions(chunks)
    pending: list[Chunk] = []
    for chunk in chunks:
        if isinstance(chunk, _BYTES_LIKE):
            pending.append(chunk)
            continue
        if pending:
            transport.writelines(pending)
            pending = []
        if tls:
            transport.write(await asyncio.to_thread(pread_exactly, chunk.fd, chunk.length,
                                                    chunk.offset))
            continue
        sent = _sendfile_now(transport, sock_fd, chunk)
        if sent < chunk.length:
            with os.fdopen(chunk.fd, "rb", buffering=0, closefd=False) as f:
                await loop.sendfile(transport, f, chunk.offset + sent, chunk.length - sent)
    if pending:
        transport.writelines(pending)


def _sendfile_now(transport: asyncio.Transport, sock_fd: int, region: FileRegion) -> int:
    """Sends what the socket takes right now straight from the file; returns how much.

    asyncio's sendfile, which sends the rest, costs a future and two selector updates
    even when the socket takes the whole region at once. Only on a plain socket whose
    transport holds nothing unsent, so bytes go out in order.
    """
    if sock_fd < 0 or transport.get_write_buffer_size():
        return 0
    sent = 0
    try:
        while sent < region.length:
            n = os.sendfile(sock_fd, region.fd, region.offset + sent, region.length - sent)
            if n == 0:
                break
            sent += n
    except (BlockingIOError, InterruptedError):
        pass
    return sent
