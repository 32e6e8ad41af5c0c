"""SaslHandshake (key 17) v1 and SaslAuthenticate (key 36) v0-2, as Kafka's
SaslServerAuthenticator answers them.

A SASL listener's connection starts unauthenticated: the dispatcher serves it ApiVersions,
SaslHandshake and SaslAuthenticate only. SaslHandshake picks a mechanism the listener
offers; SaslAuthenticate requests carry the mechanism's tokens until it succeeds: the
connection then has its principal (`User:<name>`), and with `connections.max.reauth.ms`
a session lifetime (KIP-368), which SaslAuthenticate v1+ reports to the client.

Failures, as Kafka: a mechanism the listener does not offer is answered
UNSUPPORTED_SASL_MECHANISM with the offered list, bad credentials SASL_AUTHENTICATION_FAILED
with a message that does not tell an unknown user from a wrong password; both answers wait
`connection.failed.authentication.delay.ms` (KIP-306) and close the connection. A SASL
request out of order on a SASL listener is answered ILLEGAL_SASL_STATE and closes it.

Re-authentication (KIP-368): an authenticated client that used SaslAuthenticate v1+ may
send SaslHandshake again with the same mechanism and authenticate again as the same
principal, on the same connection; the session's lifetime starts over. A different
mechanism or principal fails the connection. On a listener without SASL, and after
authentication by a v0 client, SaslHandshake and SaslAuthenticate are answered
ILLEGAL_SASL_STATE and the connection stays (Kafka's request handlers do the same).

SaslHandshake v0 (clients older than Kafka 1.0, and those that pick it): the mechanism's
tokens then follow as bare size-prefixed frames without Kafka headers, answered the same
way (`Authenticator.raw_token`); a failure closes the connection without an answer, after
the delay. Such a client cannot re-authenticate. GSSAPI and OAUTHBEARER are not supported.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from ads.broker.authentication import SaslExchange
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.security.sasl import SaslAuthenticationError

log = logging.getLogger("ads.broker.sasl")

R = TypeVar("R")


async def _after_delay(ctx: RequestContext, response: R) -> R:
    """A failure answer: sent after Kafka's delay (KIP-306), then the connection closes."""
    ctx.connection.close_after_response = True
    delay = ctx.broker.authenticator.failure_delay_s
    if delay > 0:
        await asyncio.sleep(delay)
    return response


def _exchange(ctx: RequestContext) -> SaslExchange | None:
    ex = ctx.connection.sasl
    return ex if isinstance(ex, SaslExchange) else None


def handle_handshake(ctx: RequestContext, req: m.SaslHandshakeRequest
                     ) -> m.SaslHandshakeResponse | Awaitable[m.SaslHandshakeResponse]:
    conn = ctx.connection
    listener = ctx.broker.authenticator.listeners.get(conn.listener_name)
    ex = _exchange(ctx)
    # Re-authentication needs a client that authenticated with SaslAuthenticate v1+, and
    # Kafka headers: v0's bare tokens only ever start a connection.
    if listener is None or (conn.authenticated and (ex is None or not ex.reauth_supported
                                                    or ctx.api_version == 0)):
        return m.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)
    offered = list(listener.mechanisms)
    if ex is not None and ex.server is not None:
        log.info("closing connection from %s: SaslHandshake during a SASL exchange", conn.peer)
        conn.close_after_response = True
        return m.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                       mechanisms=offered)
    unsupported = req.mechanism not in offered
    if conn.authenticated and ex is not None and req.mechanism != ex.mechanism:
        unsupported = True
        log.info("failed re-authentication of %s (%s): mechanism %s differs from %s",
                 conn.peer, conn.principal, req.mechanism, ex.mechanism)
    elif unsupported:
        log.info("failed authentication of %s (listener %s): SASL mechanism %r is not "
                 "enabled (offered: %s)", conn.peer, conn.listener_name, req.mechanism,
                 ", ".join(offered))
    if unsupported:
        return _after_delay(ctx, m.SaslHandshakeResponse(
            error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=offered))
    if ex is None:
        ex = conn.sasl = SaslExchange()
    ex.mechanism = req.mechanism
    ex.server = ctx.broker.authenticator.new_server(listener, req.mechanism)
    ex.reauthenticating = conn.authenticated
    ex.raw_tokens = ctx.api_version == 0
    return m.SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=offered)


def handle_authenticate(ctx: RequestContext, req: m.SaslAuthenticateRequest
                        ) -> m.SaslAuthenticateResponse | Awaitable[m.SaslAuthenticateResponse]:
    conn = ctx.connection
    ex = _exchange(ctx)
    if ex is None or ex.server is None:
        if not conn.authenticated:
            log.info("closing connection from %s: SaslAuthenticate before SaslHandshake",
                     conn.peer)
            conn.close_after_response = True
        return m.SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication"
            if conn.authenticated else "SaslAuthenticate request received before SaslHandshake")
    try:
        token, lifetime_ms = ctx.broker.authenticator.step(
            conn, ex, bytes(req.auth_bytes), reauth_supported=ctx.api_version >= 1)
    except SaslAuthenticationError as exc:
        return _after_delay(ctx, m.SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc)))
    return m.SaslAuthenticateResponse(error_code=ErrorCode.NONE, auth_bytes=token,
                                      session_lifetime_ms=lifetime_ms)


HANDLERS = [
    ApiHandler(m.SaslHandshakeRequest, m.SaslHandshakeResponse, 0, 1, handle_handshake),
    ApiHandler(m.SaslAuthenticateRequest, m.SaslAuthenticateResponse, 0, 2, handle_authenticate),
]
