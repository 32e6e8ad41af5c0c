"""A small blocking Kafka-protocol connection: one TCP socket to one broker.

What every synchronous client of ADS needs and nothing more: connect with a timeout, send a
request object (encoded by ``ads.protocol.codec``) or raw frame bytes, read size-prefixed
response frames, decode them and match their correlation ids. The Spark source
(``ads.spark.wire``), the ``ads groups`` command, ``tools/broker_cpu.py`` and the tests'
raw-socket helper all use it; the broker's own outbound connections are asyncio ones
(``ads.net.client``).

Framing (``ads.protocol.codec`` has the byte layout): a response is an int32 size, then
``size`` bytes holding the response header (correlation id) and the body. Sizes outside
``4 <= size <= max_frame_bytes`` fail the connection before anything is allocated.

Pipelining: ``send`` may be called several times before ``receive``; responses come back in
the order the requests were sent (Kafka answers one connection in order), and ``receive``
checks each one's correlation id against the oldest request in flight. ``send_frame`` and
``receive_frame`` move raw bytes and track nothing, for tools and tests that write exact
frames (malformed ones included) and decode answers themselves.

Speed (the Spark reader fetches through this): each response is read with ``recv_into``
straight into one buffer allocated at its exact size, so a fetched record set is a
``memoryview`` of the frame, never copied; the 4-byte size prefix goes into a buffer
allocated once per connection. TCP_NODELAY is set so a small request is not held back.

Errors: everything that goes wrong (cannot connect, timeout, the broker closed the
connection, a frame too large or undecodable, a correlation id that does not match, an
ApiVersions error) raises ``ClientError``; callers with their own exception type translate
it at their boundary. After a failure while sending or receiving, the stream can no longer
be trusted (half a frame may be read), so the connection closes itself and every later call
raises ``ClientError`` too.

Security (``security=``, a ``ads.client.security.ClientSecurity``; make connections with
``ConnectionFactory`` below, from client properties): over SSL and SASL_SSL the
socket is wrapped in TLS before anything is sent, the server's certificate and (unless the
context says not to) its host name checked; over SASL_PLAINTEXT and SASL_SSL the connection
authenticates before it is handed out, as Kafka's clients do: SaslHandshake v1 naming the
mechanism, then SaslAuthenticate v1 tokens until the mechanism is done (SCRAM checks the
server's signature). A refusal raises ``ClientError`` with the broker's error code and
message. When the broker gives the session a lifetime (``connections.max.reauth.ms``,
KIP-368), the connection authenticates again on its own before the first request sent
past 85% of it (with nothing in flight), so long-lived connections outlive their sessions.

Limits: no reconnect, no retries, no metadata cache: that is the callers' business. Not
thread-safe: one thread uses one connection.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import TypeVar

from ads.client.sasl import SaslClientError, sasl_client
from ads.client.security import ClientSecurity
from ads.common.servers import parse_servers
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.codec import decode_response, encode_request
from ads.protocol.errors import ErrorCode, ProtocolError
from ads.protocol.types import BytesLike

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "ClientError",
    "Connection",
    "ConnectionFactory",
    "choose_versions",
    "parse_address",
    "parse_servers",
]

DEFAULT_MAX_FRAME_BYTES = 1 << 30
_SIZE = struct.Struct(">i")
K = TypeVar("K", bound=int)
# Re-authenticate once this share of the session lifetime has passed (librdkafka's choice).
_REAUTH_SHARE = 0.85


class ClientError(Exception):
    """A broker could not be reached, timed out, closed the connection, or sent something
    that cannot be read. ``code`` is set when the broker answered with a Kafka error code;
    ``closed`` when the broker closed the connection (end of stream or reset)."""

    def __init__(self, message: str, *, address: str = "", code: ErrorCode | None = None,
                 closed: bool = False) -> None:
        super().__init__(message)
        self.address = address
        self.code = code
        self.closed = closed


def parse_address(address: str) -> tuple[str, int]:
    """The one ``host:port`` of ``address``; ValueError unless it names exactly one."""
    servers = parse_servers(address)
    if len(servers) != 1:
        raise ValueError(f"{address!r} names {len(servers)} servers, expected one")
    return servers[0]


def choose_versions(ranges: Mapping[int, tuple[int, int]], wanted: Mapping[K, int],
                    minimum: Mapping[K, int] | None = None) -> dict[int, int]:
    """Per API key of ``wanted``, the highest version both sides support, at most the one
    wanted and at least ``minimum`` (default 0); keys with no such version are left out."""
    out: dict[int, int] = {}
    for key, most in wanted.items():
        if key not in ranges:
            continue
        lo, hi = ranges[key]
        version = min(hi, most)
        if version >= max(lo, (minimum or {}).get(key, 0)):
            out[key] = version
    return out


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class Connection:
    """One blocking TCP connection to one broker. ``timeout_s`` bounds the connect and each
    socket operation after it (None: wait forever). ``source_host`` binds the local end to
    that address (the broker sees the client there, e.g. for ACLs that name a host)."""

    def __init__(self, host: str, port: int, *, client_id: str | None = "ads",
                 timeout_s: float | None = 30.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 security: ClientSecurity | None = None,
                 source_host: str | None = None) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._security = security
        self._reauth_at: float | None = None
        self._correlation = 0
        self._inflight: deque[tuple[int, int, int]] = deque()
        self._size = bytearray(4)
        self._size_view = memoryview(self._size)
        self._sock: socket.socket | None = None
        try:
            sock = socket.create_connection(
                (host, port), timeout=timeout_s,
                source_address=(source_host, 0) if source_host else None)
        except OSError as exc:
            raise ClientError(f"cannot connect to broker {self.address}: {exc}",
                              address=self.address) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is not None and security.ssl_context is not None:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
        except (OSError, ValueError) as exc:
            sock.close()
            reason = exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else exc
            raise ClientError(f"TLS handshake with broker {self.address} failed: {reason}",
                              address=self.address) from exc
        self._sock = sock
        if security is not None and security.sasl:
            try:
                self._authenticate()
            except ClientError:
                self.close()
                raise

    @classmethod
    def connect(cls, address: str, *, client_id: str | None = "ads",
                timeout_s: float | None = 30.0,
                max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                source_host: str | None = None) -> Connection:
        """Connects to ``host:port``."""
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            raise ClientError(str(exc), address=address) from exc
        return cls(host, port, client_id=client_id, timeout_s=timeout_s,
                   max_frame_bytes=max_frame_bytes, source_host=source_host)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._sock is None

    @property
    def sock(self) -> socket.socket:
        """The open socket, for callers that probe it directly (e.g. for end of stream)."""
        return self._open()

    @property
    def in_flight(self) -> int:
        """Requests sent with ``send`` whose responses have not been received."""
        return len(self._inflight)

    def settimeout(self, timeout_s: float | None) -> None:
        self._open().settimeout(timeout_s)

    def close(self) -> None:
        """Closes the socket; calling it again does nothing."""
        sock, self._sock = self._sock, None
        self._inflight.clear()
        if sock is not None:
            sock.close()

    # -- requests -------------------------------------------------------------------------
    def send(self, api_key: int, version: int, body: Message) -> int:
        """Sends one request and returns its correlation id; ``receive`` reads the answer."""
        if (self._reauth_at is not None and not self._inflight
                and time.monotonic() >= self._reauth_at):
            self._authenticate()
        self._correlation = correlation = (self._correlation + 1) & 0x7FFFFFFF
        self.send_frame(encode_request(api_key, version, correlation, self.client_id, body))
        self._inflight.append((api_key, version, correlation))
        return correlation

    def receive(self) -> Message:
        """The decoded response to the oldest request in flight."""
        if not self._inflight:
            raise ClientError(f"no request in flight on {self.address}", address=self.address)
        api_key, version, correlation = self._inflight.popleft()
        frame = self.receive_frame()
        try:
            got, body = decode_response(api_key, version, frame)
        except ProtocolError as exc:
            self.close()
            raise ClientError(f"undecodable response from {self.address}: {exc}",
                              address=self.address) from exc
        if got != correlation:
            self.close()
            raise ClientError(f"broker {self.address} answered correlation id {got}, "
                              f"expected {correlation}", address=self.address)
        return body

    def request(self, api_key: int, version: int, body: Message) -> Message:
        """Sends one request and waits for its response (nothing else may be in flight)."""
        self.send(api_key, version, body)
        return self.receive()

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """``(min, max)`` version per API key the broker supports. Asks with ApiVersions v0,
        which every broker understands."""
        response = self.request(m.ApiKey.API_VERSIONS, 0, m.ApiVersionsRequest())
        assert isinstance(response, m.ApiVersionsResponse)
        if response.error_code:
            code = _code(response.error_code)
            raise ClientError(f"ApiVersions failed on {self.address}: {code.name}",
                              address=self.address, code=code)
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def _authenticate(self) -> None:
        """SaslHandshake v1 and SaslAuthenticate v1 until the mechanism is complete."""
        security = self._security
        assert security is not None
        self._reauth_at = None
        mechanism = security.mechanism
        shake = self.request(m.ApiKey.SASL_HANDSHAKE, 1,
                             m.SaslHandshakeRequest(mechanism=mechanism))
        assert isinstance(shake, m.SaslHandshakeResponse)
        if shake.error_code:
            code = _code(shake.error_code)
            self.close()
            raise ClientError(f"broker {self.address} does not offer SASL mechanism "
                              f"{mechanism} (it offers {', '.join(shake.mechanisms) or 'none'})"
                              f": {code.name}", address=self.address, code=code)
        client = sasl_client(mechanism, security.username, security.password)
        token: bytes | None = client.first()
        lifetime_ms = 0
        try:
            while token is not None:
                answer = self.request(m.ApiKey.SASL_AUTHENTICATE, 1,
                                      m.SaslAuthenticateRequest(auth_bytes=token))
                assert isinstance(answer, m.SaslAuthenticateResponse)
                if answer.error_code:
                    code = _code(answer.error_code)
                    self.close()
                    raise ClientError(
                        f"authentication as {security.username} with {mechanism} failed on "
                        f"broker {self.address}: {answer.error_message or code.name}",
                        address=self.address, code=code)
                lifetime_ms = answer.session_lifetime_ms
                token = client.respond(bytes(answer.auth_bytes))
        except SaslClientError as exc:
            self.close()
            raise ClientError(f"authentication with {mechanism} failed on broker "
                              f"{self.address}: {exc}", address=self.address) from exc
        if lifetime_ms > 0:
            self._reauth_at = time.monotonic() + lifetime_ms / 1000.0 * _REAUTH_SHARE

    # -- raw frames -----------------------------------------------------------------------
    def send_frame(self, frame: BytesLike) -> None:
        """Writes ``frame`` as it is (size prefix included, if any)."""
        sock = self._open()
        try:
            sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise self._io_error(exc) from exc

    def receive_frame(self) -> memoryview:
        """The next response frame without its size prefix, as a view of a buffer that
        belongs to the caller from now on."""
        self._read_into(self._size_view)
        (size,) = _SIZE.unpack(self._size)
        if not 4 <= size <= self.max_frame_bytes:
            self.close()
            raise ClientError(f"broker {self.address} sent a frame of {size} bytes",
                              address=self.address)
        frame = memoryview(bytearray(size))
        self._read_into(frame)
        return frame

    def _read_into(self, view: memoryview) -> None:
        sock = self._open()
        n = len(view)
        got = 0
        try:
            while got < n:
                read = sock.recv_into(view[got:], n - got)
                if read == 0:
                    self.close()
                    raise ClientError(f"broker {self.address} closed the connection",
                                      address=self.address, closed=True)
                got += read
        except OSError as exc:
            self.close()
            raise self._io_error(exc) from exc

    def _open(self) -> socket.socket:
        if self._sock is None:
            raise ClientError(f"the connection to {self.address} is closed",
                              address=self.address)
        return self._sock

    def _io_error(self, exc: OSError) -> ClientError:
        if isinstance(exc, TimeoutError):
            return ClientError(f"broker {self.address} timed out", address=self.address)
        closed = isinstance(exc, ConnectionResetError | BrokenPipeError)
        return ClientError(f"broker {self.address} connection failed: {exc}",
                           address=self.address, closed=closed)


class ConnectionFactory:
    """Makes blocking connections secured as the client properties say. The properties are
    read once, here (`ClientConfigError` for a bad one); each call connects, wraps the
    socket in TLS and authenticates (`ClientError` when that fails)."""

    def __init__(self, props: Mapping[str, object] | None = None, *,
                 client_id: str | None = "ads", timeout_s: float | None = 30.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.security = ClientSecurity.from_properties(props or {})
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.max_frame_bytes = max_frame_bytes

    def __call__(self, host: str, port: int) -> Connection:
        return Connection(host, port, client_id=self.client_id, timeout_s=self.timeout_s,
                          max_frame_bytes=self.max_frame_bytes, security=self.security)

    def connect(self, address: str) -> Connection:
        """Connects to `host:port`."""
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            raise ClientError(str(exc), address=address) from exc
        return self(host, port)
