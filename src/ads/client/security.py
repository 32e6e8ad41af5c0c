"""Client security settings from Kafka client properties, which
``ads.client.blocking.ConnectionFactory`` makes every blocking connection of ADS with.

A client's properties (a `--command-config` file, the Spark connector's `kafka.*` options)
name the security protocol and its settings with Kafka's keys; both the Java client's and
librdkafka's spellings are read:

- `security.protocol`: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
- TLS: the `ssl.*` keys `ads.client.tls.client_context` reads, the server's host name
  checked unless `ssl.endpoint.identification.algorithm` is empty;
- SASL: `sasl.mechanism` (Java) or `sasl.mechanisms` (librdkafka), default GSSAPI as in
  Kafka, so it must be set to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the user and password
  from `sasl.username` / `sasl.password` (librdkafka) or the `username=` / `password=`
  options of a `sasl.jaas.config` line (Java).

Everything is read, and files opened, when the settings are made: a problem raises
`ClientConfigError` naming the key, before any connection is tried.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from ads.client.sasl import PLAIN, SCRAM_HASHES
from ads.client.tls import TlsConfigError, client_context
from ads.common.jaas import JaasError, parse_jaas_config

__all__ = ["PROTOCOLS", "ClientConfigError", "ClientSecurity", "jaas_credentials",
           "librdkafka_properties"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = (PLAIN, *SCRAM_HASHES)


class ClientConfigError(ValueError):
    """A client property cannot be used; `key` names it."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def jaas_credentials(text: str, key: str = "sasl.jaas.config") -> tuple[str, str] | None:
    """The `username` and `password` options of a JAAS line's first login module that has
    both (Kafka's PlainLoginModule and ScramLoginModule take them); None if none has."""
    try:
        modules = parse_jaas_config(text)
    except JaasError as exc:
        raise ClientConfigError(f"{key}: {exc}", key) from exc
    for module in modules:
        user, password = module.options.get("username"), module.options.get("password")
        if user is not None and password is not None:
            return user, password
    return None


def librdkafka_properties(props: Mapping[str, object]) -> dict[str, object]:
    """`props` with the Java client's security keys that librdkafka does not know turned
    into librdkafka's, so one client.properties serves both kinds of client:
    `sasl.jaas.config` becomes `sasl.username` / `sasl.password`; PEM trust and key stores
    (`ssl.truststore.location`, `ssl.keystore.location` of type PEM, and the inline
    `ssl.truststore.certificates`, `ssl.keystore.certificate.chain`, `ssl.keystore.key`)
    become `ssl.ca.location`, `ssl.certificate.location` + `ssl.key.location`,
    `ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`; an empty
    `ssl.endpoint.identification.algorithm` becomes `none`. Keys librdkafka has already
    win; other keys pass unchanged."""
    out = dict(props)
    jaas = out.pop("sasl.jaas.config", None)
    if isinstance(jaas, str) and "sasl.username" not in out:
        found = jaas_credentials(jaas)
        if found is not None:
            out["sasl.username"], out["sasl.password"] = found
    truststore_type = str(out.pop("ssl.truststore.type", "PEM")).strip().upper()
    if "ssl.truststore.location" in out and truststore_type == "PEM":
        out.setdefault("ssl.ca.location", out.pop("ssl.truststore.location"))
    if "ssl.truststore.certificates" in out:
        out.setdefault("ssl.ca.pem", out.pop("ssl.truststore.certificates"))
    keystore_type = str(out.pop("ssl.keystore.type", "PEM")).strip().upper()
    if "ssl.keystore.location" in out and keystore_type == "PEM":
        location = out.pop("ssl.keystore.location")  # key and chain in one file
        out.setdefault("ssl.certificate.location", location)
        out.setdefault("ssl.key.location", location)
    for java, native in (("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
                         ("ssl.keystore.key", "ssl.key.pem")):
        if java in out:
            out.setdefault(native, out.pop(java))
    if str(out.get("ssl.endpoint.identification.algorithm", "x")).strip() == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How to secure a connection: a TLS context for SSL and SASL_SSL, a SASL mechanism
    with its credentials for SASL_PLAINTEXT and SASL_SSL."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str = ""
    username: str = ""
    password: str = ""

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> ClientSecurity:
        text = {k: str(v) for k, v in props.items() if isinstance(v, str | int | float)}
        protocol = (text.get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ClientConfigError(f"security.protocol={protocol} is not one of "
                                    f"{', '.join(PROTOCOLS)}", "security.protocol")
        text["security.protocol"] = protocol
        try:
            ctx = client_context(text)
        except TlsConfigError as exc:
            raise ClientConfigError(str(exc), exc.key) from exc
        if not protocol.startswith("SASL_"):
            return cls(protocol, ctx)
        key = "sasl.mechanisms" if "sasl.mechanism" not in text and "sasl.mechanisms" in text \
            else "sasl.mechanism"
        mechanism = (text.get(key) or "GSSAPI").strip().upper()
        if mechanism not in _MECHANISMS:
            raise ClientConfigError(f"{key}={mechanism} is not supported (PLAIN, "
                                    "SCRAM-SHA-256 or SCRAM-SHA-512)", key)
        user, password = text.get("sasl.username"), text.get("sasl.password")
        if (user is None or password is None) and text.get("sasl.jaas.config"):
            found = jaas_credentials(text["sasl.jaas.config"])
            if found is None:
                raise ClientConfigError("sasl.jaas.config has no username and password "
                                        "options", "sasl.jaas.config")
            user, password = found
        if user is None or password is None:
            raise ClientConfigError(f"security.protocol={protocol} needs sasl.username and "
                                    "sasl.password (or a sasl.jaas.config line with "
                                    "username= and password=)", "sasl.username")
        return cls(protocol, ctx, mechanism, user, password)
