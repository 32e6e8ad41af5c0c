"""JAAS text as Kafka's configs and JAAS files write it, and the errors of bad text."""

from __future__ import annotations

import pytest

from ads.common.jaas import JaasError, LoginModule, parse_jaas_config, parse_jaas_file
from ads.security.sasl import PlainServer, SaslAuthenticationError

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_jaas_config_kafka_line() -> None:
    text = (f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
            'user_admin="admin-secret" user_alice=alice-secret;')
    assert parse_jaas_config(text) == [LoginModule(PLAIN_MODULE, "required", {
        "username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
        "user_alice": "alice-secret"})]


def test_jaas_config_quotes_escapes_and_comments() -> None:
    text = (f'{PLAIN_MODULE} REQUIRED /* users */ user_bob="p;a=s\\"s\\\\w{{o}}rd" // x\n'
            'user_eve="";')
    [module] = parse_jaas_config(text)
    assert module.flag == "required"
    assert module.options == {"user_bob": 'p;a=s"s\\w{o}rd', "user_eve": ""}


@pytest.mark.parametrize("text", [
    "", f"{PLAIN_MODULE} required user_a=\"x\"", f"{PLAIN_MODULE} mandatory;",
    f'{PLAIN_MODULE} required user_a="unterminated;', f"{PLAIN_MODULE} required user_a=;",
    f"{PLAIN_MODULE} required user_a x;", f"{PLAIN_MODULE} required = ;", "/* open",
])
def test_jaas_config_malformed(text: str) -> None:
    with pytest.raises(JaasError):
        parse_jaas_config(text)


def test_jaas_file_sections() -> None:
    text = f"""
    // broker users
    KafkaServer {{
        {PLAIN_MODULE} required
        user_admin="a";
    }};
    sasl_plaintext.KafkaServer {{
        org.apache.kafka.common.security.scram.ScramLoginModule required;
        {PLAIN_MODULE} required user_x="y";
    }};
    """
    sections = parse_jaas_file(text)
    assert sections["KafkaServer"][0].options == {"user_admin": "a"}
    assert [m.class_name.rsplit(".", 1)[1] for m in sections["sasl_plaintext.KafkaServer"]] == [
        "ScramLoginModule", "PlainLoginModule"]
    with pytest.raises(JaasError):
        parse_jaas_file("KafkaServer { x required; }")  # no ';' after the section


def test_plain_server_checks_users() -> None:
    users = {"alice": "alice-secret"}
    ok = PlainServer(users)
    assert ok.evaluate(b"\0alice\0alice-secret") == b""
    assert ok.complete and ok.username == "alice"
    for token, message in [(b"\0alice\0wrong", "Invalid username or password"),
                           (b"\0bob\0alice-secret", "Invalid username or password"),
                           (b"alice\0alice-secret", "expected 3 tokens"),
                           (b"\0\0x", "username not specified"),
                           (b"\0alice\0", "password not specified"),
                           (b"bob\0alice\0alice-secret", "authorization id")]:
        with pytest.raises(SaslAuthenticationError, match=message):
            PlainServer(users).evaluate(token)
