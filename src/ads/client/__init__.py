"""Blocking Kafka-protocol client connections (``ads.client.blocking``), for the command
line, the Spark source, tools and tests; built on ``ads.protocol`` only. TLS contexts from
Kafka's ``ssl.*`` keys are in ``ads.client.tls``."""

from ads.client.blocking import (
    DEFAULT_MAX_FRAME_BYTES,
    ClientError,
    Connection,
    choose_versions,
    parse_address,
    parse_servers,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "ClientError",
    "Connection",
    "choose_versions",
    "parse_address",
    "parse_servers",
]
