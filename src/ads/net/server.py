"""The only asyncio socket code of the broker: a listener and its connections.

Framing: every Kafka request is `int32 size` followed by `size` bytes. The size is checked
against `socket.request.max.bytes` before anything is allocated; a negative or oversized
size closes that connection (Kafka does the same) and nothing else.

Requests of one connection are answered strictly in order, one at a time, as Kafka does by
muting a channel while its request is in flight; clients pipeline several requests and we
read ahead, so a long-polling fetch delays only its own connection.

A response is a list of chunks: bytes-like objects are written to the transport, other
chunks are file regions (objects with `fd`, `offset` and `length`) sent with sendfile, so
record data goes from the page cache to the socket without passing through Python.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("ads.net")

Chunk = Any  # bytes-like, or a file region with fd/offset/length
Response = Sequence[Chunk] | None
Handler = Callable[[memoryview, "ConnectionInfo"], "Response | Awaitable[Response]"]

_MAX_READ_AHEAD = 8 << 20  # stop reading a connection that has this much unprocessed input
_HIGH_WATER = 4 << 20


class FileRegion(Protocol):
    fd: int
    offset: int
    length: int


class CloseConnection(Exception):  # noqa: N818 - it is a request, not a failure
    """Raised by a handler to close the connection that sent the request."""


@dataclass(slots=True)
class ConnectionInfo:
    connection_id: int
    peer: str
    closed: bool = False


_ids = itertools.count(1)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, handler: Handler, max_request_size: int,
                 on_close: Callable[[ConnectionInfo], None] | None = None) -> None:
        self._handler = handler
        self._max_request_size = max_request_size
        self._on_close = on_close
        self._buffer = bytearray()
        self._pending: collections.deque[memoryview] = collections.deque()
        self._busy = False
        self._reading_paused = False
        self._stopped = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._transport: asyncio.Transport | None = None
        self.info = ConnectionInfo(next(_ids), "?")

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=_HIGH_WATER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.info.closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)
        if self._on_close is not None:
            self._on_close(self.info)

    def pause_writing(self) -> None:
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if size <= 0 or size > self._max_request_size:
                log.warning(
                    "closing connection from %s: request size %d outside 1..%d "
                    "(socket.request.max.bytes)", self.info.peer, size, self._max_request_size)
                self._close()
                return
            if end - pos - 4 < size:
                break
            # One copy per request: the frame must outlive the receive buffer, which is
            # reused, because decoded fields are memoryview slices of it.
            self._pending.append(memoryview(bytes(buf[pos + 4:pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
        if not self._busy:
            self._process()
        if (len(buf) > _MAX_READ_AHEAD or len(self._pending) > 64) and not self._reading_paused:
            self._reading_paused = True
            assert self._transport is not None
            self._transport.pause_reading()

    # -- request processing ------------------------------------------------------------
    def _process(self) -> None:
        """Answer pending requests inline while handlers answer synchronously."""
        while self._pending and not self.info.closed:
            frame = self._pending.popleft()
            try:
                result = self._handler(frame, self.info)
            except CloseConnection:
                self._close()
                return
            if inspect.isawaitable(result) or (result is not None and self._has_regions(result)):
                self._busy = True
                self._task = asyncio.ensure_future(self._finish_async(result))
                return
            if result is not None:
                self._write_bytes(result)
            if self._drain_waiter is not None and not self._drain_waiter.done():
                self._busy = True
                self._task = asyncio.ensure_future(self._finish_async(None))
                return
        self._maybe_resume_reading()

    @staticmethod
    def _has_regions(chunks: Sequence[Chunk]) -> bool:
        return any(not isinstance(c, (bytes, bytearray, memoryview)) for c in chunks)

    async def _finish_async(self, result: Response | Awaitable[Response]) -> None:
        try:
            if inspect.isawaitable(result):
                result = await result
            if result is not None and not self.info.closed:
                await self._write(result)
            if self._drain_waiter is not None:
                await self._drain_waiter
        except CloseConnection:
            self._close()
            return
        except (ConnectionError, OSError) as exc:
            log.info("connection %s: write failed: %s", self.info.peer, exc)
            self._close()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s: unexpected error; closing it", self.info.peer)
            self._close()
            return
        self._busy = False
        self._task = None
        self._process()

    def _write_bytes(self, chunks: Sequence[Chunk]) -> None:
        assert self._transport is not None
        self._transport.writelines(chunks)

    async def _write(self, chunks: Sequence[Chunk]) -> None:
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        pending: list[Chunk] = []
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                pending.append(chunk)
                continue
            if pending:
                transport.writelines(pending)
                pending = []
            if chunk.length:
                with os.fdopen(chunk.fd, "rb", buffering=0, closefd=False) as f:
                    await loop.sendfile(transport, f, chunk.offset, chunk.length)
        if pending:
            transport.writelines(pending)

    def _maybe_resume_reading(self) -> None:
        if (self._reading_paused and not self._stopped and len(self._pending) < 16
                and len(self._buffer) < _MAX_READ_AHEAD):
            self._reading_paused = False
            assert self._transport is not None
            self._transport.resume_reading()

    def stop_reading(self) -> None:
        """Shutdown: take no new requests; those already read are still answered."""
        self._stopped = True
        if self._transport is not None and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()

    def _close(self) -> None:
        self.info.closed = True
        self._pending.clear()
        if self._transport is not None:
            self._transport.close()


class KafkaListener:
    """Accepts connections on one host:port and hands their frames to `handler`."""

    def __init__(self, handler: Handler, host: str, port: int, max_request_size: int,
                 on_close: Callable[[ConnectionInfo], None] | None = None) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._max_request_size = max_request_size
        self._on_close = on_close
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_connection, self._host, self._port, reuse_address=True, backlog=1024)
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    def _make_connection(self) -> KafkaConnection:
        conn = KafkaConnection(self._handler, self._max_request_size, self._closed)
        self._connections.add(conn)
        return conn

    def _closed(self, info: ConnectionInfo) -> None:
        self._connections = {c for c in self._connections if not c.info.closed}
        if self._on_close is not None:
            self._on_close(info)

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def drain(self, grace_s: float) -> None:
        """Answer the requests already received (bounded by `grace_s`), then close."""
        for conn in self._connections:
            conn.stop_reading()
        in_flight = [c._task for c in self._connections if c._task is not None]
        if in_flight:
            await asyncio.wait(in_flight, timeout=grace_s)
        for conn in list(self._connections):
            conn._close()
        if self._server is not None:
            await self._server.wait_closed()
