"""Three `ads broker` processes on a real ZooKeeper that authenticate to each other with SASL
on the inter-broker listener, renewing their sessions (KIP-368) as they go.

With PLAIN the brokers have no PLAINTEXT listener at all: clients authenticate too. With
SCRAM-SHA-256 the PLAINTEXT listener serves the clients, and the brokers' own SCRAM
credential is created through it (AlterUserScramCredentials) before any topic exists, so
before the brokers have anything to say to each other. Either way an acks=all produce to an
RF=3 topic with min.insync.replicas=3 succeeds only when both followers fetch over SASL,
and does again after several session lifetimes; killing the leader elects another that
serves every record, and a stopping broker's controlled shutdown reaches the controller."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from ads.testing.zookeeper import zookeeper_available
from broker_process import free_port
from cluster_support import Cluster
from sasl_support import PLAIN_MODULE

pytestmark = [pytest.mark.slow, pytest.mark.broker_process]

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
BROKER_PASSWORD = "broker-secret"  # noqa: S105 - a test credential
REAUTH_MS = 2000


def _read_all(conf: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"check-{time.monotonic()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.time() + 30
    while len(values) < count and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            values.append(msg.value())
    consumer.close()
    return values


def _produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_brokers_replicate_over_an_inter_broker_sasl_listener(tmp_path: Path,
                                                              mechanism: str) -> None:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    plain_line = (f'{PLAIN_MODULE} required username="broker" password="{BROKER_PASSWORD}" '
                  f'user_broker="{BROKER_PASSWORD}" user_alice="alice-secret";')
    sets = ["inter.broker.listener.name=SASL_PLAINTEXT",
            f"sasl.mechanism.inter.broker.protocol={mechanism}",
            f"connections.max.reauth.ms={REAUTH_MS}"]
    if mechanism == "PLAIN":
        sets += ["sasl.enabled.mechanisms=PLAIN",
                 f"listener.name.sasl_plaintext.plain.sasl.jaas.config={plain_line}"]
    else:
        sets += ["sasl.enabled.mechanisms=SCRAM-SHA-256",
                 "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
                 f'{SCRAM_MODULE} required username="broker" password="{BROKER_PASSWORD}";']
    # With PLAIN the SASL listener is the only one: the cluster's own admin client logs in.
    c = Cluster(tmp_path, 3, *sets, client_config={
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"}
        if mechanism == "PLAIN" else None)
    sasl_ports = {}
    for node, broker in c.brokers.items():
        if mechanism == "PLAIN":  # the only listener
            sasl_ports[node] = broker.port
            listeners = f"listeners=SASL_PLAINTEXT://127.0.0.1:{broker.port}"
        else:
            sasl_ports[node] = free_port()
            listeners = (f"listeners=PLAINTEXT://127.0.0.1:{broker.port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[node]}")
        broker.sets = (*broker.sets, listeners)
    c.start()
    try:
        if mechanism == "PLAIN":
            conf: dict[str, Any] = {
                "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values()),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": "alice", "sasl.password": "alice-secret"}
        else:
            conf = {"bootstrap.servers": c.bootstrap}
            upsert = UserScramCredentialUpsertion(
                "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                BROKER_PASSWORD.encode())
            creator = AdminClient({"bootstrap.servers": c.brokers[1].bootstrap})
            for future in creator.alter_user_scram_credentials([upsert]).values():
                future.result(timeout=15)
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("replicated", 1, 3,
                                      config={"min.insync.replicas": "3"})])[
            "replicated"].result(30)

        def isr() -> list[int]:
            return list(admin.list_topics("replicated", timeout=10)
                        .topics["replicated"].partitions[0].isrs)

        c.wait_for(lambda: len(isr()) == 3, "a full ISR")
        _produce(conf, "replicated", [f"r{i}".encode() for i in range(50)])
        # Past a few session lifetimes the followers' sessions have been renewed on their
        # connections (the leaders close expired ones): replication goes on.
        time.sleep(REAUTH_MS * 2.5 / 1000)
        _produce(conf, "replicated", [f"r{i}".encode() for i in range(50, 100)])
        assert len(isr()) == 3

        leader = admin.list_topics("replicated", timeout=10).topics["replicated"] \
            .partitions[0].leader
        c.brokers[leader].kill9()
        rest = {n: b for n, b in c.brokers.items() if n != leader}
        conf = {**conf, "bootstrap.servers": ",".join(
            f"127.0.0.1:{sasl_ports[n] if mechanism == 'PLAIN' else b.port}"
            for n, b in rest.items())}
        admin = AdminClient(conf)
        c.wait_for(lambda: admin.list_topics("replicated", timeout=10).topics["replicated"]
                   .partitions[0].leader in rest, "a new leader")
        assert _read_all(conf, "replicated", 100) == [f"r{i}".encode() for i in range(100)]
        # The controlled shutdown request reaches the controller over SASL too.
        c.wait_for(lambda: c.controller() in rest, "a live controller")
        leaving = next(n for n in rest if n != c.controller())
        assert c.brokers[leaving].stop() == 0
        assert "controlled shutdown succeeded" in c.brokers[leaving].log()
        logs = "".join(b.log() for b in c.brokers.values())
        assert "failed re-authentication" not in logs
        assert "re-authentication to" not in logs  # no renewal failed on the client side
    finally:
        c.stop()
