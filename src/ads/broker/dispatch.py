"""Request dispatch: frame in, response chunks out; the one place errors become Kafka's.

Every handler module registers its APIs in `HANDLERS`: an `ApiHandler` names the API's
request and response classes (checked against the protocol's table of APIs when it is
made, and by mypy against the handler's signature) and the version range it fully
implements; ApiVersions advertises exactly that table. A request that cannot be parsed or
names an unknown API closes its connection, as Kafka does, with a warning saying why. A
version outside the advertised range closes it too; that refusal is logged at INFO once
per client and reason (`refusals.py`), as are the handlers' refusals of missing features
(`RequestContext.refused`). ApiVersions is the exception (KIP-511): an unsupported version
is answered in the v0 layout with UNSUPPORTED_VERSION and our ranges, so a newer client can
retry with a version we know.

Authentication gate: a SASL listener's connection that has not authenticated yet may send
ApiVersions, SaslHandshake and SaslAuthenticate only; any other request closes it, logged,
as Kafka does. A SASL session past its lifetime (`connections.max.reauth.ms`, KIP-368) that
has not re-authenticated is closed when its next request other than SaslHandshake or
SaslAuthenticate arrives. Connections of other listeners pay one attribute test per request.

Quotas (`ads.broker.quotas`): the produce and fetch handlers measure their bytes against
the client's byte-rate quotas themselves (`RequestContext.throttle`); here, with a
`request_percentage` quota set, each request's handler time is measured against it. A
throttled response carries the larger throttle in its `throttle_time_ms`, and the
connection is muted that long once it is written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Generic, NoReturn, TypeVar

from ads.broker.authentication import SaslExchange
from ads.broker.authorized_operations import (
    ALLOW_ALL,
    AclOperation,
    ResourceType,
    authorized_operations,
)
from ads.broker.context import BrokerContext
from ads.broker.metrics import BrokerMetrics
from ads.broker.refusals import RefusalLog
from ads.common.later import Later
from ads.net.server import CloseConnection, ConnectionInfo, Response
from ads.protocol import codec
from ads.protocol.base import Message
from ads.protocol.codec import RequestHeader
from ads.protocol.errors import DecodeError, ErrorCode, UnknownApiKeyError, UnsupportedVersionError
from ads.protocol.messages import API_KEYS, ApiKey

log = logging.getLogger("ads.broker")

# Not measured against request quotas, as in Kafka: what a client needs to connect and
# authenticate, and other brokers' requests (cluster actions).
_REQUEST_QUOTA_EXEMPT = frozenset({
    ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS})

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

_PRE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                 ApiKey.SASL_AUTHENTICATE})
_SASL = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class ApiHandler(Generic[Req, Resp]):
    """One API served: its request and response classes, the versions it fully implements
    and its handler, which answers at once, with an awaitable, or with a `Later` (a fetch
    that waits; None: no response, an acks=0 produce). Made once per API at import; its
    fields are Final.

    A plain class, not a frozen dataclass: this module is compiled with mypyc
    (tools/build_compiled.py), which cannot compile a generic dataclass."""

    def __init__(self, request: type[Req], response: type[Resp], min_version: int,
                 max_version: int,
                 fn: Callable[[RequestContext, Req],
                              Resp | None | Awaitable[Resp | None] | Later[Resp]]
                 ) -> None:
        key = request.API_KEY
        classes = API_KEYS.get(key) if key is not None else None
        if classes is None or key is None or classes[1:] != (request, response):
            raise TypeError(f"{request.__name__} and {response.__name__} are not "
                            "the request and response of one API")
        low, high = request.VALID_VERSIONS
        if not low <= min_version <= max_version <= high:
            raise ValueError(f"{classes[0]} versions {min_version}-{max_version} "
                             f"outside the schema's {low}-{high}")
        self.request: Final = request
        self.response: Final = response
        self.min_version: Final = min_version
        self.max_version: Final = max_version
        self.fn: Final = fn
        self.api_key: Final[int] = key


@dataclass(slots=True)
class RequestContext:
    broker: BrokerContext
    dispatcher: Dispatcher
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: ConnectionInfo
    request_size: int = 0  # bytes of the request frame
    quota_exempt: bool = False  # a follower's fetch: replication is not a client's quota

    def throttle(self, throttle_ms: int) -> None:
        """The client is over a quota: its connection is muted for `throttle_ms` after this
        request's response (the longest of its quotas' throttles)."""
        if throttle_ms > self.connection.throttle_ms:
            self.connection.throttle_ms = throttle_ms

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The KIP-430 bit set of what this request's principal may do to the resource."""
        return authorized_operations(self.broker.operations_authorizer, self.connection,
                                     resource_type, name)

    @property
    def authorizing(self) -> bool:
        """Whether an authorizer decides (`authorizer.class.name` is set)."""
        return self.broker.operations_authorizer is not ALLOW_ALL

    def authorize(self, resource_type: ResourceType, name: str,
                  operation: AclOperation) -> bool:
        """Whether this request's principal may perform `operation` on the resource (the
        operations each API requires: `ads.broker.permissions`)."""
        return self.broker.operations_authorizer.authorize(
            self.connection.principal, self.connection.host, resource_type, name,
            operation)

    def authorize_any(self, resource_type: ResourceType, operation: AclOperation) -> bool:
        """Whether the principal may perform `operation` on some resource of the type."""
        return self.broker.operations_authorizer.authorize_any(
            self.connection.principal, self.connection.host, resource_type, operation)

    def refused(self, reason: str) -> None:
        """Logs, once per client and reason, that this request met a missing feature."""
        self.dispatcher.refusals.refused(self.connection.peer, self.client_id, reason)


