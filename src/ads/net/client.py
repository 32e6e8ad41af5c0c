"""An outbound asyncio connection to another broker, for follower fetchers and the
transaction marker sender.

Theory of operation: one TCP connection carries any number of requests at once. ``request``
assigns the next correlation id, registers a future under it, writes the encoded frame
(``ads.protocol.codec``) and waits; one reader task per connection reads size-prefixed
response frames, looks the correlation id up and completes that future with the decoded
body. Kafka answers one connection in order, but nothing here relies on it: matching is by
correlation id.

Rules:

- Frame sizes outside ``4 <= size <= max_frame_bytes`` fail the connection before anything
  is allocated.
- A request that waits longer than its timeout raises ``RequestTimeoutError``; its answer,
  if it comes later, is read and dropped, and the connection stays usable. (Kafka's Java
  client closes the connection instead; callers that want that call ``close``.)
- A request whose caller is cancelled is forgotten the same way.
- When the connection fails (the broker closes it, a read or write fails, an answer cannot
  be decoded or carries an unknown correlation id) or is closed by ``close``, every
  pending request fails with ``ConnectionLostError``, and so does every later request.
- ``close`` may be called any number of times, from any task of the loop.

Errors are all ``NetClientError``: ``ConnectError`` (could not connect in time),
``RequestTimeoutError``, ``ConnectionLostError``. Socket and codec exceptions never leave
this module.

TLS: ``connect(..., ssl_context=...)`` (a context from ``ads.client.tls``) wraps the connection
before the first request; a failed handshake is a ``ConnectError``. The host name checked
against the certificate is the one connected to unless ``server_hostname`` says otherwise.

SASL: ``connect(..., authenticate=...)`` runs the owner's SASL exchange (a coroutine given
a ``send`` function for its SaslHandshake and SaslAuthenticate requests, returning the
session lifetime in ms, 0 for none) before the connection is handed out; it raises
``AuthenticationError`` when the peer refuses. This module knows no mechanism: the broker
layer builds the exchange, as it builds the TLS context. When the peer gave a session
lifetime (KIP-368), the first request past ``REAUTH_SHARE`` of it waits for the requests in
flight to be answered, runs the exchange again on the same connection, then goes out; the
requests made meanwhile wait for it. A failed re-authentication fails the connection.

Limits: no reconnect (the owner makes a new connection); no flow control beyond the
transport's write buffer (``drain``). Not thread-safe: use it from the loop that connected it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ads.protocol.base import Message
from ads.protocol.codec import decode_response, encode_request
from ads.protocol.errors import ProtocolError

__all__ = [
    "Authenticate",
    "AuthenticationError",
    "BrokerConnection",
    "ConnectError",
    "ConnectionLostError",
    "NetClientError",
    "RequestTimeoutError",
]

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 << 20
# Correlation ids of abandoned requests kept to recognise their late answers.
_MAX_ABANDONED = 10_000
# Re-authenticate once this share of the session lifetime has passed (Kafka's clients pick
# between 85 and 95 %), leaving time for the requests in flight to be answered first.
REAUTH_SHARE = 0.85

# One request on the connection, outside the re-authentication gate.
Send = Callable[[int, int, Message], Awaitable[Message]]
# The SASL exchange: sends its requests with `send`, returns the session lifetime in ms.
Authenticate = Callable[[Send], Awaitable[int]]


class NetClientError(Exception):
    """A request to another broker could not be completed."""

    def __init__(self, message: str, address: str) -> None:
        super().__init__(message)
        self.address = address


class ConnectError(NetClientError):
    """The connection could not be opened within the timeout."""


class AuthenticationError(NetClientError):
    """The peer refused this broker's credentials, or the exchange could not go on."""


class RequestTimeoutError(NetClientError):
    """No answer within the request's timeout; the connection stays open."""


class ConnectionLostError(NetClientError):
    """The connection closed or failed before the answer came."""


@dataclass(slots=True)
class _Pending:
    api_key: int
    api_version: int
    future: asyncio.Future[Message]


