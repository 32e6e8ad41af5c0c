"""`ads acls add | remove | list` against a broker with an authorizer, the effect of each
change checked with confluent-kafka and kafka-python as User:ANONYMOUS.

The broker first runs with `super.users=User:ANONYMOUS`, where `ads acls add --cluster`
grants ANONYMOUS ALTER and DESCRIBE on the cluster (what managing ACLs needs); it then
restarts without super users, so every other ACL the commands make or remove decides what
the same principal may do.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.errors import TopicAuthorizationFailedError
from test_cli_groups import Cap, run

from acl_support import ANON, AUTHORIZER
from ads.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("acl-cli")
    with EmbeddedBroker(data, config={**AUTHORIZER, "super.users": ANON}) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        for topic in ("orders", "orders-eu", "audit"):
            producer.produce(topic, f"{topic}-0".encode())
        assert producer.flush(15) == 0
        code = subprocess.run(
            [sys.executable, "-m", "ads.cli.main", "acls", "add", "--bootstrap-server",
             b.bootstrap_servers, "--allow-principal", ANON, "--operation", "Alter",
             "--operation", "Describe", "--cluster"],
            capture_output=True, text=True, timeout=60, check=False)
        assert code.returncode == 0, code.stderr
        assert "resourceType=CLUSTER, name=kafka-cluster" in code.stdout
    with EmbeddedBroker(data, config=AUTHORIZER) as b:
        yield b.bootstrap_servers


def _produce(bs: str, topic: str) -> str | None:
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 5000})
    errors: list[KafkaError] = []
    p.produce(topic, b"v", on_delivery=lambda err, _: errors.append(err))
    p.flush(10)
    return errors[0].name() if errors and errors[0] else None


def _consume(bs: str, topic: str, group: str) -> str | None:
    """The first record's value, or the error name the group consumer meets."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        for _ in range(100):
            msg = c.poll(0.2)
            if msg is not None:
                return msg.error().name() if msg.error() else msg.value().decode()
        return None
    finally:
        c.close()


def _kp_read(bs: str, topic: str) -> str:
    c = KafkaConsumer(bootstrap_servers=bs, group_id=None)
    try:
        c.assign([KTP(topic, 0)])
        c.seek_to_beginning()
        for _ in range(20):
            try:
                got = c.poll(500)
            except TopicAuthorizationFailedError:
                return "TOPIC_AUTHORIZATION_FAILED"
            for records in got.values():
                return str(records[0].value.decode())
        return "nothing"
    finally:
        c.close()


def _acls(capsys: Cap, bs: str, *flags: str) -> str:
    code, out, err = run(capsys, "acls", "list", "--bootstrap-server", bs, *flags)
    assert code == 0, err
    return out


