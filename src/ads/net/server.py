"""The only asyncio socket code of the broker: a listener and its connections.

Framing: every Kafka request is `int32 size` followed by `size` bytes. The size is checked
against `socket.request.max.bytes` before anything is allocated; a negative or oversized
size closes that connection (Kafka does the same) and nothing else. Until a SASL
listener's connection has authenticated, the limit is `sasl.server.max.receive.size`
instead, so an unauthenticated peer cannot make the broker hold more than that.

A handler that sets `ConnectionInfo.close_after_response` has its response written, then
the connection closed (a failed authentication is answered, then the peer is gone).

Requests of one connection are answered strictly in order, one at a time, as Kafka does by
muting a channel while its request is in flight; clients pipeline several requests and we
read ahead, so a long-polling fetch delays only its own connection.

A response is a list of chunks: bytes-like objects are written to the transport, other
chunks are file regions (objects with `fd`, `offset` and `length`) sent with sendfile, so
record data goes from the page cache to the socket without passing through Python; small
regions are read and written with the response's other bytes instead (`ads.net.regions`).

Timing, for Kafka's request phases: when a read completes frames, `time.perf_counter()` is
taken once and kept beside each of them; the handler finds it in
`ConnectionInfo.received_s` when it is called, so the wait of a pipelined request behind
the ones before it (Kafka's queue time) is its start minus that. The listener's `on_sent`
is told each response's API key and how long handing it to the transport took, sendfile
and waiting for a full transport to drain included (Kafka's send time).

Limits: connections are admitted and closed when idle by `ads.net.limits`. A handler that
sets `ConnectionInfo.throttle_ms` (a client over its quota) has its response written, then
the connection muted that long: nothing of it is read or answered (KIP-219).

TLS (SSL and SASL_SSL listeners): a listener accepts plain TCP and upgrades each connection
with `loop.start_tls`, so a failed handshake (an untrusted or expired certificate, none where
`ssl.client.auth=required`, a client speaking plaintext) is one log line, in Kafka's words,
and that one connection closed; asyncio's own TLS servers drop such failures silently. The
connection's requests wait for the handshake and its principal: application data that comes
with the handshake's end reaches the connection before start_tls returns, and is queued
until the connection has its TLS transport and principal.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ads.common.later import Later
from ads.net.limits import ConnectionLimits
from ads.net.regions import Chunk, inline_small_regions, write_chunks

log = logging.getLogger("ads.net")

Response = Sequence[Chunk] | None
Handler = Callable[[memoryview, "ConnectionInfo"],
                   "Response | Awaitable[Response] | Later[Response]"]
# Told the API key of each response written and the seconds its send took.
SentCallback = Callable[[int, float], None]
# The principal of a TLS client from its certificate (DER); raises ValueError to refuse it.
PrincipalOf = Callable[[bytes], str]

_MAX_READ_AHEAD = 8 << 20  # stop reading a connection that has this much unprocessed input
_SCRATCH_BYTES = 256 << 10  # receive buffer of a connection, reused for small requests
# A request larger than this is received straight into a buffer of its own, so its bytes
# are copied once, by the kernel, instead of once per buffer they pass through.
_DIRECT_MIN_BYTES = 64 << 10
_PRODUCE = 0
_HIGH_WATER = 4 << 20
# The handshake of a new connection must end within this (Kafka has no such bound; a client
# that never finishes would otherwise hold a connection forever).
TLS_HANDSHAKE_TIMEOUT_S = 30.0


class CloseConnection(Exception):  # noqa: N818 - it is a request, not a failure
    """Raised by a handler to close the connection that sent the request."""


ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class ConnectionInfo:
    connection_id: int
    peer: str  # "host:port"
    closed: bool = False
    # perf_counter() when the request being handled was fully received
    received_s: float = 0.0
    # The peer's address alone ("127.0.0.1"): what ACLs, connection limits and group
    # members name the client by.
    host: str = "?"
    # The listener that accepted the connection (Kafka's listener name, e.g. PLAINTEXT) and
    # its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL).
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    # Kafka's principal, "type:name": User:ANONYMOUS until TLS client authentication or
    # SASL names someone. ACLs and quotas are decided on it.
    principal: str = ANONYMOUS
    # False on a SASL listener until authentication succeeds: until then only ApiVersions
    # and the SASL requests are served, and frames are limited to the pre-authentication
    # size.
    authenticated: bool = True
    # The SASL exchange of this connection (the broker's authenticator owns it); Any, not
    # object: mypyc (tools/build_compiled.py) cannot compile a dataclass field of type object.
    sasl: Any = None
    # perf_counter() after which an authenticated SASL session has expired and must
    # re-authenticate before anything else is served (KIP-368); 0.0: never.
    session_deadline: float = 0.0
    # Set by a handler: close the connection once this request's response is written.
    close_after_response: bool = False
    # Set by a handler whose client is over a quota: once the response is written, the
    # connection is muted this long (then reset to 0).
    throttle_ms: int = 0


_ids = itertools.count(1)


async def _server_handshake(raw: asyncio.Transport, protocol: asyncio.BaseProtocol,
                            context: ssl.SSLContext, info: ConnectionInfo
                            ) -> asyncio.Transport | None:
    """The TLS transport over `raw`, or None when the handshake failed (logged, unless the
    connection was closed meanwhile)."""
    try:
        return await asyncio.get_running_loop().start_tls(
            raw, protocol, context, server_side=True,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
    except (OSError, ConnectionError, TimeoutError) as exc:
        if not info.closed:
            reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or exc
            log.info("Failed authentication with %s on listener %s (SSL handshake failed: %s)",
                     info.peer, info.listener_name, reason)
        return None


def _name_principal(tls: asyncio.Transport, principal_of: PrincipalOf | None,
                    info: ConnectionInfo) -> bool:
    """Sets the principal of a client that showed a certificate; False (logged) when
    `principal_of` refuses it."""
    ssl_object = tls.get_extra_info("ssl_object")
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if der and principal_of is not None:
        try:
            info.principal = principal_of(der)
        except ValueError as exc:
            log.info("Failed authentication with %s on listener %s (%s)", info.peer,
                     info.listener_name, exc)
            return False
    return True


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, handler: Handler, max_request_size: int,
                 on_close: Callable[[ConnectionInfo], None] | None = None,
                 on_sent: SentCallback | None = None,
                 limits: ConnectionLimits | None = None,
                 pre_auth_max_size: int | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 principal_of: PrincipalOf | None = None) -> None:
        self._handler = handler
        self._limits = limits
        self._last_active = time.perf_counter()  # a request received or a response written
        self._unmute: asyncio.TimerHandle | None = None
        self._ssl_context = ssl_context
        self._principal_of = principal_of
        self._handshake: asyncio.Task[None] | None = None
        self._max_request_size = max_request_size
        self._pre_auth_max_size = (max_request_size if pre_auth_max_size is None
                                   else min(pre_auth_max_size, max_request_size))
        self._on_close = on_close
        self._on_sent = on_sent
        # Unparsed input is scratch[_start:_end], or a large request being received into
        # _frame (its first _frame_filled bytes are in).
        self._scratch = bytearray(_SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._start = self._end = 0
        self._frame: bytearray | None = None
        self._frame_filled = 0
        self._pending: collections.deque[memoryview] = collections.deque()
        self._received: collections.deque[float] = collections.deque()  # beside _pending
        # API keys of the responses gathered for the next write
        self._unsent_apis: list[int] = []
        self._pending_bytes = 0
        self._busy = False
        self._reading_paused = False
        self._stopped = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._later: Later[Response] | None = None  # the answer a request waits for
        self._transport: asyncio.Transport | None = None
        self._sock_fd = -1  # for sendfile; -1 where the transport is not a plain socket
        self.info = ConnectionInfo(next(_ids), "?")
        # Done when asyncio reports the connection gone: shutdown waits for it.
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self.info.closed:  # shut down between accept and now
            transport.abort()
            return
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.info.host = str(peer[0]) if peer else "?"
        if self._limits is not None and not self._limits.admit(self, self.info.host):
            self.info.closed = True
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._ssl_context is not None:
            # Nothing is read until start_tls owns the socket; requests wait (busy) until
            # the handshake is done and the principal known (`_start_tls`).
            transport.pause_reading()
            self._busy = True
            self._handshake = asyncio.ensure_future(self._start_tls(transport,
                                                                    self._ssl_context))
            return
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self._sock_fd = sock.fileno()
        transport.set_write_buffer_limits(high=_HIGH_WATER)

    async def _start_tls(self, raw: asyncio.Transport, context: ssl.SSLContext) -> None:
        try:
            tls = await _server_handshake(raw, self, context, self.info)
        except asyncio.CancelledError:
            self.connection_lost(None)
            raise
        if tls is None or self.info.closed:
            self.connection_lost(None)
            return
        self._transport = tls
        tls.set_write_buffer_limits(high=_HIGH_WATER)
        if not _name_principal(tls, self._principal_of, self.info):
            self._close()
            return
        self._busy = False
        if self._pending:
            self._process()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.lost.done():  # a failed TLS handshake may be reported twice
            return
        self.info.closed = True
        if self._limits is not None:
            self._limits.release(self, self.info.host)
        if self._unmute is not None:
            self._unmute.cancel()
        self.lost.set_result(None)
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._later is not None:
            self._later.cancel()
        if self._handshake is not None and not self._handshake.done():
            self._handshake.cancel()
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

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled:]
        if self._end == _SCRATCH_BYTES:
            # Only the start of one small request is left: move it to the front.
            n = self._end - self._start
            self._scratch[:n] = bytes(self._scratch_view[self._start:self._end])
            self._start, self._end = 0, n
        return self._scratch_view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled < len(self._frame):
                return
            frame, self._frame = self._frame, None
            # Produce requests keep the buffer: the log patches offsets into its records in
            # place and writes them as received. Others get immutable bytes, so decoded
            # fields are hashable like any other.
            view = (memoryview(frame)
                    if int.from_bytes(frame[:2], "big") == _PRODUCE else memoryview(bytes(frame)))
            self._queue(view, time.perf_counter())
        else:
            self._end += nbytes
            if not self._split_frames():
                return
        if not self._busy:
            self._process()
        if (self._pending_bytes > _MAX_READ_AHEAD or len(self._pending) > 64) \
                and not self._reading_paused and not self.info.closed:
            self._reading_paused = True
            assert self._transport is not None
            self._transport.pause_reading()

    def _queue(self, frame: memoryview, received_s: float) -> None:
        self._last_active = received_s
        self._pending.append(frame)
        self._received.append(received_s)
        self._pending_bytes += len(frame)

    def _split_frames(self) -> bool:
        """Queues the whole requests in the scratch buffer; False if the connection closed."""
        view = self._scratch_view
        pos, end = self._start, self._end
        received_s = time.perf_counter()  # every frame completed by this read
        while end - pos >= 4:
            size = int.from_bytes(view[pos:pos + 4], "big", signed=True)
            limit = (self._max_request_size if self.info.authenticated
                     else self._pre_auth_max_size)
            if size <= 0 or size > limit:
                log.warning(
                    "closing connection from %s: request size %d outside 1..%d (%s)",
                    self.info.peer, size, limit,
                    "socket.request.max.bytes" if self.info.authenticated
                    else "sasl.server.max.receive.size, before authentication")
                self._close()
                return False
            if end - pos - 4 >= size:
                # A copy: the frame must outlive the scratch buffer, which is reused,
                # because decoded fields are memoryview slices of it.
                self._queue(memoryview(bytes(view[pos + 4:pos + 4 + size])), received_s)
                pos += 4 + size
                continue
            if size > _DIRECT_MIN_BYTES:
                frame = bytearray(size)
                have = end - pos - 4
                frame[:have] = view[pos + 4:end]
                self._frame, self._frame_filled = frame, have
                pos = end
            break
        if pos == end:
            self._start = self._end = 0
        else:
            self._start = pos
        return True

    # -- request processing ------------------------------------------------------------
    def _process(self) -> None:  # noqa: C901 - hot path: each branch ends the pass its own way
        """Answer pending requests inline while handlers answer synchronously.

        The responses of one pass go out in one write: a client that pipelines requests
        gets their answers with one send instead of one each.
        """
        out: list[Chunk] = []
        out_bytes = 0
        while self._pending and not self.info.closed:
            frame = self._pending.popleft()
            self._pending_bytes -= len(frame)
            self.info.received_s = self._received.popleft()
            try:
                result = self._handler(frame, self.info)
            except CloseConnection:
                self._write_bytes(out)
                self._close()
                return
            # A list is the common answer: spared the slower tests of the rest.
            if type(result) is list or (result is not None and not isinstance(result, Later)
                                        and not inspect.isawaitable(result)):
                try:
                    result, large = inline_small_regions(result)
                except OSError as exc:
                    log.warning("connection %s: cannot read a file region: %s",
                                self.info.peer, exc)
                    self._write_bytes(out)
                    self._close()
                    return
                if not large:
                    out.extend(result)
                    self._unsent_apis.append(_api_key(frame))
                    out_bytes += sum(map(len, result))
                    result = None
                    if self.info.close_after_response:
                        self._write_bytes(out)
                        self._close()
                        return
                    if self.info.throttle_ms:
                        self._write_bytes(out)
                        self._mute()
                        return
                    if out_bytes < _HIGH_WATER:
                        continue
                    self._write_bytes(out)
                    out, out_bytes = [], 0
            if result is not None:
                self._write_bytes(out)
                self._wait_for(result, _api_key(frame))
                return
            if self.info.throttle_ms:  # a request answered with nothing (acks=0)
                self._write_bytes(out)
                self._mute()
                return
            if self._drain_waiter is not None and not self._drain_waiter.done():
                self._busy = True
                self._task = asyncio.ensure_future(self._finish_async(None, -1))
                return
        self._write_bytes(out)
        if (self._drain_waiter is not None and not self._drain_waiter.done()
                and not self.info.closed):
            self._busy = True
            self._task = asyncio.ensure_future(self._finish_async(None, -1))
            return
        self._maybe_resume_reading()

    async def _finish_async(self, result: Response | Awaitable[Response], api_key: int
                            ) -> None:
        try:
            if inspect.isawaitable(result):
                result = await result
            started = time.perf_counter()
            written = result is not None and not self.info.closed
            if result is not None and written:
                await self._write(result)
            if self._drain_waiter is not None:
                await self._drain_waiter
            if written and self._on_sent is not None:
                self._on_sent(api_key, time.perf_counter() - started)
            if self.info.close_after_response:
                self._close()
                return
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
        self._task = None
        self._last_active = time.perf_counter()
        if self.info.throttle_ms:
            self._mute()
            return
        self._busy = False
        self._process()

    def _wait_for(self, result: Response | Awaitable[Response] | Later[Response], api_key: int
                  ) -> None:
        """The request's answer comes later (or its large file regions go with sendfile):
        nothing else is answered before it."""
        self._busy = True
        if isinstance(result, Later):
            self._later = result
            result.add_callback(partial(self._answered_later, api_key))
        else:
            # The loop at hand: ensure_future would look it up (a getpid system call on
            # Python 3.11) for every request that waits.
            self._task = self.lost.get_loop().create_task(self._finish_async(result, api_key))

    def _answered_later(self, api_key: int, later: Later[Response]) -> None:
        """A `Later` answer, written in the step that completed it (often another
        connection's produce); the requests queued behind it wait for the next pass."""
        self._later = None
        if self.info.closed:
            return
        try:
            result, large = inline_small_regions(later.result() or ())
        except CloseConnection:
            self._close()
            return
        except OSError as exc:
            log.warning("connection %s: cannot read a file region: %s", self.info.peer, exc)
            self._close()
            return
        except Exception:
            log.exception("connection %s: unexpected error; closing it", self.info.peer)
            self._close()
            return
        if large:  # sendfile: the transport's drain is awaited, in a task as any write
            self._task = self.lost.get_loop().create_task(self._finish_async(result, api_key))
            return
        self._unsent_apis.append(api_key)
        self._write_bytes(result)
        self._last_active = time.perf_counter()
        if self.info.close_after_response:
            self._close()
            return
        if self.info.throttle_ms:
            self._mute()
            return
        self._busy = False
        if self._pending or (self._drain_waiter is not None and not self._drain_waiter.done()):
            # Not from inside the completer's step: the next pass serves them.
            self.lost.get_loop().call_soon(self._resume)
        else:
            self._maybe_resume_reading()

    def _resume(self) -> None:
        if not self._busy and not self.info.closed:
            self._process()

    def _mute(self) -> None:
        """Kafka's channel muting: nothing is read or answered for `info.throttle_ms`."""
        delay_s = self.info.throttle_ms / 1000.0
        self.info.throttle_ms = 0
        if self.info.closed:
            return
        self._busy = True
        if not self._reading_paused:
            self._reading_paused = True
            assert self._transport is not None
            self._transport.pause_reading()
        self._unmute = asyncio.get_running_loop().call_later(delay_s, self._unmuted)

    def _unmuted(self) -> None:
        self._unmute = None
        self._last_active = time.perf_counter()
        self._busy = False
        if not self.info.closed:
            self._process()

    def answered(self) -> asyncio.Future[None]:
        """Done once the request waiting for a `Later` is answered, or the connection
        gone (shutdown waits for it)."""
        done: asyncio.Future[None] = self.lost.get_loop().create_future()

        def settle(_: object) -> None:
            if not done.done():
                done.set_result(None)

        if self._later is None:
            settle(None)
        else:
            self._later.add_callback(settle)
            self.lost.add_done_callback(settle)
        return done

    def idle_since(self) -> float | None:  # for ads.net.limits
        if (self._busy or self._pending or self._frame is not None or self._end > self._start
                or self.info.closed):
            return None
        return self._last_active

    def close_idle(self) -> None:
        log.info("closing connection from %s: no request for longer than "
                 "connections.max.idle.ms", self.info.peer)
        self._close()

    def _write_bytes(self, chunks: Sequence[Chunk]) -> None:
        if chunks:
            assert self._transport is not None
            started = time.perf_counter()
            self._transport.writelines(chunks)
            if self._on_sent is not None and self._unsent_apis:
                elapsed = time.perf_counter() - started
                for api_key in self._unsent_apis:
                    self._on_sent(api_key, elapsed)
        self._unsent_apis.clear()

    async def _write(self, chunks: Sequence[Chunk]) -> None:
        assert self._transport is not None
        await write_chunks(self._transport, chunks, self._sock_fd,
                           tls=self._ssl_context is not None)

    def _maybe_resume_reading(self) -> None:
        if (self._reading_paused and not self._stopped and len(self._pending) < 16
                and self._pending_bytes < _MAX_READ_AHEAD):
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
        self._received.clear()
        self._unsent_apis.clear()
        self._pending_bytes = 0
        self._frame = None
        self._start = self._end = 0  # unread input is dropped; reads may still land
        if self._transport is not None:
            self._transport.close()


def _api_key(frame: memoryview) -> int:
    """The request's API key, for `on_sent` (-1 for a frame too short to hold one; the
    handler answers none of those)."""
    return frame[0] << 8 | frame[1] if len(frame) > 1 else -1


class KafkaListener:
    """Accepts connections on one host:port and hands their frames to `handler`."""

    def __init__(  # noqa: PLR0913 - a listener's settings, the optional ones by keyword
            self, handler: Handler, host: str, port: int, max_request_size: int,
            on_close: Callable[[ConnectionInfo], None] | None = None,
            on_sent: SentCallback | None = None, listener_name: str = "PLAINTEXT",
            security_protocol: str = "PLAINTEXT",
            limits: ConnectionLimits | None = None,
            sasl_max_receive_size: int | None = None,
            ssl_context: ssl.SSLContext | None = None,
            principal_of: PrincipalOf | None = None) -> None:
        """`sasl_max_receive_size`: the frame size limit of a connection that has not
        authenticated yet (SASL listeners); `ssl_context`: the TLS listener's server context
        (None: plain TCP); `principal_of`: names the principal of a client that shows a
        certificate."""
        self._handler = handler
        self._limits = limits
        self._sasl_max_receive_size = sasl_max_receive_size
        self._ssl_context = ssl_context
        self._principal_of = principal_of
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self._on_sent = on_sent
        self._host = host
        self._port = port
        self._max_request_size = max_request_size
        self._on_close = on_close
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()
        self._stopping = False

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_connection, self._host, self._port, reuse_address=True, backlog=1024)
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    def _make_connection(self) -> KafkaConnection:
        conn = KafkaConnection(self._handler, self._max_request_size, self._closed,
                               self._on_sent, self._limits, self._sasl_max_receive_size,
                               self._ssl_context, self._principal_of)
        conn.info.listener_name = self.listener_name
        conn.info.security_protocol = self.security_protocol
        conn.info.authenticated = not self.security_protocol.startswith("SASL_")
        if self._stopping:
            # Accepted by the kernel before the listener stopped, made into a connection
            # after: aborted as soon as it is made (`connection_made`), never served.
            conn.info.closed = True
        self._connections.add(conn)
        return conn

    def _closed(self, info: ConnectionInfo) -> None:
        # Forget a connection only once asyncio reports it gone: one that is still
        # flushing its last bytes must stay known, so shutdown can wait for it or abort it.
        self._connections = {c for c in self._connections
                             if c.info.connection_id != info.connection_id}
        if self._on_close is not None:
            self._on_close(info)

    def stop_accepting(self) -> None:
        """No new connection is served from now on; `drain` closes the listening socket.

        The listening sockets stop being read here, but the server is closed only at the
        end of `drain`: asyncio (3.11) makes the connections it already accepted a loop pass
        later, and one made after the server is closed is left half-built, its socket to
        the garbage collector. Made while stopping, they are aborted at once instead."""
        self._stopping = True
        if self._server is not None:
            loop = asyncio.get_running_loop()
            for sock in self._server.sockets:
                loop.remove_reader(sock.fileno())

    async def drain(self, grace_s: float) -> None:
        """Answer the requests already received (bounded by `grace_s`), then close."""
        for conn in self._connections:
            conn.stop_reading()
        in_flight: list[asyncio.Future[Any]] = [
            c._task for c in self._connections if c._task is not None]
        in_flight += [c.answered() for c in self._connections if c._later is not None]
        if in_flight:
            await asyncio.wait(in_flight, timeout=grace_s)
        connections = list(self._connections)
        for conn in connections:
            conn._close()
        # close() first flushes buffered output; a peer that stopped reading would keep its
        # socket open past the broker's loop, so it is aborted after a short wait.
        await _wait_lost(connections, 1.0)
        _abort(connections)
        await _wait_lost(connections, 1.0)
        # Connections accepted just before the listener stopped are made a loop pass or
        # two later (asyncio's accept tasks) and aborted as they are made: let them come
        # and go before the server closes (see `stop_accepting`).
        for _ in range(3):
            await asyncio.sleep(0)
        late = [c for c in self._connections if c not in connections and not c.lost.done()]
        _abort(late)
        await _wait_lost(late, 1.0)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def _wait_lost(connections: list[KafkaConnection], timeout_s: float) -> None:
    """Waits up to `timeout_s` for the connections asyncio has not reported gone yet."""
    lost = [c.lost for c in connections if not c.lost.done()]
    if lost:
        await asyncio.wait(lost, timeout=timeout_s)


def _abort(connections: list[KafkaConnection]) -> None:
    """Aborts the transports of the connections not gone yet (their unsent bytes dropped)."""
    for conn in connections:
        if not conn.lost.done() and conn._transport is not None:
            conn._transport.abort()
