"""The broker registration znode (/brokers/ids/<id>) in Kafka's v5 JSON: every advertised
listener, its security protocol, and host/port of the PLAINTEXT one."""

from __future__ import annotations

import json

from ads.metadata import zk_layout as zl
from ads.metadata.model import BrokerEndpoint, ListenerEndpoint

SSL = ListenerEndpoint("SSL", "SSL", "broker1.example", 9093)
INTERNAL = ListenerEndpoint("INTERNAL", "PLAINTEXT", "10.0.0.1", 9092)


def test_zk_broker_registration_lists_every_listener() -> None:
    endpoint = BrokerEndpoint(1, SSL.host, SSL.port, "rack-a", (SSL, INTERNAL))
    data = json.loads(zl.encode_broker(endpoint))
    assert data["version"] == 5
    assert data["endpoints"] == ["SSL://broker1.example:9093", "INTERNAL://10.0.0.1:9092"]
    assert data["listener_security_protocol_map"] == {"SSL": "SSL", "INTERNAL": "PLAINTEXT"}
    # As Kafka: host and port name the endpoint whose protocol is PLAINTEXT.
    assert (data["host"], data["port"]) == ("10.0.0.1", 9092)
    assert zl.decode_broker(1, zl.encode_broker(endpoint)) == endpoint


def test_zk_broker_registration_without_plaintext_has_null_host() -> None:
    data = json.loads(zl.encode_broker(BrokerEndpoint(2, SSL.host, SSL.port, None, (SSL,))))
    assert data["host"] is None and data["port"] == -1
    decoded = zl.decode_broker(2, zl.encode_broker(BrokerEndpoint(2, SSL.host, SSL.port,
                                                                  None, (SSL,))))
    assert decoded.on("SSL") == SSL and decoded.on("PLAINTEXT") is None
    assert (decoded.host, decoded.port) == (SSL.host, SSL.port)


def test_zk_broker_registration_written_by_kafka() -> None:
    kafka = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
             b'"SASL_SSL":"SASL_SSL"},"endpoints":["PLAINTEXT://kafka-0:9092",'
             b'"SASL_SSL://[::1]:9094"],"jmx_port":-1,"port":9092,"host":"kafka-0",'
             b'"version":5,"timestamp":"1700000000000"}')
    b = zl.decode_broker(0, kafka)
    assert b.on("SASL_SSL") == ListenerEndpoint("SASL_SSL", "SASL_SSL", "::1", 9094)
    assert b.on("PLAINTEXT") == ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "kafka-0", 9092)
    assert json.loads(zl.encode_broker(b))["endpoints"][1] == "SASL_SSL://[::1]:9094"


def test_zk_broker_registration_before_listener_names() -> None:
    """Version 1 had host and port only; the listener is then PLAINTEXT."""
    b = zl.decode_broker(3, b'{"version":1,"host":"old","port":9092,"jmx_port":-1}')
    assert b.on("PLAINTEXT") == ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "old", 9092)