class Dispatcher:
    def __init__(self, broker: BrokerContext, handlers: list[ApiHandler[Any, Any]],
                 metrics: BrokerMetrics | None = None) -> None:
        self._broker = broker
        self.handlers = {h.api_key: h for h in handlers}
        self.refusals = RefusalLog(log)
        # Requests per API and version and their latency, from the decoded header to the
        # encoded response (Kafka's local plus remote time: waits in purgatory included),
        # and their queue time: from the frame's arrival (`ConnectionInfo.received_s`, set
        # by the network layer) to this call. Send time is the network layer's to measure:
        # the broker hands `metrics.response_sent` to the listener.
        self.metrics = metrics or BrokerMetrics()
        self._quotas = broker.quotas

    def api_ranges(self) -> list[tuple[int, int, int]]:
        return sorted((h.api_key, h.min_version, h.max_version) for h in self.handlers.values())

    def __call__(  # noqa: C901 - the request path in order, each branch a refusal or an outcome
            self, frame: memoryview, conn: ConnectionInfo
    ) -> Response | Awaitable[Response] | Later[Response]:
        started = time.perf_counter()
        if not conn.authenticated:
            ex = conn.sasl
            if isinstance(ex, SaslExchange) and ex.raw_tokens and ex.server is not None:
                return self._broker.authenticator.raw_token(frame, conn, ex)
        try:
            header, body_offset = codec.decode_request_header(frame)
        except UnsupportedVersionError as exc:
            return self._unsupported(exc, conn)
        except UnknownApiKeyError as exc:
            log.warning("closing connection from %s: unknown API key %s", conn.peer, exc)
            raise CloseConnection from exc
        except DecodeError as exc:
            log.warning("closing connection from %s: malformed request header: %s", conn.peer, exc)
            raise CloseConnection from exc
        if not conn.authenticated or conn.session_deadline:
            _authentication_gate(header.api_key, header.client_id, conn)

        handler = self.handlers.get(header.api_key)
        if handler is None or not handler.min_version <= header.api_version <= handler.max_version:
            return self._not_served(header, handler, conn)
        try:
            request = codec.decode_request_body(
                header.api_key, header.api_version, frame, body_offset)
        except DecodeError as exc:
            # The client id is quoted (%r): it is the sender's text, and a line break in it
            # would forge log lines.
            log.warning(
                "closing connection from %s (client %r): malformed %s v%d request: %s",
                conn.peer, header.client_id, _api_name(header.api_key), header.api_version, exc)
            raise CloseConnection from exc

        ctx = RequestContext(
            self._broker, self, header.api_key, header.api_version, header.correlation_id,
            header.client_id, conn, len(frame))
        try:
            result = handler.fn(ctx, request)
            # Handlers answer with a message, None, an awaitable or a Later: two cheap
            # tests spare the slower ones on every request answered at once.
            if result is not None and not isinstance(result, Message):
                return self._later(ctx, result, started, started - conn.received_s,
                                   time.perf_counter() - started)
            if self._quotas.request.enabled and header.api_key not in _REQUEST_QUOTA_EXEMPT:
                self._request_quota(ctx, result, time.perf_counter() - started)
            # Encoding is part of handling: a response the handler built wrongly is the
            # handler's bug, logged as one, and closes only this connection.
            response = self._encode(ctx, result)
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("error handling %s v%d from %s; closing the connection",
                          _api_name(header.api_key), header.api_version, conn.peer)
            raise CloseConnection from exc
        self.metrics.request_done(header.api_key, header.api_version,
                                  time.perf_counter() - started, started - conn.received_s)
        return response

    def _later(self, ctx: RequestContext, pending: Awaitable[Any] | Later[Any],
               started: float, queued_s: float, handler_s: float
               ) -> Awaitable[Response] | Later[Response]:
        """The answer of a handler that answers later, encoded when it comes: a `Later`
        (a parked fetch) in the step that completes it, an awaitable in a task."""
        if isinstance(pending, Later):
            return pending.then(partial(self._finished, ctx, started, queued_s, handler_s))
        return self._finish(ctx, pending, started, queued_s, handler_s)

    async def _finish(self, ctx: RequestContext, pending: Awaitable[Any],
                      started: float, queued_s: float, handler_s: float) -> Response:
        try:
            body = await pending
        except CloseConnection:
            raise
        except Exception as exc:
            self._failed(ctx, exc)
        return self._finished(ctx, started, queued_s, handler_s, body)

    def _finished(self, ctx: RequestContext, started: float, queued_s: float,
                  handler_s: float, body: Any) -> Response:
        """A handler's later answer, encoded (the rest of `__call__` for it)."""
        try:
            if self._quotas.request.enabled and ctx.api_key not in _REQUEST_QUOTA_EXEMPT:
                # Only the handler's own time counts: waiting in purgatory uses no thread.
                self._request_quota(ctx, body, handler_s)
            response = self._encode(ctx, body)
        except CloseConnection:
            raise
        except Exception as exc:
            self._failed(ctx, exc)
        self.metrics.request_done(ctx.api_key, ctx.api_version,
                                  time.perf_counter() - started, queued_s)
        return response

    @staticmethod
    def _failed(ctx: RequestContext, exc: Exception) -> NoReturn:
        log.error("error handling %s v%d from %s; closing the connection",
                  _api_name(ctx.api_key), ctx.api_version, ctx.connection.peer,
                  exc_info=exc)
        raise CloseConnection from exc

    def _request_quota(self, ctx: RequestContext, body: Any, handler_s: float) -> None:
        """Kafka's request quota: handler time in percent of a thread (100 = 1 s/s)."""
        if ctx.quota_exempt:
            return
        throttle_ms = self._quotas.request.record(
            ctx.connection.principal, ctx.client_id, handler_s * 100.0,
            self._broker.clock.time_ms())
        if throttle_ms:
            ctx.throttle(throttle_ms)
        if body is not None and ctx.connection.throttle_ms > getattr(
                body, "throttle_time_ms", ctx.connection.throttle_ms):
            body.throttle_time_ms = ctx.connection.throttle_ms

    @staticmethod
    def _encode(ctx: RequestContext, body: Any) -> Response:
        if body is None:  # acks=0 produce: no response at all
            return None
        return codec.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, body)

    def _not_served(self, header: RequestHeader, handler: ApiHandler[Any, Any] | None,
                    conn: ConnectionInfo) -> Response:
        """A request of an API or version no handler serves: ApiVersions is answered with
        UNSUPPORTED_VERSION and the supported ranges, anything else closes the connection."""
        api = f"{_api_name(header.api_key)} v{header.api_version}"
        if header.api_key == ApiKey.API_VERSIONS:
            self.refusals.refused(conn.peer, header.client_id, f"{api} is not supported: "
                                  "answered UNSUPPORTED_VERSION with the supported ranges")
            return self._api_versions_fallback(header.correlation_id)
        supported = ("not implemented" if handler is None
                     else f"supported {handler.min_version}-{handler.max_version}")
        self.refusals.refused(conn.peer, header.client_id, f"{api} is not supported "
                              f"({supported}): the connection is closed, as Kafka does")
        raise CloseConnection

    def _unsupported(self, exc: UnsupportedVersionError, conn: ConnectionInfo) -> Response:
        api = f"{_api_name(exc.api_key)} v{exc.api_version}"
        if exc.api_key == ApiKey.API_VERSIONS and exc.correlation_id is not None:
            self.refusals.refused(conn.peer, None, f"{api} is not supported: answered "
                                  "UNSUPPORTED_VERSION with the supported ranges")
            return self._api_versions_fallback(exc.correlation_id)
        self.refusals.refused(conn.peer, None, f"{api} is not supported: the connection is "
                              "closed, as Kafka does")
        raise CloseConnection from exc

    def _api_versions_fallback(self, correlation_id: int) -> Response:
        return [codec.encode_api_versions_fallback(
            correlation_id, ErrorCode.UNSUPPORTED_VERSION, self.api_ranges())]


def _authentication_gate(api_key: int, client_id: str | None, conn: ConnectionInfo) -> None:
    """Raises CloseConnection for a request the connection's SASL state does not allow."""
    if not conn.authenticated:
        if api_key in _PRE_AUTHENTICATION:
            return
        log.warning("closing connection from %s (client %s, listener %s): %s before SASL "
                    "authentication; only ApiVersions, SaslHandshake and SaslAuthenticate are "
                    "served until then", conn.peer, client_id, conn.listener_name,
                    _api_name(api_key))
        raise CloseConnection
    if conn.received_s > conn.session_deadline and api_key not in _SASL:
        log.info("closing connection from %s (%s, listener %s): its SASL session expired "
                 "(connections.max.reauth.ms) without re-authentication", conn.peer,
                 conn.principal, conn.listener_name)
        raise CloseConnection


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"