def test_cli_acls_add_list_remove_topic_write(bootstrap: str, capsys: Cap) -> None:
    assert _produce(bootstrap, "orders") == "TOPIC_AUTHORIZATION_FAILED"
    code, out, err = run(capsys, "acls", "add", "--bootstrap-server", bootstrap,
                         "--allow-principal", ANON, "--operation", "Write", "--topic", "orders")
    assert code == 0, err
    assert ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
            "patternType=LITERAL)`:") in out
    assert _produce(bootstrap, "orders") is None
    listed = _acls(capsys, bootstrap, "--topic", "orders")
    assert ("(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)"
            in listed)
    assert "CLUSTER" not in listed  # only the resource asked for
    assert "resourceType=CLUSTER" in _acls(capsys, bootstrap)  # everything
    assert _acls(capsys, bootstrap, "--principal", "User:bob") == ""

    code, out, err = run(capsys, "acls", "remove", "--bootstrap-server", bootstrap,
                         "--allow-principal", ANON, "--operation", "Write", "--topic",
                         "orders", "--force")
    assert code == 0, err
    assert "operation=WRITE" in out
    assert _produce(bootstrap, "orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert _acls(capsys, bootstrap, "--topic", "orders") == ""


def test_cli_acls_consumer_and_producer_roles_prefixed(bootstrap: str, capsys: Cap) -> None:
    code, _, err = run(capsys, "acls", "add", "--bootstrap-server", bootstrap,
                       "--allow-principal", ANON, "--consumer", "--topic", "orders-",
                       "--group", "billing-", "--resource-pattern-type", "prefixed")
    assert code == 0, err
    assert _consume(bootstrap, "orders-eu", "billing-1") == "orders-eu-0"
    assert _kp_read(bootstrap, "orders-eu") == "orders-eu-0"
    assert _consume(bootstrap, "orders-eu", "other") == "GROUP_AUTHORIZATION_FAILED"
    assert _produce(bootstrap, "orders-eu") == "TOPIC_AUTHORIZATION_FAILED"
    listed = _acls(capsys, bootstrap, "--topic", "orders-", "--resource-pattern-type",
                   "prefixed")
    assert {"operation=READ", "operation=DESCRIBE"} <= {
        part.strip(" ,") for line in listed.splitlines() for part in line.split(", ")
        if part.startswith("operation=")}
    # MATCH: every ACL that applies to the topic orders-eu, whatever its pattern.
    assert "name=orders-, patternType=PREFIXED" in _acls(
        capsys, bootstrap, "--topic", "orders-eu", "--resource-pattern-type", "match")

    code, _, err = run(capsys, "acls", "add", "--bootstrap-server", bootstrap,
                       "--allow-principal", ANON, "--producer", "--topic", "orders-",
                       "--resource-pattern-type", "prefixed")
    assert code == 0, err
    assert _produce(bootstrap, "orders-eu") is None

    # A DENY from this host wins over the ALLOWs, for kafka-python as for confluent-kafka.
    code, _, err = run(capsys, "acls", "add", "--bootstrap-server", bootstrap,
                       "--deny-principal", ANON, "--deny-host", "127.0.0.1", "--operation",
                       "Read", "--topic", "orders-eu")
    assert code == 0, err
    assert _kp_read(bootstrap, "orders-eu") == "TOPIC_AUTHORIZATION_FAILED"
    # Removing every ACL of the literal resource (no principal named) lifts the DENY.
    code, out, err = run(capsys, "acls", "remove", "--bootstrap-server", bootstrap,
                         "--topic", "orders-eu", "--force")
    assert code == 0, err
    assert "permissionType=DENY" in out
    assert _kp_read(bootstrap, "orders-eu") == "orders-eu-0"


def test_cli_acls_remove_asks_first(bootstrap: str, capsys: Cap) -> None:
    code, _, err = run(capsys, "acls", "add", "--bootstrap-server", bootstrap,
                       "--allow-principal", ANON, "--operation", "Write", "--topic", "audit")
    assert code == 0, err
    assert _produce(bootstrap, "audit") is None

    def remove(answer: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ads.cli.main", "acls", "remove", "--bootstrap-server",
             bootstrap, "--topic", "audit"], input=answer, capture_output=True, text=True,
            timeout=60, check=False)

    kept = remove("n\n")
    assert kept.returncode == 0 and "Nothing removed." in kept.stdout
    assert _produce(bootstrap, "audit") is None
    gone = remove("y\n")
    assert gone.returncode == 0 and "operation=WRITE" in gone.stdout
    assert _produce(bootstrap, "audit") == "TOPIC_AUTHORIZATION_FAILED"


@pytest.mark.parametrize(("argv", "says"), [
    (["add", "--topic", "t"], "--allow-principal or --deny-principal"),
    (["add", "--allow-principal", "alice", "--topic", "t"], "expected Type:name"),
    (["add", "--allow-principal", ANON], "at least one resource"),
    (["add", "--allow-principal", ANON, "--topic", "t", "--resource-pattern-type", "match"],
     "not valid when adding"),
    (["add", "--allow-principal", ANON, "--group", "g", "--operation", "Write"],
     "GROUP takes only the operations"),
    (["add", "--allow-principal", ANON, "--topic", "t", "--operation", "Fly"],
     "unknown AclOperation"),
    (["add", "--allow-principal", ANON, "--consumer", "--topic", "t"], "--group"),
    (["add", "--allow-principal", ANON, "--producer", "--topic", "t", "--operation", "Read"],
     "take no --operation"),
    (["add", "--allow-principal", ANON, "--idempotent", "--topic", "t"], "with --producer"),
])
def test_cli_acls_usage_errors(bootstrap: str, capsys: Cap, argv: list[str],
                               says: str) -> None:
    code, _, err = run(capsys, "acls", *argv, "--bootstrap-server", bootstrap)
    assert code == 2 and says in err, err


def test_cli_acls_refused_without_alter_or_describe(tmp_path: Path, capsys: Cap) -> None:
    """Without ALTER (adding) or DESCRIBE (listing) on the cluster the broker refuses; the
    command says so and exits 1, also where librdkafka answers an empty list."""
    with EmbeddedBroker(tmp_path, config=AUTHORIZER) as b:
        bs = b.bootstrap_servers
        code, _, err = run(capsys, "acls", "add", "--bootstrap-server", bs,
                           "--allow-principal", ANON, "--operation", "Read", "--topic", "t")
        assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err, err
        code, out, err = run(capsys, "acls", "list", "--bootstrap-server", bs)
        assert code == 1 and out == "" and "CLUSTER_AUTHORIZATION_FAILED" in err, err


def test_cli_acls_without_an_authorizer(tmp_path: Path, capsys: Cap) -> None:
    with EmbeddedBroker(tmp_path) as b:
        code, _, err = run(capsys, "acls", "list", "--bootstrap-server", b.bootstrap_servers)
    assert code == 1 and "SECURITY_DISABLED" in err, err

