"""TLS contexts from Kafka's ssl.* keys (`ads.client.tls`): what is read and what is refused.
The clients that use them against a broker are in tests/broker/test_tls_clients.py."""

from __future__ import annotations

import pytest

from ads.client.tls import TlsConfigError, client_context, server_context
from tls_support import KEY_PASSWORD, Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_tls_server_context_reads_pem_files_and_inline_pem(pki: Pki) -> None:
    server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore)})
    server_context({"ssl.keystore.type": "PEM", "ssl.key.password": KEY_PASSWORD,
                    "ssl.keystore.location": str(pki.broker_encrypted_keystore)})
    ctx = server_context({"ssl.keystore.certificate.chain": pki.broker_cert.read_text(),
                          "ssl.keystore.key": pki.broker_key.read_text(),
                          "ssl.truststore.certificates": pki.ca.read_text(),
                          "ssl.client.auth": "required"})
    assert len(ctx.get_ca_certs()) == 1


@pytest.mark.parametrize("props, key", [
    ({}, "ssl.keystore.location"),
    ({"ssl.keystore.location": "KEYSTORE"}, "ssl.keystore.type"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "KEYSTORE"}, "ssl.keystore.type"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "ENCRYPTED"},
     "ssl.keystore.location"),  # no password for an encrypted key
    ({"ssl.keystore.key": "KEY"}, "ssl.keystore.key"),  # without its chain
    ({"ssl.keystore.certificate.chain": "CA", "ssl.keystore.key": "KEY"},
     "ssl.keystore.key"),  # a chain that is not the key's
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KEYSTORE",
      "ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "ssl.enabled.protocols"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KEYSTORE",
      "ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KEYSTORE",
      "ssl.client.auth": "required", "ssl.truststore.certificates": "not a certificate"},
     "ssl.truststore.certificates"),
])
def test_tls_server_context_refuses_with_the_key(pki: Pki, props: dict[str, str],
                                                 key: str) -> None:
    values = {"KEYSTORE": str(pki.broker_keystore), "ENCRYPTED": str(pki.broker_encrypted_keystore),
              "KEY": pki.broker_key.read_text(), "CA": pki.ca.read_text()}
    resolved = {k: values.get(v, v) for k, v in props.items()}
    with pytest.raises(TlsConfigError) as info:
        server_context(resolved, where="listener SSL")
    assert info.value.key == key
    assert str(info.value).startswith("listener SSL: ")


def test_tls_client_context_from_client_properties(pki: Pki) -> None:
    assert client_context({"security.protocol": "PLAINTEXT"}) is None
    assert client_context({"security.protocol": "SASL_PLAINTEXT"}) is None
    java = client_context({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                           "ssl.truststore.location": str(pki.ca),
                           "ssl.keystore.type": "PEM",
                           "ssl.keystore.location": str(pki.client_keystore)})
    assert java is not None and java.check_hostname
    librdkafka = client_context({"security.protocol": "sasl_ssl",
                                 "ssl.ca.location": str(pki.ca),
                                 "ssl.certificate.location": str(pki.client_cert),
                                 "ssl.key.location": str(pki.client_key),
                                 "ssl.endpoint.identification.algorithm": ""})
    assert librdkafka is not None and not librdkafka.check_hostname
    assert len(librdkafka.get_ca_certs()) == 1


@pytest.mark.parametrize("props, key", [
    ({"ssl.truststore.location": "CA"}, "ssl.truststore.type"),  # JKS by default
    ({"ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
    ({"ssl.endpoint.identification.algorithm": "ldap"}, "ssl.endpoint.identification.algorithm"),
])
def test_tls_client_context_refuses_with_the_key(pki: Pki, props: dict[str, str],
                                                 key: str) -> None:
    resolved = {k: str(pki.ca) if v == "CA" else v for k, v in props.items()}
    with pytest.raises(TlsConfigError) as info:
        client_context({"security.protocol": "SSL", **resolved})
    assert info.value.key == key
