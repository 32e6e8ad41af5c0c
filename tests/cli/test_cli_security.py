"""`ads` commands against a broker whose only listener is SASL_SSL, with the client's
settings in a `--command-config` file: the commands that use confluent-kafka and those that
speak the protocol themselves (transactions, group offsets, replica offsets, quotas) both
authenticate; a wrong password is one line and exit status 1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from test_cli_groups import Cap, run, table

from ads.testing.embedded import EmbeddedBroker
from sasl_support import MECHANISMS, PLAIN_USERS, jaas_line
from tls_support import Pki, make_pki

TOPIC = "secure-cli"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    config = {"listeners": "SASL_SSL://127.0.0.1:0",
              "sasl.enabled.mechanisms": ",".join(MECHANISMS),
              "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_line(PLAIN_USERS),
              "group.initial.rebalance.delay.ms": "0",
              "transaction.state.log.num.partitions": "2",
              "offsets.topic.num.partitions": "2", **pki.broker_settings()}
    with EmbeddedBroker(config=config) as b:
        yield b


def _properties(pki: Pki, password: str) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": password}


def _config_file(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def test_cli_commands_over_sasl_ssl(broker: EmbeddedBroker, pki: Pki, tmp_path: Path,
                                    capsys: Cap) -> None:
    bootstrap = broker.bootstrap_servers
    props = _properties(pki, PLAIN_USERS["admin"])
    common = ("--bootstrap-server", bootstrap, "--command-config",
              str(_config_file(tmp_path / "client.properties", props)))

    code, _, err = run(capsys, "topics", "create", TOPIC, "--partitions", "1",
                       *common)
    assert code == 0, err
    producer = Producer({**props, "bootstrap.servers": bootstrap,
                         "transactional.id": "secure-txn"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(TOPIC, f"v{i}".encode())
    producer.flush(15)  # left open: `transactions` shows it Ongoing

    code, out, err = run(capsys, "transactions", "list", *common)
    assert code == 0, err
    assert ["secure-txn", "1"] == table(out)[1][:2] and table(out)[1][3] == "Ongoing"
    code, out, err = run(capsys, "transactions", "describe", "--transactional-id",
                         "secure-txn", *common)
    assert code == 0, err
    assert "Ongoing" in out and TOPIC in out
    code, out, err = run(capsys, "transactions", "find-hanging", "--broker-id", "1",
                         "--max-transaction-timeout", "0", *common)
    assert code == 0, err
    producer.commit_transaction(15)

    code, out, err = run(capsys, "topics", "describe", TOPIC,
                         "--replica-offsets", *common)
    assert code == 0, err
    assert "ReplicaLogEndOffsets: 1=6" in out  # five records and the commit marker
    code, out, err = run(capsys, "cluster", "status", "--replica-offsets", *common)
    assert code == 0, err
    assert "1=6" in out

    consumer = Consumer({**props, "bootstrap.servers": bootstrap, "group.id": "secure-g",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)
    consumer.close()
    code, out, err = run(capsys, "groups", "describe", "secure-g", *common)
    assert code == 0, err
    assert [TOPIC, "0", "3", "6", "3"] in [row[1:6] for row in table(out)], out
    code, out, err = run(capsys, "groups", "delete-offsets", "--group", "secure-g",
                         "--topic", TOPIC, *common)
    assert code == 0, err
    code, out, err = run(capsys, "groups", "describe", "secure-g", *common)
    assert TOPIC not in out

    code, _, err = run(capsys, "quotas", "alter", "--entity-type", "users", "--entity-name",
                       "alice", "--add-config", "producer_byte_rate=1048576", *common)
    assert code == 0, err
    code, out, err = run(capsys, "quotas", "describe", "--entity-type", "users", *common)
    assert code == 0, err
    assert "alice" in out and "1048576" in out


@pytest.mark.parametrize("command", [
    ("transactions", "list"), ("quotas", "describe", "--entity-type", "users"),
    ("transactions", "describe", "--transactional-id", "x")])
def test_cli_wrong_password_is_one_line(broker: EmbeddedBroker, pki: Pki, tmp_path: Path,
                                        capsys: Cap, command: tuple[str, ...]) -> None:
    config = _config_file(tmp_path / "bad.properties", _properties(pki, "wrong"))
    code, out, err = run(capsys, *command, "--bootstrap-server", broker.bootstrap_servers,
                         "--command-config", str(config))
    assert code == 1
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "Authentication failed: Invalid username or password" in err, err


def test_cli_wrong_password_with_confluent_kafka(broker: EmbeddedBroker, pki: Pki,
                                                 tmp_path: Path, capsys: Cap) -> None:
    """librdkafka keeps retrying a refused login until the command's timeout: one line."""
    config = _config_file(tmp_path / "bad.properties", _properties(pki, "wrong"))
    code, out, err = run(capsys, "topics", "list", "--bootstrap-server",
                         broker.bootstrap_servers, "--command-config", str(config))
    assert (code, out) == (1, "")
    assert len(err.strip().splitlines()) == 1, err


def test_cli_unusable_client_property_is_a_usage_error(broker: EmbeddedBroker,
                                                       tmp_path: Path, capsys: Cap) -> None:
    config = _config_file(tmp_path / "odd.properties", {"security.protocol": "SASL_SSL",
                                                        "sasl.mechanism": "GSSAPI"})
    code, _, err = run(capsys, "transactions", "list", "--bootstrap-server",
                       broker.bootstrap_servers, "--command-config", str(config))
    assert code == 2
    assert "sasl.mechanism=GSSAPI is not supported" in err


def test_cli_takes_a_java_client_properties_file(broker: EmbeddedBroker, pki: Pki,
                                                 tmp_path: Path, capsys: Cap) -> None:
    """The client.properties Kafka's own tools take (a JAAS line, a PEM trust store) serves
    confluent-kafka and the blocking connections alike."""
    module = "org.apache.kafka.common.security.plain.PlainLoginModule"
    config = _config_file(tmp_path / "java.properties", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{module} required username="admin" '
                            f'password="{PLAIN_USERS["admin"]}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)})
    common = ("--bootstrap-server", broker.bootstrap_servers, "--command-config", str(config))
    code, out, err = run(capsys, "topics", "create", "java-props", *common)
    assert code == 0, err
    code, out, err = run(capsys, "topics", "list", *common)
    assert code == 0, err
    assert "java-props" in out.split()
    code, out, err = run(capsys, "transactions", "list", *common)
    assert code == 0, err