class BrokerConnection:
    """One connection to one broker; make it with ``await BrokerConnection.connect(...)``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 address: str, *, client_id: str | None, request_timeout_s: float,
                 max_frame_bytes: int, authenticate: Authenticate | None = None) -> None:
        self.address = address
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.max_frame_bytes = max_frame_bytes
        self._reader = reader
        self._writer = writer
        self._correlation = 0
        self._pending: dict[int, _Pending] = {}
        self._abandoned: dict[int, None] = {}  # insertion-ordered, so the oldest go first
        self._failure: ConnectionLostError | None = None
        self._authenticate = authenticate
        self._reauth_at: float | None = None  # loop time
        self._reauthenticating: asyncio.Future[None] | None = None
        self._reading = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def connect(  # noqa: PLR0913 - the address, then connection settings by keyword
            cls, host: str, port: int, *, client_id: str | None = "ads-broker",
            connect_timeout_s: float = 10.0, request_timeout_s: float = 30.0,
            max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
            ssl_context: ssl.SSLContext | None = None,
            server_hostname: str | None = None,
            authenticate: Authenticate | None = None) -> BrokerConnection:
        address = f"{host}:{port}"
        try:
            async with asyncio.timeout(connect_timeout_s):
                if ssl_context is None:
                    reader, writer = await asyncio.open_connection(host, port)
                else:
                    reader, writer = await asyncio.open_connection(
                        host, port, ssl=ssl_context, server_hostname=server_hostname or host,
                        ssl_handshake_timeout=connect_timeout_s)
        except TimeoutError as exc:
            raise ConnectError(f"connecting to {address} timed out after "
                               f"{connect_timeout_s} s", address) from exc
        except OSError as exc:
            raise ConnectError(f"cannot connect to {address}: {exc}", address) from exc
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = cls(reader, writer, address, client_id=client_id,
                   request_timeout_s=request_timeout_s, max_frame_bytes=max_frame_bytes,
                   authenticate=authenticate)
        if authenticate is not None:
            try:
                await conn._run_authenticate()
            except BaseException:
                await conn.close()
                raise
        return conn

    @property
    def closed(self) -> bool:
        return self._failure is not None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def request(self, api_key: int, api_version: int, body: Message, *,
                      timeout_s: float | None = None) -> Message:
        """Sends one request and returns its decoded response. ``timeout_s`` defaults to
        the connection's ``request_timeout_s``."""
        if self._reauth_at is not None and self._reauthenticating is None \
                and asyncio.get_running_loop().time() >= self._reauth_at:
            self._reauthenticating = asyncio.ensure_future(self._reauthenticate())
        if self._reauthenticating is not None:
            await asyncio.shield(self._reauthenticating)
        return await self._send(api_key, api_version, body, timeout_s=timeout_s)

    async def _run_authenticate(self) -> None:
        assert self._authenticate is not None
        try:
            lifetime_ms = await self._authenticate(self._send)
        except AuthenticationError as exc:
            raise AuthenticationError(f"{self.address}: {exc}", self.address) from None
        self._reauth_at = (asyncio.get_running_loop().time()
                           + lifetime_ms / 1000.0 * REAUTH_SHARE) if lifetime_ms > 0 else None

    async def _reauthenticate(self) -> None:
        """KIP-368: the exchange again, once nothing is in flight (Kafka's brokers take no
        other request during it)."""
        try:
            while self._pending and self._failure is None:
                await asyncio.wait([p.future for p in self._pending.values()])
            await self._run_authenticate()
        except NetClientError as exc:
            self._fail(f"re-authentication to {self.address} failed: {exc}")
            raise ConnectionLostError(str(self._failure), self.address) from exc
        finally:
            self._reauthenticating = None

    async def _send(self, api_key: int, api_version: int, body: Message, *,
                    timeout_s: float | None = None) -> Message:
        if self._failure is not None:
            raise ConnectionLostError(str(self._failure), self.address)
        self._correlation = correlation = (self._correlation + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, api_version, correlation, self.client_id, body)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        # Registered before the write, so the answer always finds its request.
        self._pending[correlation] = _Pending(api_key, api_version, future)
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(frame)
                await self._writer.drain()
                return await future
        except TimeoutError as exc:
            self._abandon(correlation)
            raise RequestTimeoutError(f"no answer from {self.address} to API {api_key} "
                                      f"within {timeout} s", self.address) from exc
        except OSError as exc:
            self._fail(f"writing to {self.address} failed: {exc}")
            raise ConnectionLostError(str(self._failure), self.address) from exc
        except asyncio.CancelledError:
            self._abandon(correlation)
            raise

    async def close(self) -> None:
        """Closes the connection and fails every pending request; idempotent."""
        self._fail(f"the connection to {self.address} was closed")
        if not self._reading.done():
            self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    def _abandon(self, correlation: int) -> None:
        if self._pending.pop(correlation, None) is not None and self._failure is None:
            self._abandoned[correlation] = None
            if len(self._abandoned) > _MAX_ABANDONED:
                del self._abandoned[next(iter(self._abandoned))]

    def _fail(self, reason: str) -> None:
        if self._failure is not None:
            return
        self._failure = ConnectionLostError(reason, self.address)
        pending, self._pending = self._pending, {}
        self._abandoned.clear()
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(ConnectionLostError(reason, self.address))
        self._writer.close()

    async def _read_loop(self) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await self._reader.readexactly(4))
                if not 4 <= size <= self.max_frame_bytes:
                    self._fail(f"{self.address} sent a frame of {size} bytes")
                    return
                frame = memoryview(await self._reader.readexactly(size))
                (correlation,) = _SIZE.unpack_from(frame)
                pending = self._pending.pop(correlation, None)
                if pending is None:
                    if correlation in self._abandoned:
                        del self._abandoned[correlation]
                        continue
                    self._fail(f"{self.address} answered unknown correlation id "
                               f"{correlation}")
                    return
                self._complete(pending, frame)
                if self._failure is not None:
                    return
        except asyncio.IncompleteReadError:
            self._fail(f"{self.address} closed the connection")
        except OSError as exc:
            self._fail(f"reading from {self.address} failed: {exc}")

    def _complete(self, pending: _Pending, frame: memoryview) -> None:
        if pending.future.done():  # cancelled while its answer was on the way
            return
        try:
            _, body = decode_response(pending.api_key, pending.api_version, frame)
        except ProtocolError as exc:
            # A broker that sends what it should not is not trusted with the other requests.
            reason = f"undecodable answer from {self.address}: {exc}"
            pending.future.set_exception(ConnectionLostError(reason, self.address))
            self._fail(reason)
            return
        pending.future.set_result(body)
