"""Real clients over TLS: one broker with a PLAINTEXT listener, an SSL listener that asks
for client certificates (`ssl.client.auth=requested`) and an SSL listener MTLS that
requires them, with its own `listener.name.mtls.*` settings and principal mapping rules."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpPartition

from ads.client.tls import client_context
from ads.testing.embedded import EmbeddedBroker
from tls_support import CLIENT_DN, Pki, make_pki

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.client.auth": "requested",
        **pki.broker_settings(),
        # The MTLS listener: its own key store entry (the same files here), required
        # client certificates and a mapping of their subject to a short name.
        "listener.name.mtls.ssl.keystore.location": str(pki.broker_keystore),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules":
            "RULE:^CN=([a-z]+),OU=Engineering,.*$/$1@eng/U,DEFAULT",
    }
    with EmbeddedBroker(config=config) as b:
        yield b


def _ck(pki: Pki, bootstrap: str, cert: tuple[Path, Path] | None) -> dict[str, str]:
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca)}
    if cert is not None:
        conf["ssl.certificate.location"] = str(cert[0])
        conf["ssl.key.location"] = str(cert[1])
    return conf


def _create(conf: dict[str, str], name: str, partitions: int = 1) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                        operation_timeout=10)[name].result(timeout=15)


def _principals(broker: EmbeddedBroker, listener_name: str) -> set[str]:
    assert broker.broker is not None
    return {c.info.principal for lst in broker.broker.listeners
            if lst.listener_name == listener_name for c in list(lst._connections)
            if not c.info.closed}


def _seen(broker: EmbeddedBroker, listener_name: str, principal: str) -> bool:
    """Whether a connection of `principal` is open on the listener within a few seconds
    (a client may move from its bootstrap connection to a new one meanwhile)."""
    deadline = time.time() + 10
    while time.time() < deadline:
        if principal in _principals(broker, listener_name):
            return True
        time.sleep(0.05)
    return False


def _ck_round_trip(conf: dict[str, str], topic: str, count: int = 50) -> list[bytes]:
    producer = Producer(conf)
    for i in range(count):
        producer.produce(topic, f"tls-{i}".encode() * 30)
    assert producer.flush(20) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.assign([CkPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.time() + 30
    try:
        while len(values) < count and time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                values.append(msg.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("with_cert", [False, True])
def test_tls_confluent_produce_consume(tls_broker: EmbeddedBroker, pki: Pki,
                                       with_cert: bool) -> None:
    conf = _ck(pki, tls_broker.bootstrap_for("SSL"),
               (pki.client_cert, pki.client_key) if with_cert else None)
    topic = f"tls-ck-{with_cert}"
    _create(conf, topic)
    values = _ck_round_trip(conf, topic)
    assert values == [f"tls-{i}".encode() * 30 for i in range(50)]


def test_tls_metadata_answers_the_listener_of_the_request(tls_broker: EmbeddedBroker,
                                                          pki: Pki) -> None:
    ssl_md = AdminClient(_ck(pki, tls_broker.bootstrap_for("SSL"), None)).list_topics(timeout=10)
    plain_md = AdminClient({"bootstrap.servers": tls_broker.bootstrap_for("PLAINTEXT")}
                           ).list_topics(timeout=10)
    ssl_port = int(tls_broker.bootstrap_for("SSL").rsplit(":", 1)[1])
    plain_port = int(tls_broker.bootstrap_for("PLAINTEXT").rsplit(":", 1)[1])
    assert [b.port for b in ssl_md.brokers.values()] == [ssl_port]
    assert [b.port for b in plain_md.brokers.values()] == [plain_port]


def test_tls_large_fetch_over_tls_reads_file_regions(tls_broker: EmbeddedBroker,
                                                     pki: Pki) -> None:
    """Records past the inline limit are file regions, sent with sendfile on plain
    sockets; over TLS they must go through the TLS transport, byte for byte."""
    conf = _ck(pki, tls_broker.bootstrap_for("SSL"), None)
    _create(conf, "tls-large")
    payloads = [bytes([i % 251]) * 200_000 for i in range(8)]
    producer = Producer({**conf, "message.max.bytes": 1_000_000})
    for p in payloads:
        producer.produce("tls-large", p)
    assert producer.flush(20) == 0
    for bootstrap, extra in ((tls_broker.bootstrap_for("SSL"), conf),
                             (tls_broker.bootstrap_for("PLAINTEXT"), {})):
        consumer = Consumer({**extra, "bootstrap.servers": bootstrap, "group.id": "large",
                             "fetch.max.bytes": 4_000_000,
                             "max.partition.fetch.bytes": 4_000_000})
        consumer.assign([CkPartition("tls-large", 0, 0)])
        got: list[bytes] = []
        deadline = time.time() + 30
        while len(got) < len(payloads) and time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got.append(msg.value())
        consumer.close()
        assert got == payloads, bootstrap


@pytest.mark.parametrize("with_cert", [False, True])
def test_tls_kafka_python_produce_consume(tls_broker: EmbeddedBroker, pki: Pki,
                                          with_cert: bool) -> None:
    bootstrap = tls_broker.bootstrap_for("SSL")
    topic = f"tls-kp-{with_cert}"
    _create(_ck(pki, bootstrap, None), topic)
    ssl_args: dict[str, object] = {"security_protocol": "SSL", "ssl_cafile": str(pki.ca),
                                   "ssl_check_hostname": True}
    if with_cert:
        ssl_args.update(ssl_certfile=str(pki.client_cert), ssl_keyfile=str(pki.client_key))
    producer = KafkaProducer(bootstrap_servers=bootstrap, **ssl_args)
    for i in range(30):
        producer.send(topic, f"kp-{i}".encode())
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000, **ssl_args)
    consumer.assign([KpPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = []
    for msg in consumer:
        values.append(msg.value)
        if len(values) == 30:
            break
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(30)]


@pytest.mark.parametrize("with_cert", [False, True])
async def test_tls_aiokafka_with_a_context_from_client_properties(
        tls_broker: EmbeddedBroker, pki: Pki, with_cert: bool) -> None:
    """aiokafka with the SSLContext `ads.client.tls.client_context` makes of Kafka client
    properties (Java client keys, PEM)."""
    bootstrap = tls_broker.bootstrap_for("SSL")
    topic = f"tls-aio-{with_cert}"
    await asyncio.to_thread(_create, _ck(pki, bootstrap, None), topic)
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(pki.ca)}
    if with_cert:
        props.update({"ssl.keystore.type": "PEM",
                      "ssl.keystore.location": str(pki.client_keystore)})
    context = client_context(props)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                ssl_context=context)
    await producer.start()
    try:
        for i in range(30):
            await producer.send_and_wait(topic, f"aio-{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                ssl_context=context, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        async with asyncio.timeout(30):
            while len(values) < 30:
                batch = await consumer.getmany(timeout_ms=1000)
                values.extend(m.value for msgs in batch.values() for m in msgs
                              if m.value is not None)
    finally:
        await consumer.stop()
    assert values == [f"aio-{i}".encode() for i in range(30)]


def _kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KCAT, "kcat is installed by `make test` (Debian package kcat)"
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize("with_cert", [False, True])
def test_tls_kcat_produce_consume(tls_broker: EmbeddedBroker, pki: Pki,
                                  with_cert: bool) -> None:
    bootstrap = tls_broker.bootstrap_for("SSL")
    topic = f"tls-kcat-{with_cert}"
    _create(_ck(pki, bootstrap, None), topic)
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}"]
    if with_cert:
        tls += ["-X", f"ssl.certificate.location={pki.client_cert}",
                "-X", f"ssl.key.location={pki.client_key}"]
    lines = [f"k{i}:kcat over tls {i}" for i in range(40)]
    done = _kcat("-b", bootstrap, *tls, "-P", "-t", topic, "-K:", stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    done = _kcat("-b", bootstrap, *tls, "-C", "-t", topic, "-o", "beginning", "-e",
                 "-f", "%k:%s\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == lines


def test_tls_client_certificate_names_the_principal(tls_broker: EmbeddedBroker,
                                                    pki: Pki) -> None:
    """The subject in RFC 2253 form on SSL (DEFAULT rule); mapped by the MTLS listener's
    own rules; User:ANONYMOUS without a certificate."""
    with_cert = Producer(_ck(pki, tls_broker.bootstrap_for("SSL"),
                             (pki.client_cert, pki.client_key)))
    mtls = Producer(_ck(pki, tls_broker.bootstrap_for("MTLS"), (pki.client_cert, pki.client_key)))
    try:
        for p in (with_cert, mtls):
            p.list_topics(timeout=10)
        assert _seen(tls_broker, "SSL", f"User:{CLIENT_DN}")
        assert _seen(tls_broker, "MTLS", "User:ALICE@ENG")
        assert _principals(tls_broker, "MTLS") == {"User:ALICE@ENG"}
    finally:
        with_cert.flush(1)
        mtls.flush(1)
    plain = Producer(_ck(pki, tls_broker.bootstrap_for("SSL"), None))
    plain.list_topics(timeout=10)
    assert _seen(tls_broker, "SSL", "User:ANONYMOUS")


def _refused(conf: dict[str, str]) -> None:
    admin = AdminClient({**conf, "socket.connection.setup.timeout.ms": 3000,
                         "reconnect.backoff.max.ms": 500})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=4)


@pytest.mark.parametrize("listener, cert, reason", [
    ("SSL", "rogue", "unable to get local issuer certificate"),
    ("SSL", "expired", "certificate has expired"),
    ("MTLS", "rogue", "unable to get local issuer certificate"),
    ("MTLS", None, "peer did not return a certificate"),
])
def test_tls_bad_client_certificates_are_refused_others_served(
        tls_broker: EmbeddedBroker, pki: Pki, caplog: pytest.LogCaptureFixture,
        listener: str, cert: str | None, reason: str) -> None:
    good = _ck(pki, tls_broker.bootstrap_for(listener), (pki.client_cert, pki.client_key))
    topic = f"served-{listener}-{cert}"
    _create(good, topic)
    producer = Producer(good)
    producer.produce(topic, b"before")
    assert producer.flush(10) == 0
    pair = {"rogue": (pki.rogue_cert, pki.rogue_key),
            "expired": (pki.expired_cert, pki.expired_key), None: None}[cert]
    with caplog.at_level(logging.INFO, logger="ads.net"):
        _refused(_ck(pki, tls_broker.bootstrap_for(listener), pair))
        deadline = time.time() + 10
        while time.time() < deadline and not any(
                "SSL handshake failed" in r.getMessage() for r in caplog.records):
            time.sleep(0.1)
    failures = [r.getMessage() for r in caplog.records if "SSL handshake failed" in r.getMessage()]
    assert failures and all(f"on listener {listener}" in f for f in failures)
    assert any(reason in f.lower().replace("_", " ") for f in failures), failures
    producer.produce(topic, b"after")
    assert producer.flush(10) == 0
    assert [m for m in _ck_values(good, topic, 2)] == [b"before", b"after"]


def _ck_values(conf: dict[str, str], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"read-{topic}", "enable.auto.commit": False})
    consumer.assign([CkPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.time() + 20
    while len(values) < count and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            values.append(msg.value())
    consumer.close()
    return values


def test_tls_plaintext_client_on_a_tls_listener_is_closed(tls_broker: EmbeddedBroker,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    with caplog.at_level(logging.INFO, logger="ads.net"):
        _refused({"bootstrap.servers": tls_broker.bootstrap_for("SSL")})
    assert AdminClient({"bootstrap.servers": tls_broker.bootstrap_for("PLAINTEXT")}
                       ).list_topics(timeout=10).brokers


def test_tls_inline_pem_keys_protocols_and_suites(pki: Pki) -> None:
    """Kafka's inline PEM keys, TLS 1.2 only and one cipher suite named as Kafka names it:
    a client gets exactly that, and produces and consumes."""
    config = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": pki.broker_cert.read_text(),
        "ssl.keystore.key": pki.broker_key.read_text(),
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    }
    with EmbeddedBroker(config=config) as b:
        host, port = b.bootstrap_for("SSL").rsplit(":", 1)
        context = client_context({"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)})
        assert context is not None
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.version() == "TLSv1.2"
            assert tls.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
        conf = _ck(pki, b.bootstrap_for("SSL"), None)
        _create(conf, "inline")
        assert _ck_round_trip(conf, "inline", 10) == [f"tls-{i}".encode() * 30
                                                      for i in range(10)]


def test_tls_group_coordinator_and_cluster_on_the_listener(tls_broker: EmbeddedBroker,
                                                           pki: Pki) -> None:
    """FindCoordinator and DescribeCluster answer with the SSL endpoint to an SSL client: a
    subscribed consumer joins its group and commits through the coordinator there."""
    bootstrap = tls_broker.bootstrap_for("SSL")
    conf = _ck(pki, bootstrap, None)
    _create(conf, "tls-group")
    producer = Producer(conf)
    for i in range(20):
        producer.produce("tls-group", f"g{i}".encode())
    assert producer.flush(10) == 0
    admin = AdminClient(conf)
    cluster = admin.describe_cluster(request_timeout=10).result(15)
    assert [f"{n.host}:{n.port}" for n in cluster.nodes] == [bootstrap]
    consumer = Consumer({**conf, "group.id": "tls-members", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["tls-group"])
    seen = 0
    deadline = time.time() + 30
    while seen < 20 and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            seen += 1
    consumer.commit(asynchronous=False)
    committed = consumer.committed([CkPartition("tls-group", 0)], timeout=10)
    consumer.close()
    assert seen == 20 and committed[0].offset == 20
