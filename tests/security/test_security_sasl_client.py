"""The client side of PLAIN and SCRAM: the RFCs' example exchanges, a round trip with the
broker's own server side, and servers that must not be believed."""

from __future__ import annotations

import base64

import pytest

from ads.client.sasl import SaslClientError, ScramClient, ScramHash, sasl_client
from ads.security.sasl import PlainServer
from ads.security.scram import MECHANISMS, ScramServer

# (hash, client nonce, server-first, client-final, server-final) of RFC 5802 and RFC 7677
RFC_EXCHANGES = [
    pytest.param(ScramHash("SCRAM-SHA-1", "sha1"), "fyko+d2lbbFgONRv9qkxdawL",
                 "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
                 "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                 "p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
                 "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=", id="rfc5802-sha1"),
    pytest.param(MECHANISMS["SCRAM-SHA-256"], "rOprNGfwEbeRWgbNEkqO",
                 "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                 "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                 "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                 "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                 "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", id="rfc7677-sha256"),
]


@pytest.mark.parametrize(("scram", "nonce", "server_first", "final", "server_final"),
                         RFC_EXCHANGES)
def test_scram_client_rfc_example(scram: ScramHash, nonce: str, server_first: str,
                                  final: str, server_final: str) -> None:
    client = ScramClient(scram, "user", "pencil", nonce=nonce)
    assert client.first() == f"n,,n=user,r={nonce}".encode()
    assert client.respond(server_first.encode()) == final.encode()
    assert client.respond(server_final.encode()) is None
    assert client.complete
    forged = ScramClient(scram, "user", "pencil", nonce=nonce)
    forged.respond(server_first.encode())
    with pytest.raises(SaslClientError, match="signature is wrong"):
        forged.respond(b"v=" + base64.b64encode(b"\0" * 20))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_and_server_agree(mechanism: str) -> None:
    mech = MECHANISMS[mechanism]
    user = "al,i=ce"  # "," and "=" are escaped in the SASL name
    salt = b"0123456789abcdef"
    cred = mech.credential(salt, mech.salted_password(b"secret", salt, 4096), 4096)
    server = ScramServer(mech, {user: cred}.get, b"k")
    client = sasl_client(mechanism.lower(), user, "secret")
    reply = client.respond(server.evaluate(client.first()))
    assert reply is not None
    assert client.respond(server.evaluate(reply)) is None
    assert client.complete and server.complete and server.username == user


def test_scram_client_refuses_a_server_that_does_not_extend_its_nonce() -> None:
    client = ScramClient(MECHANISMS["SCRAM-SHA-256"], "u", "p", nonce="abc")
    with pytest.raises(SaslClientError, match="nonce"):
        client.respond(b"r=abc,s=AAAA,i=4096")
    with pytest.raises(SaslClientError, match="nonce"):
        ScramClient(MECHANISMS["SCRAM-SHA-256"], "u", "p", nonce="abc").respond(
            b"r=xyzdef,s=AAAA,i=4096")
    with pytest.raises(SaslClientError, match="malformed"):
        ScramClient(MECHANISMS["SCRAM-SHA-256"], "u", "p", nonce="abc").respond(b"r=abcd")
    with pytest.raises(SaslClientError, match="refused: invalid-proof"):
        server_first = b"r=abcd,s=AAAA,i=4096"
        refused = ScramClient(MECHANISMS["SCRAM-SHA-256"], "u", "p", nonce="abc")
        refused.respond(server_first)
        refused.respond(b"e=invalid-proof")


def test_plain_client_is_what_the_server_reads() -> None:
    client = sasl_client("PLAIN", "alice", "pw")
    server = PlainServer({"alice": "pw"})
    assert client.respond(server.evaluate(client.first())) is None
    assert client.complete and server.username == "alice"
    with pytest.raises(ValueError, match="unsupported SASL mechanism"):
        sasl_client("GSSAPI", "a", "b")
