"""Connection limits with real sockets and a real client: the connections beyond
`max.connections.per.ip` (or its address's override) or `max.connections` are closed at
once while the others keep being served, and a connection idle past
`connections.max.idle.ms` is closed."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka.admin import AdminClient
from test_http_metrics import scrape, value

from ads.broker.config import ConfigError, load_broker_config
from ads.client import ClientError
from ads.protocol import messages as m
from ads.testing import EmbeddedBroker
from kafka_wire import RawConnection


def _served(conn: RawConnection) -> bool:
    response = conn.request(m.ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest(
        client_software_name="test", client_software_version="1"))
    return bool(response.error_code == 0 and response.api_keys)


def _refused(bootstrap: str) -> bool:
    """A new connection is accepted by the kernel, then closed without an answer."""
    try:
        conn = RawConnection(bootstrap)
    except ClientError:
        return True
    with conn:
        try:
            _served(conn)
        except ClientError:
            return True
        return False


def _client_lists_topics(bootstrap: str, timeout_s: float = 5.0) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.list_topics(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - KafkaException: the client could not connect
        return False
    return True


@pytest.mark.parametrize("config", [
    {"max.connections.per.ip": "3"},
    {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:3"},
    {"max.connections": "3"},
])
def test_connection_limits_refuse_the_excess_and_serve_the_others(
        config: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ads.net")
    with EmbeddedBroker(config={**config, "http.listener": "127.0.0.1:0"}) as broker:
        bootstrap = broker.bootstrap_servers
        held = [RawConnection(bootstrap) for _ in range(3)]
        try:
            assert all(_served(c) for c in held)
            assert _refused(bootstrap)
            assert _refused(bootstrap)
            assert not _client_lists_topics(bootstrap, 1.5), "a client got a fourth connection"
            assert all(_served(c) for c in held), "the admitted connections are still served"
            refusals = [r for r in caplog.records if "closing a new connection" in r.message]
            assert len(refusals) == 1, "refusals are logged once per address and interval"
            assert value(scrape(broker), "ads_connections_refused_total") >= 3
            held.pop().close()
            deadline = time.monotonic() + 10
            while not _client_lists_topics(bootstrap) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _client_lists_topics(bootstrap)
        finally:
            for conn in held:
                conn.close()


def test_connection_limits_close_idle_connections(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ads.net")
    with EmbeddedBroker(config={"connections.max.idle.ms": "400"}) as broker:
        bootstrap = broker.bootstrap_servers
        with RawConnection(bootstrap) as idle, RawConnection(bootstrap) as busy:
            assert _served(idle)
            deadline = time.monotonic() + 10
            closed = False
            while not closed and time.monotonic() < deadline:
                assert _served(busy), "a connection sending requests is not idle"
                closed = idle.is_closed(timeout=0.1)
            assert closed
            assert _served(busy)
        assert any("connections.max.idle.ms" in r.message for r in caplog.records)


def test_connection_limits_overrides_must_be_host_counts() -> None:
    with pytest.raises(ConfigError, match="`b` is not host:count"):
        load_broker_config(None, {}, ["max.connections.per.ip.overrides=a:1,b"])
    config, _ = load_broker_config(None, {}, [
        "max.connections.per.ip.overrides=localhost:3, 10.0.0.1:0"])
    with EmbeddedBroker(config={"max.connections.per.ip.overrides": "localhost:3"}) as b:
        assert b.broker is not None
        assert b.broker.connection_limits.overrides == {"127.0.0.1": 3}
    assert config.get("max.connections.per.ip.overrides") == "localhost:3, 10.0.0.1:0"
