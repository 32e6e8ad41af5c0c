"""SCRAM server checked against the RFCs' example exchanges and its failure cases."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ads.security.sasl import PlainServer, SaslAuthenticationError
from ads.security.scram import MECHANISMS, ScramCredential, ScramMechanism, ScramServer

SHA1 = ScramMechanism("SCRAM-SHA-1", "sha1", 0)
SHA256 = MECHANISMS["SCRAM-SHA-256"]
SHA512 = MECHANISMS["SCRAM-SHA-512"]
SECRET = b"broker secret"


def _credential(mech: ScramMechanism, password: str, salt_b64: str, i: int) -> ScramCredential:
    salt = base64.b64decode(salt_b64)
    return mech.credential(salt, mech.salted_password(password.encode(), salt, i), i)


# (mechanism, salt, client-first, server nonce suffix, client-final, server-final)
RFC_EXCHANGES = [
    pytest.param(SHA1, "QSXCR+Q6sek8bf92", "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
                 "3rfcNHYJY1ZVvWVs7j",
                 "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                 "p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
                 "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=", id="rfc5802-sha1"),
    pytest.param(SHA256, "W22ZaJ0SNY7soEsUEjb6gQ==", "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                 "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                 "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                 "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                 "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", id="rfc7677-sha256"),
]


@pytest.mark.parametrize(("mech", "salt", "first", "snonce", "final", "server_final"),
                         RFC_EXCHANGES)
def test_scram_server_rfc_example(mech: ScramMechanism, salt: str, first: str, snonce: str,
                                  final: str, server_final: str) -> None:
    cred = _credential(mech, "pencil", salt, 4096)
    server = ScramServer(mech, {"user": cred}.get, SECRET, server_nonce=snonce)
    cnonce = first.rpartition("r=")[2]
    assert server.evaluate(first.encode()).decode() == f"r={cnonce}{snonce},s={salt},i=4096"
    assert server.evaluate(final.encode()).decode() == server_final
    assert server.complete
    assert server.username == "user"


@pytest.mark.parametrize(("mech", "salt", "first", "snonce", "final", "server_final"),
                         RFC_EXCHANGES)
def test_scram_server_rfc_example_wrong_password(mech: ScramMechanism, salt: str, first: str,
                                                 snonce: str, final: str,
                                                 server_final: str) -> None:
    cred = _credential(mech, "pencil2", salt, 4096)
    server = ScramServer(mech, {"user": cred}.get, SECRET, server_nonce=snonce)
    server.evaluate(first.encode())
    with pytest.raises(SaslAuthenticationError, match="invalid credentials") as wrong:
        server.evaluate(final.encode())
    assert not server.complete
    assert "wrong password" in wrong.value.reason


def _client_final(mech: ScramMechanism, password: str, first_bare: str, server_first: str,
                  cbind: str = "biws", nonce: str | None = None) -> str:
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = mech.salted_password(password.encode(), base64.b64decode(attrs["s"]),
                                  int(attrs["i"]))
    client_key = mech.hmac(salted, b"Client Key")
    without_proof = f"c={cbind},r={nonce or attrs['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = mech.hmac(mech.h(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


@pytest.mark.parametrize("mech", [SHA256, SHA512], ids=lambda m: m.name)
def test_scram_server_round_trip_and_server_signature(mech: ScramMechanism) -> None:
    cred = _credential(mech, "s3cr=t,", base64.b64encode(b"0123456789abcdef").decode(), 8192)
    server = ScramServer(mech, {"al,ice": cred}.get, SECRET)
    first_bare = "n=al=2Cice,r=clientnonce"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    assert server_first.startswith("r=clientnonce") and server_first.endswith(",i=8192")
    reply = server.evaluate(_client_final(mech, "s3cr=t,", first_bare, server_first).encode())
    assert server.username == "al,ice"
    salted = mech.salted_password(b"s3cr=t,", b"0123456789abcdef", 8192)
    auth = f"{first_bare},{server_first},c=biws,r={server_first[2:].split(',')[0]}".encode()
    expected = hmac.new(mech.hmac(salted, b"Server Key"), auth, mech.hash_name).digest()
    assert reply == b"v=" + base64.b64encode(expected)
    assert len(expected) == hashlib.new(mech.hash_name).digest_size


def test_scram_server_rejects_a_changed_client_nonce() -> None:
    cred = _credential(SHA256, "pw", base64.b64encode(b"salt").decode(), 4096)
    server = ScramServer(SHA256, {"bob": cred}.get, SECRET)
    server_first = server.evaluate(b"n,,n=bob,r=abc").decode()
    full = server_first.split(",")[0][2:]
    forged = "abd" + full[3:]  # right server nonce, other client nonce prefix
    final = _client_final(SHA256, "pw", "n=bob,r=abc", server_first, nonce=forged)
    with pytest.raises(SaslAuthenticationError) as exc:
        server.evaluate(final.encode())
    assert "nonce" in exc.value.reason


def test_scram_server_accepts_a_nonce_ending_with_the_full_one() -> None:
    """Kafka's rule (old librdkafka repeats its client nonce in front)."""
    cred = _credential(SHA256, "pw", base64.b64encode(b"salt").decode(), 4096)
    server = ScramServer(SHA256, {"bob": cred}.get, SECRET)
    server_first = server.evaluate(b"n,,n=bob,r=abc").decode()
    full = server_first.split(",")[0][2:]
    final = _client_final(SHA256, "pw", "n=bob,r=abc", server_first, nonce="abc" + full)
    server.evaluate(final.encode())
    assert server.complete
    truncated = ScramServer(SHA256, {"bob": cred}.get, SECRET)
    server_first = truncated.evaluate(b"n,,n=bob,r=abc").decode()
    short = server_first.split(",")[0][3:]
    with pytest.raises(SaslAuthenticationError):
        truncated.evaluate(_client_final(SHA256, "pw", "n=bob,r=abc", server_first,
                                         nonce=short).encode())


