"""Blocking Kafka-protocol client connections (``ads.client.blocking``), for the command
line, the Spark source, tools and tests; built on ``ads.protocol`` and ``ads.common``.
Connections secured as Kafka client properties say (TLS, SASL) come from
``ConnectionFactory``; TLS contexts from Kafka's ``ssl.*`` keys are in ``ads.client.tls``."""

from ads.client.blocking import (
    DEFAULT_MAX_FRAME_BYTES,
    ClientError,
    Connection,
    ConnectionFactory,
    choose_versions,
    parse_address,
    parse_servers,
)
from ads.client.security import ClientConfigError, ClientSecurity

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "ClientConfigError",
    "ClientError",
    "ClientSecurity",
    "Connection",
    "ConnectionFactory",
    "choose_versions",
    "parse_address",
    "parse_servers",
]
