"""SASL settings at start-up: bad ones stop `ads broker` with exit status 2 and a line
naming the key; PLAIN's users from the `sasl.jaas.config` fallback and from a JAAS file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from ads.testing import EmbeddedBroker
from broker_process import free_port
from sasl_support import PLAIN_MODULE, confluent_conf

LISTENER = "listeners=SASL_PLAINTEXT://127.0.0.1:{port}"
PREFIXED = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
INTER_MECHANISM = "sasl.mechanism.inter.broker.protocol"
INTER_SASL = ("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "inter.broker.listener.name=SASL_PLAINTEXT", "zookeeper.connect=127.0.0.1:1")


def _ads_broker(tmp_path: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "ads.cli.main", "broker", "--data-dir", str(tmp_path)]
    for item in (LISTENER.format(port=free_port()), *sets):
        args += ["--set", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.broker_process
@pytest.mark.parametrize(("sets", "named"), [
    ((f'{PREFIXED}={PLAIN_MODULE} required user_a="unterminated;',
      "sasl.enabled.mechanisms=PLAIN"), PREFIXED),
    ((f"{PREFIXED}={PLAIN_MODULE} optional-ish user_a=b;",
      "sasl.enabled.mechanisms=PLAIN"), PREFIXED),
    ((), "sasl.enabled.mechanisms"),  # Kafka's default, GSSAPI, is not supported
    (("sasl.enabled.mechanisms=PLAIN",), PREFIXED),  # PLAIN without users
    # In a cluster, brokers need a listener to reach each other on: by default the one of
    # protocol PLAINTEXT.
    (("sasl.enabled.mechanisms=SCRAM-SHA-256", "zookeeper.connect=127.0.0.1:1"),
     "security.inter.broker.protocol"),
    # A SASL inter-broker listener: Kafka's default mechanism, GSSAPI, is not supported ...
    ((*INTER_SASL, "sasl.enabled.mechanisms=SCRAM-SHA-256"), INTER_MECHANISM),
    # ... the mechanism must be enabled on that listener ...
    ((*INTER_SASL, "sasl.enabled.mechanisms=SCRAM-SHA-256", f"{INTER_MECHANISM}=PLAIN"),
     INTER_MECHANISM),
    # ... and the broker needs its own username and password.
    ((*INTER_SASL, "sasl.enabled.mechanisms=SCRAM-SHA-256",
      f"{INTER_MECHANISM}=SCRAM-SHA-256"),
     "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"),
    ((*INTER_SASL, "sasl.enabled.mechanisms=PLAIN", f"{INTER_MECHANISM}=PLAIN",
      f'{PREFIXED}={PLAIN_MODULE} required user_a="b";'), PREFIXED),
    ((*INTER_SASL, "sasl.enabled.mechanisms=SCRAM-SHA-256", f"{INTER_MECHANISM}=SCRAM-SHA-256",
      f'sasl.jaas.config={PLAIN_MODULE} required username="broker";'), "sasl.jaas.config"),
    (("sasl.enabled.mechanisms=PLAIN", "java.security.auth.login.config=/nonexistent"),
     "java.security.auth.login.config"),
])
def test_sasl_config_refused_at_start(tmp_path: Path, sets: tuple[str, ...],
                                      named: str) -> None:
    done = _ads_broker(tmp_path, *sets)
    assert done.returncode == 2, done.stderr
    assert "invalid configuration" in done.stderr and named in done.stderr
    assert "Traceback" not in done.stderr


def _alice_logs_in(bootstrap: str, password: str) -> bool:
    producer = Producer(confluent_conf(bootstrap, "PLAIN", "alice", password))
    producer.produce("jaas", b"x")
    return producer.flush(5) == 0


def test_sasl_plain_users_from_the_unprefixed_jaas_config() -> None:
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "sasl.jaas.config": f'{PLAIN_MODULE} required user_alice="from-fallback";'}
    with EmbeddedBroker(config=config) as broker:
        assert _alice_logs_in(broker.bootstrap_servers, "from-fallback")


def test_sasl_plain_users_from_a_jaas_file(tmp_path: Path) -> None:
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(f"""
        KafkaServer {{
            {PLAIN_MODULE} required user_alice="generic";
        }};
        // the listener's own section wins over KafkaServer
        sasl_plaintext.KafkaServer {{
            {PLAIN_MODULE} required
            user_alice="from-file";
        }};
    """)
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "java.security.auth.login.config": str(jaas)}
    with EmbeddedBroker(config=config) as broker:
        assert _alice_logs_in(broker.bootstrap_servers, "from-file")
        assert not _alice_logs_in(broker.bootstrap_servers, "generic")