def test_scram_server_rejects_channel_binding_mismatch() -> None:
    cred = _credential(SHA256, "pw", base64.b64encode(b"salt").decode(), 4096)
    server = ScramServer(SHA256, {"bob": cred}.get, SECRET)
    server_first = server.evaluate(b"n,,n=bob,r=abc").decode()
    final = _client_final(SHA256, "pw", "n=bob,r=abc", server_first, cbind="eSws")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(final.encode())


def test_scram_server_unknown_user_looks_like_a_wrong_password() -> None:
    cred = _credential(SHA256, "pw", base64.b64encode(b"salt").decode(), 4096)
    lookup = {"bob": cred}.get
    messages = []
    for user in ("bob", "mallory"):
        server = ScramServer(SHA256, lookup, SECRET)
        server_first = server.evaluate(f"n,,n={user},r=abc".encode()).decode()
        again = ScramServer(SHA256, lookup, SECRET).evaluate(f"n,,n={user},r=abc".encode())
        # the fake salt of an unknown user is stable, like a real one
        assert again.decode().split(",")[1:] == server_first.split(",")[1:]
        final = _client_final(SHA256, "wrong", f"n={user},r=abc", server_first)
        with pytest.raises(SaslAuthenticationError) as exc:
            server.evaluate(final.encode())
        messages.append(str(exc.value))
    assert messages[0] == messages[1]
    assert messages[0] == ("Authentication failed during authentication due to invalid "
                           "credentials with SASL mechanism SCRAM-SHA-256")


@pytest.mark.parametrize("first", [b"p=tls-unique,,n=bob,r=abc", b"n,,n=bob", b"n,,r=abc,n=bob",
                                   b"n,,n=b=ob,r=abc", b"n,,n=bob,r=a,c", b"\xff",
                                   b"n,,n=bob,r=abc,tokenauth=true", b""])
def test_scram_server_rejects_malformed_client_first(first: bytes) -> None:
    server = ScramServer(SHA256, lambda _: None, SECRET)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(first)


def test_scram_server_authzid_must_be_the_user() -> None:
    cred = _credential(SHA256, "pw", base64.b64encode(b"salt").decode(), 4096)
    server = ScramServer(SHA256, {"bob": cred}.get, SECRET)
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        server.evaluate(b"n,a=admin,n=bob,r=abc")
    ok = ScramServer(SHA256, {"bob": cred}.get, SECRET)
    server_first = ok.evaluate(b"n,a=bob,n=bob,r=abc").decode()
    cbind = base64.b64encode(b"n,a=bob,").decode()
    ok.evaluate(_client_final(SHA256, "pw", "n=bob,r=abc", server_first, cbind=cbind).encode())
    assert ok.complete


def test_scram_credential_stored_form_round_trips() -> None:
    cred = _credential(SHA512, "pw", base64.b64encode(b"salty").decode(), 4096)
    text = cred.to_config()
    assert text.startswith("salt=c2FsdHk=,stored_key=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_config(text) == cred
    with pytest.raises(ValueError, match="not a SCRAM credential"):
        ScramCredential.from_config("salt=x")


@given(first=st.binary(max_size=200), final=st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_scram_server_any_bytes_fail_cleanly(first: bytes, final: bytes) -> None:
    """Whatever a client sends, the exchange either goes on or fails with
    SaslAuthenticationError (which the broker answers), never another exception."""
    cred = _credential(SHA256, "pw", base64.b64encode(b"salt").decode(), 4096)
    server = ScramServer(SHA256, {"bob": cred}.get, SECRET)
    for token in (first, b"n,,n=bob,r=" + first, final):
        try:
            server.evaluate(token)
        except SaslAuthenticationError:
            return


@given(token=st.binary(max_size=100))
@settings(max_examples=300, deadline=None)
def test_plain_server_any_bytes_fail_cleanly(token: bytes) -> None:
    try:
        PlainServer({"bob": "pw"}).evaluate(token)
    except SaslAuthenticationError:
        pass
