"""A broker with a SASL_PLAINTEXT listener offering PLAIN and both SCRAM mechanisms, and
client settings for it, for the SASL tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from ads.testing import EmbeddedBroker

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# PLAIN's users, as Kafka's JAAS line names them (a quote and a backslash in one password)
PLAIN_USERS = {"admin": "admin-secret", "alice": 'alice "quoted\\ secret'}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def jaas_line(users: dict[str, str]) -> str:
    options = " ".join(
        f'user_{u}="{p.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for u, p in users.items())
    return f"{PLAIN_MODULE} required {options};"


def sasl_broker_config(**extra: str) -> dict[str, str]:
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_line(PLAIN_USERS),
            **extra}


@contextmanager
def sasl_broker(**extra: str) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=sasl_broker_config(**extra)) as broker:
        yield broker


def confluent_conf(bootstrap: str, mechanism: str, user: str, password: str
                   ) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def admin(bootstrap: str) -> AdminClient:
    return AdminClient(confluent_conf(bootstrap, "PLAIN", "admin", PLAIN_USERS["admin"]))


def add_scram_user(bootstrap: str, user: str, password: str,
                   mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512"),
                   iterations: int = 4096) -> None:
    """Creates the user's SCRAM credentials with confluent-kafka's admin client
    (AlterUserScramCredentials), authenticated as the PLAIN admin."""
    upserts = [UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism[m.replace("-", "_")], iterations),
        password.encode()) for m in mechanisms]
    client = admin(bootstrap)  # kept until the answer: a destroyed client fails its futures
    futures = client.alter_user_scram_credentials(upserts)
    for future in futures.values():
        future.result(timeout=15)


def password_of(mechanism: str, user: str, scram_password: str) -> str:
    return PLAIN_USERS[user] if mechanism == "PLAIN" else scram_password
