"""SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 through confluent-kafka, kcat,
kafka-python and aiokafka: SCRAM users made with the clients' admin APIs
(AlterUserScramCredentials), wrong passwords and unknown users refused with Kafka's error."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError as AioConnectionError
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import UserScramCredentialUpsertion as KpUpsertion

from ads.testing import EmbeddedBroker
from conftest import create_topic
from sasl_support import (
    MECHANISMS,
    PLAIN_USERS,
    add_scram_user,
    confluent_conf,
    password_of,
    sasl_broker,
)

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
SCRAM_PASSWORD = "bob's scram password"
INVALID = ("Authentication failed: Invalid username or password",
           "Authentication failed during authentication due to invalid credentials with SASL "
           "mechanism")


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with sasl_broker() as b:
        add_scram_user(b.bootstrap_servers, "bob", SCRAM_PASSWORD)
        yield b


def _user(mechanism: str) -> str:
    return "alice" if mechanism == "PLAIN" else "bob"


def _topic(bootstrap: str, mechanism: str) -> str:
    name = f"sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    conf = confluent_conf(bootstrap, "PLAIN", "admin", PLAIN_USERS["admin"])
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    client = AdminClient(conf)
    client.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=15)
    return name


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_confluent_produce_consume(broker: EmbeddedBroker, mechanism: str) -> None:
    bootstrap = broker.bootstrap_servers
    topic = _topic(bootstrap, mechanism)
    conf = confluent_conf(bootstrap, mechanism, _user(mechanism),
                          password_of(mechanism, _user(mechanism), SCRAM_PASSWORD))
    producer = Producer(conf)
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 20:
                break
    finally:
        consumer.close()
    assert got == [f"v{i}".encode() for i in range(20)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user", ["alice", "bob", "nobody"])
def test_sasl_confluent_wrong_password_or_unknown_user(broker: EmbeddedBroker, mechanism: str,
                                                        user: str) -> None:
    errors: list[str] = []
    conf = confluent_conf(broker.bootstrap_servers, mechanism, user, "wrong password")
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
    producer.produce("anything", b"x")
    producer.poll(0)
    assert producer.flush(3) == 1  # never delivered
    # librdkafka reports SaslAuthenticate's error message: Kafka's, the same for an
    # unknown user as for a wrong password
    expected = INVALID[0] if mechanism == "PLAIN" else f"{INVALID[1]} {mechanism}"
    assert any("SASL authentication error" in e and expected in e for e in errors), errors


def _kcat(bootstrap: str, mechanism: str, user: str, password: str, *args: str,
          stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KCAT, "kcat is installed by `make test` (Debian package kcat)"
    return subprocess.run(
        [KCAT, "-b", bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
         "-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}",
         "-X", f"sasl.password={password}", *args],
        input=stdin, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_kcat_produce_consume(broker: EmbeddedBroker, mechanism: str) -> None:
    bootstrap = broker.bootstrap_servers
    topic = _topic(bootstrap, mechanism)
    user = _user(mechanism)
    password = password_of(mechanism, user, SCRAM_PASSWORD)
    done = _kcat(bootstrap, mechanism, user, password, "-P", "-t", topic,
                 stdin="one\ntwo\nthree\n")
    assert done.returncode == 0, done.stderr
    done = _kcat(bootstrap, mechanism, user, password, "-C", "-t", topic, "-o", "beginning",
                 "-e", "-f", "%s\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["one", "two", "three"]
    refused = _kcat(bootstrap, mechanism, user, "not it", "-L", "-m", "5")
    assert refused.returncode != 0
    assert "SASL authentication error" in refused.stderr


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_kafka_python_produce_consume(broker: EmbeddedBroker, mechanism: str) -> None:
    bootstrap = broker.bootstrap_servers
    user = "alice" if mechanism == "PLAIN" else "carol"
    password = PLAIN_USERS["alice"] if mechanism == "PLAIN" else "carol-pw"
    conf = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}
    if mechanism != "PLAIN":
        # kafka-python's admin client, as the PLAIN admin, creates carol's credential
        kp_admin = KafkaAdminClient(**{**conf, "sasl_mechanism": "PLAIN",
                                       "sasl_plain_username": "admin",
                                       "sasl_plain_password": PLAIN_USERS["admin"]})
        try:
            assert kp_admin.alter_user_scram_credentials(
                [KpUpsertion("carol", mechanism, "carol-pw", iterations=8192)]) == {
                    "carol": None}
            described = kp_admin.describe_user_scram_credentials(["carol"])["carol"]
            assert described["error"] is None
            assert {(int(c["mechanism"]), c["iterations"])
                    for c in described["credential_infos"]} >= {
                        (1 if mechanism.endswith("256") else 2, 8192)}
        finally:
            kp_admin.close()
    topic = _topic(bootstrap, mechanism)
    producer = KafkaProducer(**conf)
    try:
        for i in range(10):
            producer.send(topic, f"kp{i}".encode())
        producer.flush(15)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             **conf)
    try:
        got = [m.value for _, m in zip(range(10), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == [f"kp{i}".encode() for i in range(10)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_sasl_aiokafka_produce_consume(broker: EmbeddedBroker, mechanism: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    bootstrap = broker.bootstrap_servers
    user = _user(mechanism)
    conf = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password_of(mechanism, user, SCRAM_PASSWORD)}
    topic = await asyncio.to_thread(_topic, bootstrap, mechanism)
    producer = AIOKafkaProducer(**conf)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait(topic, f"aio{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **conf)
    await consumer.start()
    got = []
    try:
        async with asyncio.timeout(30):
            while len(got) < 10:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in msgs)
    finally:
        await consumer.stop()
    assert got == [f"aio{i}".encode() for i in range(10)]
    wrong = AIOKafkaProducer(**{**conf, "sasl_plain_password": "wrong"},
                             request_timeout_ms=5000)
    with pytest.raises(AioConnectionError) as refused:
        await wrong.start()
    await wrong.stop()
    assert "Unable to bootstrap" in str(refused.value)
    # aiokafka logs why: the broker's SASL_AUTHENTICATION_FAILED (58) and its message
    expected = INVALID[0] if mechanism == "PLAIN" else f"{INVALID[1]} {mechanism}"
    assert any("[Error 58] SaslAuthenticationFailed" in r.getMessage()
               and expected in r.getMessage() for r in caplog.records)


def test_sasl_plaintext_broker_topic_creation_helper_unaffected(bootstrap: str) -> None:
    """A PLAINTEXT listener keeps serving without SASL (the default)."""
    create_topic(bootstrap, "plain-listener")


_KAFKA_PYTHON_LOGIN = """
import logging, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from kafka import KafkaProducer
try:
    KafkaProducer(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism=sys.argv[2], sasl_plain_username=sys.argv[3],
                  sasl_plain_password="wrong password", bootstrap_timeout_ms=3000)
except Exception as exc:
    print("refused:", type(exc).__name__)
else:
    print("logged in")
"""


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_kafka_python_wrong_password_or_unknown_user(
        broker: EmbeddedBroker, mechanism: str, caplog: pytest.LogCaptureFixture) -> None:
    """In a process of its own: a KafkaProducer that fails to start leaves its sockets to
    the garbage collector, which this suite turns into errors. kafka-python 3.0 often
    handles the close that follows the broker's SASL_AUTHENTICATION_FAILED answer before
    the answer itself (as it would with Kafka, which closes the same way), so the broker's
    log says why instead."""
    caplog.set_level(logging.INFO, logger="ads.broker.sasl")
    for user in (_user(mechanism), "nobody"):
        done = subprocess.run([sys.executable, "-c", _KAFKA_PYTHON_LOGIN,
                               broker.bootstrap_servers, mechanism, user],
                              capture_output=True, text=True, timeout=60, check=False)
        assert "refused:" in done.stdout, done.stdout + done.stderr[-2000:]
        why = "wrong password" if user != "nobody" else "unknown"
        assert any("failed authentication of" in r.getMessage() and why in r.getMessage()
                   and repr(user) in r.getMessage() for r in caplog.records)
