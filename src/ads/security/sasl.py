"""SASL server mechanisms as sans-io state machines, and PLAIN (RFC 4616).

A mechanism server takes each token the client sends (`evaluate`) and returns the token to
answer with; once `complete` it names the authenticated user in `username`. Any failure
raises `SaslAuthenticationError`: its message is what the client is told (Kafka's wording:
nothing that tells a wrong password from an unknown user), its `reason` is for the broker's
log only.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)


class SaslAuthenticationError(Exception):
    """Authentication failed; `str(exc)` is for the client, `reason` for the log."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    username: str | None

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    """SASL/PLAIN: one message `[authzid] NUL authcid NUL passwd`, checked against `users`
    (name → password, from the JAAS `user_<name>="<password>"` options)."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN already complete")
        try:
            parts = token.decode("utf-8").split("\0")
        except UnicodeDecodeError as exc:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from exc
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        expected = self._users.get(username)
        # Compared even for an unknown user, so the answer takes as long either way.
        matches = hmac.compare_digest(password.encode("utf-8"),
                                      (expected if expected is not None else "\0").encode())
        if expected is None or not matches:
            raise SaslAuthenticationError(
                "Authentication failed: Invalid username or password",
                reason=f"PLAIN: {'unknown user' if expected is None else 'wrong password'} "
                       f"{username!r}")
        self.username = username
        self.complete = True
        return b""
