"""SASL client mechanisms, sans-io: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677).

What a client of ADS (the blocking `Connection`, the broker's own connections to other
brokers) sends in SaslAuthenticate: `first()` is the first token, `respond(challenge)` the
answer to each token the server sends back, until `complete`. The last SCRAM message from
the server carries its signature, checked here: a server that does not hold the user's
credential cannot fake it. A failure raises `SaslClientError`.

The SCRAM arithmetic (`ScramHash`) is shared with the broker's server side
(`ads.security.scram`), which sits in a higher layer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"


class SaslClientError(Exception):
    """The exchange cannot go on: a malformed or forged server message."""


@dataclass(frozen=True, slots=True)
class ScramHash:
    """RFC 5802's H, HMAC and Hi for one hash function."""

    name: str
    hash_name: str

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i): PBKDF2 with this hash, one block long."""
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)


SCRAM_HASHES = {h.name: h for h in (ScramHash(SCRAM_SHA_256, "sha256"),
                                    ScramHash(SCRAM_SHA_512, "sha512"))}


class SaslClient(Protocol):
    mechanism: str
    complete: bool

    def first(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token to send; None once nothing more is to be sent."""
        ...


class PlainClient:
    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\0{username}\0{password}".encode()
        self.complete = False

    def first(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        self.complete = True  # the server answers PLAIN with an empty token
        return None


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """`nonce` is for tests (a fresh random one otherwise)."""

    def __init__(self, scram: ScramHash, username: str, password: str,
                 nonce: str | None = None) -> None:
        self.mechanism = scram.name
        self._hash = scram
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature = b""
        self._step = 0
        self.complete = False

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        try:
            text = challenge.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SaslClientError(f"{self.mechanism}: server message is not UTF-8") from exc
        if self._step == 0:
            self._step = 1
            return self._client_final(text).encode()
        if self._step == 1:
            self._verify(text)
            self.complete = True
            return None
        raise SaslClientError(f"{self.mechanism}: message after the exchange ended")

    def _client_final(self, server_first: str) -> str:
        attrs = dict(a.partition("=")[::2] for a in server_first.split(","))
        nonce, salt_b64, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslClientError(f"{self.mechanism}: the server's nonce does not extend ours")
        if salt_b64 is None or not iterations.isdigit():
            raise SaslClientError(f"{self.mechanism}: malformed server-first message")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except binascii.Error as exc:
            raise SaslClientError(f"{self.mechanism}: salt is not base64") from exc
        h = self._hash
        salted = h.salted_password(self._password, salt, int(iterations))
        client_key = h.hmac(salted, b"Client Key")
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = h.hmac(h.h(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = h.hmac(h.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}"

    def _verify(self, server_final: str) -> None:
        if server_final.startswith("e="):
            raise SaslClientError(f"{self.mechanism}: server refused: {server_final[2:]}")
        if not server_final.startswith("v="):
            raise SaslClientError(f"{self.mechanism}: malformed server-final message")
        try:
            signature = base64.b64decode(server_final[2:], validate=True)
        except binascii.Error as exc:
            raise SaslClientError(f"{self.mechanism}: signature is not base64") from exc
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError(f"{self.mechanism}: the server's signature is wrong")


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """The client for `mechanism` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); ValueError for
    another."""
    if mechanism.upper() == PLAIN:
        return PlainClient(username, password)
    if mechanism.upper() in SCRAM_HASHES:
        return ScramClient(SCRAM_HASHES[mechanism.upper()], username, password)
    raise ValueError(f"unsupported SASL mechanism {mechanism!r} (PLAIN, SCRAM-SHA-256 or "
                     "SCRAM-SHA-512)")
