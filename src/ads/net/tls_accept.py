"""The server side of TLS on an accepted connection: the handshake and the principal a
client certificate names.

A listener of protocol SSL or SASL_SSL accepts plain TCP and upgrades each connection with
`loop.start_tls`, so a failed handshake (an untrusted or expired certificate, none where
`ssl.client.auth=required`, a client speaking plaintext) is one log line, in Kafka's words,
and that one connection closed; asyncio's own TLS servers drop such failures silently.
Application data that comes with the handshake's end reaches the connection before
start_tls returns: the connection queues it until it has its TLS transport and principal.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("ads.net")

# The handshake of a new connection must end within this (Kafka has no such bound; a client
# that never finishes would otherwise hold a connection forever).
TLS_HANDSHAKE_TIMEOUT_S = 30.0
# The principal of a TLS client from its certificate (DER); raises ValueError to refuse it.
PrincipalOf = Callable[[bytes], str]


class ConnectionInfo(Protocol):
    """What this module reads and sets of `ads.net.server.ConnectionInfo`."""

    closed: bool
    peer: str
    listener_name: str
    principal: str


async def server_handshake(raw: asyncio.Transport, protocol: asyncio.BaseProtocol,
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


def name_principal(tls: asyncio.Transport, principal_of: PrincipalOf | None,
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
