"""The broker's own outbound connection (`ads.net.client.BrokerConnection`) authenticating
with the exchange `ads.broker.inter_broker_sasl` builds, against a broker's SASL listener
that gives sessions a one-second lifetime (KIP-368): the session is renewed on the same
connection, a refused login is an AuthenticationError naming the peer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from ads.broker.inter_broker_sasl import InterBrokerSasl
from ads.net.client import AuthenticationError, BrokerConnection, ConnectionLostError, Send
from ads.protocol import messages as m
from ads.testing import EmbeddedBroker
from sasl_support import PLAIN_USERS, add_scram_user, sasl_broker

LIFETIME_MS = 1000


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with sasl_broker(**{"connections.max.reauth.ms": str(LIFETIME_MS)}) as b:
        add_scram_user(b.bootstrap_servers, "peer", "peer-secret", ("SCRAM-SHA-256",))
        yield b


async def _metadata(conn: BrokerConnection) -> None:
    resp = await conn.request(m.ApiKey.METADATA, 1, m.MetadataRequest(topics=[]))
    assert isinstance(resp, m.MetadataResponse)
    assert resp.brokers


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "admin", PLAIN_USERS["admin"]), ("SCRAM-SHA-256", "peer", "peer-secret")])
async def test_inter_broker_sasl_session_is_renewed_on_the_connection(
        broker: EmbeddedBroker, mechanism: str, user: str, password: str) -> None:
    sasl = InterBrokerSasl(mechanism, user, password)
    lifetimes: list[int] = []

    async def counting(send: Send) -> int:
        lifetimes.append(await sasl.authenticate(send))
        return lifetimes[-1]

    conn = await BrokerConnection.connect("127.0.0.1", broker.port, authenticate=counting)
    try:
        # Three lifetimes of requests, some in flight together, on one connection.
        for _ in range(12):
            await asyncio.gather(_metadata(conn), _metadata(conn))
            await asyncio.sleep(LIFETIME_MS / 4000)
        assert not conn.closed
    finally:
        await conn.close()
    assert len(lifetimes) >= 3 and set(lifetimes) == {LIFETIME_MS}


async def test_inter_broker_sasl_unrenewed_session_is_closed_by_the_peer(
        broker: EmbeddedBroker) -> None:
    """The check above can fail: a session not renewed is closed by the broker."""
    sasl = InterBrokerSasl("PLAIN", "admin", PLAIN_USERS["admin"])

    async def never_renew(send: Send) -> int:
        await sasl.authenticate(send)
        return 0

    conn = await BrokerConnection.connect("127.0.0.1", broker.port, authenticate=never_renew)
    try:
        await _metadata(conn)
        await asyncio.sleep(LIFETIME_MS * 1.5 / 1000)
        with pytest.raises(ConnectionLostError):
            await _metadata(conn)
    finally:
        await conn.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_inter_broker_sasl_wrong_password_is_an_authentication_error(
        broker: EmbeddedBroker, mechanism: str) -> None:
    sasl = InterBrokerSasl(mechanism, "peer" if mechanism != "PLAIN" else "admin", "wrong")
    with pytest.raises(AuthenticationError, match=f"127.0.0.1:{broker.port}: authentication"):
        await BrokerConnection.connect("127.0.0.1", broker.port, authenticate=sasl.authenticate)
