"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server side.

The exchange, on the server:

    client-first  "n,[a=authzid],n=<user>,r=<client nonce>[,ext...]"
    server-first  "r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>"
    client-final  "c=<base64 gs2 header>,r=<both nonces>,p=<base64 ClientProof>"
    server-final  "v=<base64 ServerSignature>"

with SaltedPassword = Hi(password, salt, i) (PBKDF2-HMAC), ClientKey = HMAC(SaltedPassword,
"Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key"),
AuthMessage = client-first-bare "," server-first "," client-final-without-proof,
ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage). The server keeps only salt,
StoredKey, ServerKey and i: it recovers ClientKey from the proof and checks its hash.

Credentials are stored as Kafka stores them (the user's entity config, key = mechanism
name): `salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`.

The client-final nonce must end with the server-first one (the client's nonce, then the
server's); Kafka accepts a longer one too, and old librdkafka versions send one.

An unknown user gets a server-first message like anyone else's (a salt derived from the
name, so it is the same each time) and fails at the proof, with the same message as a wrong
password: the exchange does not tell who exists. Comparisons of secrets are constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from ads.security.sasl import SCRAM_SHA_256, SCRAM_SHA_512, SaslAuthenticationError

# AlterUserScramCredentials' bounds on iterations (Kafka: 4096 ≤ i ≤ 16384).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str
    type_id: int  # the mechanism number of the SCRAM credential APIs

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i) of RFC 5802: PBKDF2 with this hash, one block long."""
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)

    def credential(self, salt: bytes, salted_password: bytes, iterations: int
                   ) -> ScramCredential:
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(salt, self.h(client_key),
                               self.hmac(salted_password, b"Server Key"), iterations)


MECHANISMS = {m.name: m for m in (ScramMechanism(SCRAM_SHA_256, "sha256", 1),
                                  ScramMechanism(SCRAM_SHA_512, "sha512", 2))}
BY_TYPE = {m.type_id: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @staticmethod
    def from_config(text: str) -> ScramCredential:
        """Parses the stored form; ValueError if it is not one."""
        fields = dict(item.partition("=")[::2] for item in text.split(","))
        try:
            return ScramCredential(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]))
        except (KeyError, binascii.Error) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from exc


CredentialLookup = Callable[[str], "ScramCredential | None"]


def _invalid(mechanism: str, reason: str) -> SaslAuthenticationError:
    return SaslAuthenticationError(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}", reason=f"{mechanism}: {reason}")


def _decode_saslname(name: str) -> str | None:
    """RFC 5802's saslname: "=2C" is ",", "=3D" is "="; any other "=" is malformed."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1:i + 3]
            if code not in ("2C", "3D"):
                return None
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _valid_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


class ScramServer:
    """One SCRAM exchange. `lookup(user)` gives the user's credential or None;
    `server_nonce` is for tests (a fresh random one otherwise); `secret` keys the fake salts
    of unknown users (one per broker, so they stay the same across exchanges)."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup, secret: bytes,
                 server_nonce: str | None = None) -> None:
        self.mechanism = mechanism.name
        self._mech = mechanism
        self._lookup = lookup
        self._secret = secret
        self._server_nonce = server_nonce or secrets.token_urlsafe(24)
        self._step = 0
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.complete = False
        self.username: str | None = None
        self._user = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _invalid(self.mechanism, "message is not UTF-8") from exc
        if self._step == 0:
            self._step = 1
            return self._client_first(text).encode()
        if self._step == 1:
            self._step = 2
            return self._client_final(text).encode()
        raise _invalid(self.mechanism, "message after the exchange ended")

    def _client_first(self, text: str) -> str:
        cbind, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or cbind not in ("n", "y"):
            # "p=...": channel binding, which Kafka does not offer either
            raise _invalid(self.mechanism, f"unsupported or malformed GS2 header in {text!r}")
        if authzid and not authzid.startswith("a="):
            raise _invalid(self.mechanism, "malformed authorization id")
        attrs = bare.split(",")
        if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r="):
            raise _invalid(self.mechanism, f"malformed client-first message {bare!r}")
        user = _decode_saslname(attrs[0][2:])
        nonce = attrs[1][2:]
        if not user or not _valid_nonce(nonce):
            raise _invalid(self.mechanism, "malformed user name or nonce")
        if any(not a.partition("=")[1] or not a.partition("=")[0].isalnum() for a in attrs[2:]):
            raise _invalid(self.mechanism, f"malformed extension in {bare!r}")
        extensions = dict(a.partition("=")[::2] for a in attrs[2:])
        if extensions.get("tokenauth", "false").lower() == "true":
            raise _invalid(self.mechanism, "delegation tokens are not supported")
        if authzid and _decode_saslname(authzid[2:]) != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username")
        credential = self._lookup(user)
        self._known = credential is not None
        if credential is None:
            salt = self._mech.hmac(self._secret, user.encode())[:24]
            credential = ScramCredential(salt, b"\0" * len(salt), b"\0" * len(salt),
                                         MIN_ITERATIONS)
        self._credential = credential
        self._user = user
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = nonce + self._server_nonce
        salt_b64 = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt_b64},i={credential.iterations}"
        return self._server_first

    def _client_final(self, text: str) -> str:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attrs = without_proof.split(",")
        if not sep or len(attrs) < 2 or not attrs[0].startswith("c=") \
                or not attrs[1].startswith("r="):
            raise _invalid(self.mechanism, "malformed client-final message")
        expected_cbind = base64.b64encode(self._gs2_header.encode()).decode()
        if not hmac.compare_digest(attrs[0][2:].encode(), expected_cbind.encode()):
            raise _invalid(self.mechanism, "channel binding differs from the GS2 header")
        # The nonce must end with the client's own followed by ours. As Kafka, more may come
        # before it: librdkafka before 1.x sends its client nonce twice.
        nonce = attrs[1][2:].encode()
        expected_nonce = self._nonce.encode()
        if not (len(nonce) >= len(expected_nonce)
                and hmac.compare_digest(nonce[len(nonce) - len(expected_nonce):],
                                        expected_nonce)):
            raise _invalid(self.mechanism, "invalid nonce in the client-final message")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except binascii.Error as exc:
            raise _invalid(self.mechanism, "proof is not base64") from exc
        credential = self._credential
        assert credential is not None
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        signature = self._mech.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise _invalid(self.mechanism, "proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        matches = hmac.compare_digest(self._mech.h(client_key), credential.stored_key)
        if not (matches and self._known):
            raise _invalid(self.mechanism, f"{'wrong password for' if self._known else 'unknown'}"
                                           f" user {self._user!r}")
        self.username = self._user
        self.complete = True
        server_signature = self._mech.hmac(credential.server_key, auth_message)
        return "v=" + base64.b64encode(server_signature).decode()
