"""The SASL gate and sessions: unauthenticated connections get ApiVersions and the SASL
requests only (anything else closes them, and the others are still served), frames before
authentication are limited to sasl.server.max.receive.size, per-listener mechanisms,
SaslHandshake v0's bare tokens, KIP-368 re-authentication and expired sessions."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_wire import RawConnection
from sasl_support import PLAIN_USERS, add_scram_user, confluent_conf, sasl_broker

ALICE = PLAIN_USERS["alice"]


@pytest.fixture(scope="module")
def broker() -> EmbeddedBroker:
    with sasl_broker() as b:
        add_scram_user(b.bootstrap_servers, "bob", "bob-pw")
        yield b


def _alice(bootstrap: str) -> dict[str, str]:
    return confluent_conf(bootstrap, "PLAIN", "alice", ALICE)


def test_sasl_unauthenticated_metadata_closes_only_that_connection(
        broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture) -> None:
    bootstrap = broker.bootstrap_servers
    producer = Producer(_alice(bootstrap))
    stop = threading.Event()
    delivered: list[int] = []

    def produce() -> None:
        while not stop.is_set():
            producer.produce("gate-topic", b"served",
                             on_delivery=lambda err, msg: delivered.append(err is None))
            producer.poll(0.05)

    producer.produce("gate-topic", b"first")
    assert producer.flush(15) == 0
    worker = threading.Thread(target=produce)
    worker.start()
    try:
        # a client configured without SASL: ApiVersions is answered, its Metadata closes
        # the connection
        plain = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "PLAINTEXT"})
        with pytest.raises(KafkaException):
            plain.list_topics(timeout=3)
    finally:
        stop.set()
        worker.join()
    assert producer.flush(15) == 0
    assert delivered and all(delivered)
    assert any("METADATA before SASL authentication" in r.getMessage()
               for r in caplog.records if r.name == "ads.broker")


def test_sasl_frames_before_authentication_are_limited(broker: EmbeddedBroker,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        assert conn.request(18, 0, m.ApiVersionsRequest()).error_code == ErrorCode.NONE
        conn.send_raw(b"\0" * 64)  # the start of a frame larger than 524288 bytes
        conn.conn.sock.sendall((600_000).to_bytes(4, "big") + b"\0" * 100)
        assert conn.is_closed()
    assert any("sasl.server.max.receive.size" in r.getMessage() for r in caplog.records)
    # once authenticated, the same client may send large requests
    producer = Producer({**_alice(broker.bootstrap_servers), "message.max.bytes": 2_000_000})
    producer.produce("large-after-auth", b"x" * 700_000)
    assert producer.flush(15) == 0


def test_sasl_requests_out_of_order(broker: EmbeddedBroker) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        answer = conn.request(36, 1, m.SaslAuthenticateRequest(auth_bytes=b"\0alice\0x"))
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert conn.is_closed()
    with RawConnection(broker.bootstrap_servers) as conn:
        answer = conn.request(17, 1, m.SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert conn.is_closed()


def test_sasl_handshake_on_a_plaintext_listener(bootstrap: str) -> None:
    with RawConnection(bootstrap) as conn:
        answer = conn.request(17, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert conn.request(18, 0, m.ApiVersionsRequest()).error_code == ErrorCode.NONE


def test_sasl_listener_mechanisms_override() -> None:
    with sasl_broker(**{"listener.name.sasl_plaintext.sasl.enabled.mechanisms":
                        "SCRAM-SHA-512"}) as b:
        errors: list[str] = []
        producer = Producer({**_alice(b.bootstrap_servers),
                             "error_cb": lambda e: errors.append(str(e))})
        producer.produce("t", b"x")
        assert producer.flush(3) == 1
        assert any("SCRAM-SHA-512" in e and "PLAIN" in e for e in errors), errors
        with RawConnection(b.bootstrap_servers) as conn:
            answer = conn.request(17, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))
            assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            assert answer.mechanisms == ["SCRAM-SHA-512"]


@pytest.mark.parametrize(("mechanism", "user", "password"),
                         [("PLAIN", "alice", ALICE), ("SCRAM-SHA-256", "bob", "bob-pw")])
def test_sasl_handshake_v0_bare_tokens_kafka_python(broker: EmbeddedBroker, mechanism: str,
                                                    user: str, password: str) -> None:
    """kafka-python told the broker is 0.10.1 uses SaslHandshake v0, then bare tokens."""
    producer = Producer(_alice(broker.bootstrap_servers))
    producer.produce("v0-topic", b"x")
    assert producer.flush(15) == 0
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                             sasl_plain_username=user, sasl_plain_password=password,
                             api_version=(0, 10, 1))
    try:
        assert "v0-topic" in consumer.topics()
    finally:
        consumer.close()


def _authentications(caplog: pytest.LogCaptureFixture, what: str) -> dict[str, int]:
    """How many times each connection (client address) completed `what`."""
    counts: dict[str, int] = {}
    for r in caplog.records:
        message = r.getMessage()
        if r.name == "ads.broker.sasl" and f": {what} of " in message:
            peer = message.split(f"{what} of ")[1].split()[0]
            counts[peer] = counts.get(peer, 0) + 1
    return counts


def _produce_for(producer: Producer, topic: str, seconds: float) -> int:
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, f"m{sent}".encode())
        sent += 1
        producer.poll(0.1)
    assert producer.flush(15) == 0
    return sent


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_reauthentication_librdkafka(caplog: pytest.LogCaptureFixture,
                                          mechanism: str) -> None:
    caplog.set_level(logging.DEBUG, logger="ads.broker.sasl")
    with sasl_broker(**{"connections.max.reauth.ms": "1500"}) as b:
        add_scram_user(b.bootstrap_servers, "bob", "bob-pw")
        user, password = ("alice", ALICE) if mechanism == "PLAIN" else ("bob", "bob-pw")
        producer = Producer(confluent_conf(b.bootstrap_servers, mechanism, user, password))
        _produce_for(producer, "reauth", 4.0)
        renewed = _authentications(caplog, "re-authentication")
        # librdkafka renewed its session on the same connection, more than once
        assert renewed and max(renewed.values()) >= 2, renewed
        assert not any("expired" in r.getMessage() for r in caplog.records)


def test_sasl_reauthentication_kafka_python(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ads.broker.sasl")
    with sasl_broker(**{"connections.max.reauth.ms": "1500"}) as b:
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers,
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                 sasl_plain_username="alice", sasl_plain_password=ALICE)
        try:
            deadline = time.monotonic() + 4.0
            while time.monotonic() < deadline:
                producer.send("reauth-kp", b"x").get(timeout=10)
                time.sleep(0.1)
        finally:
            producer.close()
        assert _authentications(caplog, "re-authentication")
        assert not any("expired" in r.getMessage() for r in caplog.records)


async def test_sasl_expired_session_is_closed(caplog: pytest.LogCaptureFixture) -> None:
    """aiokafka does not re-authenticate: past its session lifetime its next request
    closes the connection; it connects and authenticates again."""
    caplog.set_level(logging.INFO, logger="ads.broker")
    with sasl_broker(**{"connections.max.reauth.ms": "1000"}) as b:
        producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers,
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                    sasl_plain_username="alice", sasl_plain_password=ALICE)
        await producer.start()
        try:
            await producer.send_and_wait("expiring", b"before")
            await asyncio.sleep(1.5)
            for _ in range(20):  # the first send after the expiry may meet the close
                try:
                    await producer.send_and_wait("expiring", b"after")
                    break
                except Exception:  # noqa: BLE001, S112 - retried until it goes through
                    continue
            else:
                pytest.fail("aiokafka never got through after its session expired")
        finally:
            await producer.stop()
        assert any("SASL session expired" in r.getMessage() and "User:alice" in r.getMessage()
                   for r in caplog.records)


def test_sasl_session_lifetime_reported(broker: EmbeddedBroker) -> None:
    with sasl_broker(**{"listener.name.sasl_plaintext.plain.connections.max.reauth.ms":
                        "60000"}) as b, RawConnection(b.bootstrap_servers) as conn:
        assert conn.request(17, 1, m.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        answer = conn.request(36, 1, m.SaslAuthenticateRequest(
            auth_bytes=f"\0alice\0{ALICE}".encode()))
        assert (answer.error_code, answer.session_lifetime_ms) == (ErrorCode.NONE, 60000)
        # authenticated: SaslAuthenticate again without a handshake is refused, the
        # connection stays
        again = conn.request(36, 1, m.SaslAuthenticateRequest(auth_bytes=b"x"))
        assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert conn.request(3, 1, m.MetadataRequest(topics=[])).brokers


def _authenticated(bootstrap: str) -> RawConnection:
    conn = RawConnection(bootstrap)
    assert conn.request(17, 1, m.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    answer = conn.request(36, 1, m.SaslAuthenticateRequest(
        auth_bytes=f"\0alice\0{ALICE}".encode()))
    assert answer.error_code == ErrorCode.NONE
    return conn


def test_sasl_reauthentication_must_keep_mechanism_and_principal(
        broker: EmbeddedBroker) -> None:
    with _authenticated(broker.bootstrap_servers) as conn:
        # the same principal again: accepted, the connection goes on
        assert conn.request(17, 1, m.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        again = conn.request(36, 1, m.SaslAuthenticateRequest(
            auth_bytes=f"\0alice\0{ALICE}".encode()))
        assert again.error_code == ErrorCode.NONE
        assert conn.request(3, 1, m.MetadataRequest(topics=[])).brokers
    with _authenticated(broker.bootstrap_servers) as conn:
        answer = conn.request(17, 1, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert conn.is_closed()
    with _authenticated(broker.bootstrap_servers) as conn:
        assert conn.request(17, 1, m.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        answer = conn.request(36, 1, m.SaslAuthenticateRequest(
            auth_bytes=f"\0admin\0{PLAIN_USERS['admin']}".encode()))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert answer.error_message == ("Cannot change principals during re-authentication "
                                        "from User.alice: User.admin")
        assert conn.is_closed()
