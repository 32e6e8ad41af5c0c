"""SASL_SSL: SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) inside TLS, with confluent-kafka,
kafka-python, aiokafka and kcat. A client certificate names the connection until SASL
authenticates it; then the SASL user is the principal, as in Kafka."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpPartition

from ads.client.tls import client_context
from ads.testing.embedded import EmbeddedBroker
from sasl_support import MECHANISMS, PLAIN_USERS, jaas_line
from tls_support import Pki, make_pki

KCAT = shutil.which("kcat")
SCRAM_PASSWORD = "scram-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    config = {"listeners": "SASL_SSL://127.0.0.1:0",
              "sasl.enabled.mechanisms": ",".join(MECHANISMS),
              "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_line(PLAIN_USERS),
              "ssl.client.auth": "requested", **pki.broker_settings()}
    with EmbeddedBroker(config=config) as b:
        admin = AdminClient(_ck(b, pki, "PLAIN", "admin"))
        upserts = [UserScramCredentialUpsertion(
            "scram-user", ScramCredentialInfo(ScramMechanism[m.replace("-", "_")], 4096),
            SCRAM_PASSWORD.encode()) for m in MECHANISMS[1:]]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=15)
        yield b


def _user(mechanism: str) -> tuple[str, str]:
    return (("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN"
            else ("scram-user", SCRAM_PASSWORD))


def _ck(b: EmbeddedBroker, pki: Pki, mechanism: str, user: str | None = None,
        password: str | None = None) -> dict[str, Any]:
    name, secret = _user(mechanism)
    if user is not None:
        name, secret = user, PLAIN_USERS.get(user, secret)
    return {"bootstrap.servers": b.bootstrap_for("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca), "sasl.mechanism": mechanism,
            "sasl.username": name, "sasl.password": password or secret}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_ssl_confluent_produce_consume(broker: EmbeddedBroker, pki: Pki,
                                            mechanism: str) -> None:
    conf = _ck(broker, pki, mechanism)
    topic = f"sasl-ssl-{mechanism}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer(conf)
    for i in range(30):
        producer.produce(topic, f"{mechanism}-{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": f"g-{mechanism}", "enable.auto.commit": False})
    consumer.assign([CkPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.time() + 20
    while len(values) < 30 and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            values.append(msg.value())
    consumer.close()
    assert values == [f"{mechanism}-{i}".encode() for i in range(30)]


def test_sasl_ssl_wrong_password_refused(broker: EmbeddedBroker, pki: Pki) -> None:
    errors: list[str] = []
    producer = Producer({**_ck(broker, pki, "SCRAM-SHA-256", password="wrong"),
                         "error_cb": lambda e: errors.append(str(e))})
    producer.produce("anything", b"x")
    assert producer.flush(3) == 1  # never delivered
    assert any("SASL authentication error" in e and "invalid credentials" in e
               for e in errors), errors


def test_sasl_ssl_kafka_python_scram(broker: EmbeddedBroker, pki: Pki) -> None:
    args: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap_for("SASL_SSL"), "security_protocol": "SASL_SSL",
        "ssl_cafile": str(pki.ca), "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "scram-user", "sasl_plain_password": SCRAM_PASSWORD}
    producer = KafkaProducer(**args)
    for i in range(20):
        producer.send("sasl-ssl-kp", f"kp-{i}".encode())
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=10_000, **args)
    consumer.assign([KpPartition("sasl-ssl-kp", 0)])
    consumer.seek_to_beginning()
    values = [m.value for _, m in zip(range(20), consumer, strict=False)]
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(20)]


async def test_sasl_ssl_aiokafka_plain(broker: EmbeddedBroker, pki: Pki) -> None:
    context = client_context({"security.protocol": "SASL_SSL",
                              "ssl.ca.location": str(pki.ca)})
    args: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap_for("SASL_SSL"), "security_protocol": "SASL_SSL",
        "ssl_context": context, "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
        "sasl_plain_password": PLAIN_USERS["alice"]}
    producer = AIOKafkaProducer(**args)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait("sasl-ssl-aio", f"aio-{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(enable_auto_commit=False, auto_offset_reset="earliest", **args)
    await consumer.start()
    try:
        consumer.assign([TopicPartition("sasl-ssl-aio", 0)])
        values: list[bytes] = []
        async with asyncio.timeout(20):
            while len(values) < 20:
                batch = await consumer.getmany(timeout_ms=1000)
                values.extend(m.value for ms in batch.values() for m in ms if m.value)
    finally:
        await consumer.stop()
    assert values == [f"aio-{i}".encode() for i in range(20)]


def test_sasl_ssl_kcat_scram(broker: EmbeddedBroker, pki: Pki) -> None:
    assert KCAT, "kcat is installed by `make test` (Debian package kcat)"
    common = ["-b", broker.bootstrap_for("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
              "-X", f"ssl.ca.location={pki.ca}", "-X", "sasl.mechanism=SCRAM-SHA-256",
              "-X", "sasl.username=scram-user", "-X", f"sasl.password={SCRAM_PASSWORD}"]
    lines = [f"kcat sasl_ssl {i}" for i in range(20)]
    done = subprocess.run([KCAT, *common, "-P", "-t", "sasl-ssl-kcat"], capture_output=True,
                          text=True, input="\n".join(lines) + "\n", timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([KCAT, *common, "-C", "-t", "sasl-ssl-kcat", "-o", "beginning",
                           "-e"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == lines


def test_sasl_ssl_sasl_user_is_the_principal_over_a_certificate(broker: EmbeddedBroker,
                                                                pki: Pki) -> None:
    producer = Producer({**_ck(broker, pki, "PLAIN"),
                         "ssl.certificate.location": str(pki.client_cert),
                         "ssl.key.location": str(pki.client_key)})
    producer.list_topics(timeout=10)
    assert broker.broker is not None
    deadline = time.time() + 10
    principals: set[str] = set()
    while "User:alice" not in principals and time.time() < deadline:
        principals = {c.info.principal for lst in broker.broker.listeners
                      for c in list(lst._connections) if not c.info.closed}
        time.sleep(0.05)
    assert "User:alice" in principals
    assert not any(p.startswith("User:CN=alice") for p in principals)
