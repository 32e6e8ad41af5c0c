"""Two SASL PLAIN users on one broker: ACLs made for alice with `ads acls` (authenticated as
the super user through `--command-config`) let her produce, consume and see the topic,
while bob, authenticated the same way, is denied and does not see it; a DENY for alice
then wins over her ALLOWs. Driven with confluent-kafka and kafka-python."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.errors import KafkaError as KPError
from kafka.errors import TopicAuthorizationFailedError

from ads.cli.main import main
from ads.testing import EmbeddedBroker
from sasl_support import confluent_conf, jaas_line

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_line(USERS),
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:admin", "group.initial.rebalance.delay.ms": "0",
              "offsets.topic.num.partitions": "1"}
    with EmbeddedBroker(config=config) as b:
        admin = AdminClient(_conf(b.bootstrap_servers, "admin"))
        admin.create_topics([NewTopic("shared", 1, 1)])["shared"].result(15)
        yield b.bootstrap_servers


def _conf(bs: str, user: str) -> dict[str, Any]:
    return confluent_conf(bs, "PLAIN", user, USERS[user])


def _kp(user: str) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def _acls(tmp_path: Path, *argv: str) -> None:
    """`ads acls` as User:admin, its SASL settings in a --command-config file."""
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     f"sasl.username=admin\nsasl.password={USERS['admin']}\n")
    assert main(["acls", *argv, "--command-config", str(props)]) == 0


def _produce(bs: str, user: str) -> str | None:
    p = Producer({**_conf(bs, user), "message.timeout.ms": 5000})
    errors: list[KafkaError] = []
    p.produce("shared", f"from {user}".encode(), on_delivery=lambda e, _: errors.append(e))
    p.flush(10)
    return errors[0].name() if errors and errors[0] else None


def _kp_produce(bs: str, user: str) -> str | None:
    p = KafkaProducer(bootstrap_servers=bs, **_kp(user))
    try:
        p.send("shared", f"kp from {user}".encode()).get(10)
    except TopicAuthorizationFailedError:
        return "TOPIC_AUTHORIZATION_FAILED"
    finally:
        p.close(5)
    return None


def _kp_read(bs: str, user: str) -> str:
    c = KafkaConsumer(bootstrap_servers=bs, group_id=None, **_kp(user))
    try:
        c.assign([KTP("shared", 0)])
        c.seek_to_beginning()
        for _ in range(20):
            try:
                got = c.poll(500)
            except KPError as exc:
                return type(exc).__name__
            for records in got.values():
                return str(records[0].value.decode())
        return "nothing"
    finally:
        c.close()


def _listed(bs: str, user: str) -> set[str]:
    admin = AdminClient(_conf(bs, user))
    return set(admin.list_topics(timeout=10).topics)


def test_acl_sasl_alice_allowed_bob_denied(bootstrap: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # No ACL yet: both are denied (not super users), and neither sees the topic.
    assert _produce(bootstrap, "alice") == "TOPIC_AUTHORIZATION_FAILED"
    assert "shared" not in _listed(bootstrap, "alice")

    _acls(tmp_path, "add", "--bootstrap-server", bootstrap, "--allow-principal", "User:alice",
          "--producer", "--consumer", "--topic", "shared", "--group", "alice-app")
    capsys.readouterr()
    _acls(tmp_path, "list", "--bootstrap-server", bootstrap, "--principal", "User:alice")
    listed = capsys.readouterr().out
    assert "principal=User:alice" in listed and "User:bob" not in listed

    # alice: confluent-kafka and kafka-python both produce; both read back.
    assert _produce(bootstrap, "alice") is None
    assert _kp_produce(bootstrap, "alice") is None
    assert _kp_read(bootstrap, "alice") == "from alice"
    c = Consumer({**_conf(bootstrap, "alice"), "group.id": "alice-app",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["shared"])
        values = []
        for _ in range(100):
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
                if len(values) == 2:
                    break
        assert values == [b"from alice", b"kp from alice"]
    finally:
        c.close()
    assert "shared" in _listed(bootstrap, "alice")

    # bob: the same listener and mechanism, another principal: denied everywhere.
    assert _produce(bootstrap, "bob") == "TOPIC_AUTHORIZATION_FAILED"
    assert _kp_produce(bootstrap, "bob") == "TOPIC_AUTHORIZATION_FAILED"
    assert "shared" not in _listed(bootstrap, "bob")

    # A DENY for alice wins over her ALLOWs.
    _acls(tmp_path, "add", "--bootstrap-server", bootstrap, "--deny-principal", "User:alice",
          "--operation", "Read", "--topic", "shared")
    assert _kp_read(bootstrap, "alice") == "TopicAuthorizationFailedError"
    assert _produce(bootstrap, "alice") is None  # WRITE is still allowed


def test_acl_sasl_list_refused_to_a_user_without_describe(
        bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """librdkafka turns the refusal into an empty list: `ads acls list` asks again with the
    same SASL settings and reports it."""
    props = tmp_path / "bob.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     f"sasl.username=bob\nsasl.password={USERS['bob']}\n")
    capsys.readouterr()
    status = main(["acls", "list", "--bootstrap-server", bootstrap,
                   "--command-config", str(props)])
    assert status == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err
