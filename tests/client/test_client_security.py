"""The blocking client over SSL, SASL_PLAINTEXT and SASL_SSL, made from Kafka client
properties by `ConnectionFactory`: PLAIN and both SCRAMs, credentials from `sasl.username`
or a `sasl.jaas.config` line, the server's host name checked, a refusal carrying the
broker's message, and re-authentication before the session ends (KIP-368)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from ads.client import ClientConfigError, ClientError, ConnectionFactory
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing.embedded import EmbeddedBroker
from sasl_support import MECHANISMS, PLAIN_USERS, jaas_line
from tls_support import Pki, make_pki

SCRAM_PASSWORD = "scram-secret"
REAUTH_MS = 1500


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
                     "WRONGNAME://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SSL:SSL,WRONGNAME:SSL",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_line(PLAIN_USERS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_line(PLAIN_USERS),
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(REAUTH_MS),
        # a certificate (CN=alice, no subject alternative names) not made for this host
        "listener.name.wrongname.ssl.keystore.location": str(pki.client_keystore),
        **pki.broker_settings()}
    with EmbeddedBroker(config=config) as b:
        admin = AdminClient({**_props(b, pki, "SASL_SSL", "PLAIN"),
                             "bootstrap.servers": b.bootstrap_for("SASL_SSL")})
        upserts = [UserScramCredentialUpsertion(
            "scram-user", ScramCredentialInfo(ScramMechanism[m.replace("-", "_")], 4096),
            SCRAM_PASSWORD.encode()) for m in MECHANISMS[1:]]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=15)
        yield b


def _props(b: EmbeddedBroker, pki: Pki, protocol: str, mechanism: str = "",
           password: str | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {"security.protocol": protocol, "ssl.ca.location": str(pki.ca)}
    if mechanism:
        user, secret = (("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN"
                        else ("scram-user", SCRAM_PASSWORD))
        props.update({"sasl.mechanism": mechanism, "sasl.username": user,
                      "sasl.password": secret if password is None else password})
    return props


def _metadata_ok(factory: ConnectionFactory, address: str) -> None:
    with factory.connect(address) as conn:
        resp = conn.request(m.ApiKey.METADATA, 9, m.MetadataRequest(topics=None))
        assert isinstance(resp, m.MetadataResponse)
        assert [b.port for b in resp.brokers] == [int(address.rsplit(":", 1)[1])]


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_connection_answers_requests(broker: EmbeddedBroker, pki: Pki, protocol: str,
                                          mechanism: str) -> None:
    factory = ConnectionFactory(_props(broker, pki, protocol, mechanism))
    assert factory.security.sasl and factory.security.mechanism == mechanism
    _metadata_ok(factory, broker.bootstrap_for(protocol))


def test_ssl_connection_checks_the_host_name(broker: EmbeddedBroker, pki: Pki) -> None:
    _metadata_ok(ConnectionFactory(_props(broker, pki, "SSL")), broker.bootstrap_for("SSL"))
    wrong = broker.bootstrap_for("WRONGNAME")
    with pytest.raises(ClientError, match="TLS handshake .* failed: .*(IP address mismatch|"
                                          "CERTIFICATE_VERIFY_FAILED)"):
        ConnectionFactory(_props(broker, pki, "SSL")).connect(wrong)
    unchecked = ConnectionFactory({**_props(broker, pki, "SSL"),
                                   "ssl.endpoint.identification.algorithm": ""})
    with unchecked.connect(wrong) as conn:
        assert m.ApiKey.METADATA in conn.api_versions()


def test_untrusted_broker_certificate_is_refused(broker: EmbeddedBroker, pki: Pki) -> None:
    props = {"security.protocol": "SSL", "ssl.ca.location": str(pki.rogue_cert)}
    with pytest.raises(ClientError, match="CERTIFICATE_VERIFY_FAILED"):
        ConnectionFactory(props).connect(broker.bootstrap_for("SSL"))


def test_credentials_from_a_jaas_line(broker: EmbeddedBroker, pki: Pki) -> None:
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    props = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(pki.ca), "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.jaas.config": f'{module} required username="scram-user" '
                                 f'password="{SCRAM_PASSWORD}";'}
    factory = ConnectionFactory(props)
    assert (factory.security.username, factory.security.password) == ("scram-user",
                                                                     SCRAM_PASSWORD)
    _metadata_ok(factory, broker.bootstrap_for("SASL_SSL"))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_raises_the_brokers_message(broker: EmbeddedBroker, pki: Pki,
                                                   mechanism: str) -> None:
    factory = ConnectionFactory(_props(broker, pki, "SASL_SSL", mechanism, password="nope"))
    with pytest.raises(ClientError, match="Authentication failed") as info:
        factory.connect(broker.bootstrap_for("SASL_SSL"))
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_plaintext_client_on_a_sasl_listener_is_closed(broker: EmbeddedBroker) -> None:
    with ConnectionFactory({}).connect(broker.bootstrap_for("SASL_PLAINTEXT")) as conn:
        with pytest.raises(ClientError, match="closed"):
            conn.request(m.ApiKey.METADATA, 9, m.MetadataRequest(topics=None))


@pytest.mark.parametrize(("props", "key"), [
    ({"security.protocol": "SASL_TLS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": "p"},
     "sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"}, "sasl.username"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "Module required username=u"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
])
def test_unusable_properties_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ClientConfigError) as info:
        ConnectionFactory(props)
    assert info.value.key == key


def test_reauthenticates_before_the_session_ends(broker: EmbeddedBroker, pki: Pki) -> None:
    factory = ConnectionFactory(_props(broker, pki, "SASL_PLAINTEXT", "PLAIN"))
    address = broker.bootstrap_for("SASL_PLAINTEXT")
    with factory.connect(address) as conn:
        for _ in range(3):  # each round outlives the session the previous one began
            resp = conn.request(m.ApiKey.METADATA, 9, m.MetadataRequest(topics=None))
            assert isinstance(resp, m.MetadataResponse)
            time.sleep(REAUTH_MS / 1000 * 1.1)
        assert not conn.closed
