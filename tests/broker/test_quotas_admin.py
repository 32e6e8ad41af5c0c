"""AlterClientQuotas and DescribeClientQuotas from kafka-python's admin client: what is set
is described back through every kind of filter, Kafka's validation errors, quotas kept
across a restart, and a request_percentage quota throttling a real client."""

from __future__ import annotations

import time

from confluent_kafka import Producer
from test_http_metrics import scrape, value

from ads.testing import EmbeddedBroker
from conftest import create_topic
from quota_support import DEFAULT, EXACT, SPECIFIED, alter, alter_many, describe

INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35


def _setup(bootstrap: str) -> None:
    results = alter_many(bootstrap, [
        ({"user": "alice"}, {"producer_byte_rate": 1000}),
        ({"user": None}, {"consumer_byte_rate": 2000}),
        ({"client-id": "app"}, {"request_percentage": 12.5}),
        ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 3000,
                                                 "consumer_byte_rate": 4000}),
        ({"user": None, "client-id": None}, {"producer_byte_rate": 5000}),
    ])
    assert results == [(0, None)] * 5


def test_quotas_describe_filters(ads_broker: EmbeddedBroker) -> None:
    bootstrap = ads_broker.bootstrap_servers
    _setup(bootstrap)
    alice = (("user", "alice"),)
    default_user = (("user", None),)
    app = (("client-id", "app"),)
    alice_app = (("client-id", "app"), ("user", "alice"))
    defaults = (("client-id", None), ("user", None))

    assert describe(bootstrap, []) == (0, {
        alice: {"producer_byte_rate": 1000.0}, default_user: {"consumer_byte_rate": 2000.0},
        app: {"request_percentage": 12.5},
        alice_app: {"producer_byte_rate": 3000.0, "consumer_byte_rate": 4000.0},
        defaults: {"producer_byte_rate": 5000.0}})
    assert describe(bootstrap, [], strict=True) == (0, {})
    assert describe(bootstrap, [("user", EXACT, "alice")]) == (0, {
        alice: {"producer_byte_rate": 1000.0},
        alice_app: {"producer_byte_rate": 3000.0, "consumer_byte_rate": 4000.0}})
    assert describe(bootstrap, [("user", EXACT, "alice")], strict=True) == (0, {
        alice: {"producer_byte_rate": 1000.0}})
    assert describe(bootstrap, [("user", DEFAULT, None)], strict=True) == (0, {
        default_user: {"consumer_byte_rate": 2000.0}})
    assert describe(bootstrap, [("user", SPECIFIED, None), ("client-id", SPECIFIED, None)]
                    ) == (0, {alice_app: {"producer_byte_rate": 3000.0,
                                          "consumer_byte_rate": 4000.0},
                              defaults: {"producer_byte_rate": 5000.0}})
    assert describe(bootstrap, [("client-id", EXACT, "app")], strict=True) == (0, {
        app: {"request_percentage": 12.5}})

    # removing a key; an entity left without quotas is no longer described
    assert alter(bootstrap, {"client-id": "app"}, {"request_percentage": None}) == (0, None)
    assert alter(bootstrap, {"user": "alice", "client-id": "app"},
                 {"consumer_byte_rate": None}) == (0, None)
    code, entries = describe(bootstrap, [("client-id", SPECIFIED, None)])
    assert entries == {alice_app: {"producer_byte_rate": 3000.0},
                       defaults: {"producer_byte_rate": 5000.0}}
    # validate_only changes nothing
    assert alter(bootstrap, {"client-id": "other"}, {"producer_byte_rate": 10},
                 validate_only=True) == (0, None)
    assert describe(bootstrap, [("client-id", EXACT, "other")])[1] == {}


def test_quotas_alter_validation_errors(ads_broker: EmbeddedBroker) -> None:
    bootstrap = ads_broker.bootstrap_servers
    results = alter_many(bootstrap, [
        ({}, {"producer_byte_rate": 1}),
        ({"user": ""}, {"producer_byte_rate": 1}),
        ({"group": "g"}, {"producer_byte_rate": 1}),
        ({"client-id": "a"}, {"no_such_quota": 1}),
        ({"client-id": "b"}, {"producer_byte_rate": 0}),
        ({"client-id": "c"}, {"consumer_byte_rate": 10.5}),
        ({"client-id": "d"}, {"request_percentage": -1}),
        ({"ip": "127.0.0.1", "user": "x"}, {"producer_byte_rate": 1}),
        ({"client-id": "ok"}, {"request_percentage": 0.5}),
        ({"client-id": "ok"}, {"request_percentage": 1}),
    ])
    assert results == [
        (INVALID_REQUEST, "Invalid empty client quota entity"),
        (INVALID_REQUEST, "Empty user not supported"),
        (INVALID_REQUEST, "Unhandled client quota entity type: group"),
        (INVALID_REQUEST, "Invalid configuration key no_such_quota"),
        (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
        (INVALID_REQUEST, "consumer_byte_rate cannot be a fractional value."),
        (INVALID_REQUEST, "Quota request_percentage must be greater than 0"),
        (INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be "
                          "combined with User or ClientId"),
        (0, None),
        (INVALID_REQUEST, "Ignoring duplicate entity"),
    ]
    # only the valid entry was stored
    assert describe(bootstrap, [])[1] == {(("client-id", "ok"),): {"request_percentage": 0.5}}
    assert describe(bootstrap, [("user", EXACT, "a"), ("user", EXACT, "b")])[0] == \
        INVALID_REQUEST
    assert describe(bootstrap, [("group", EXACT, "g")])[0] == UNSUPPORTED_VERSION


def test_quotas_survive_a_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with EmbeddedBroker(tmp_path) as broker:
        _setup(broker.bootstrap_servers)
        before = describe(broker.bootstrap_servers, [])
    with EmbeddedBroker(tmp_path) as broker:
        assert describe(broker.bootstrap_servers, []) == before
        assert broker.broker is not None and broker.broker.quotas.produce.enabled


def test_quotas_request_percentage_throttles_a_client() -> None:
    """A client id allowed a hundredth of a percent of a thread is throttled by its first
    requests; librdkafka reports each throttle it is told of, /metrics counts them."""
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as broker:
        _request_percentage_throttles(broker)


def _request_percentage_throttles(broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "t")
    assert alter(bootstrap, {"client-id": "busy"}, {"request_percentage": 0.01}) == (0, None)
    throttled: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "busy",
                         "linger.ms": 0,
                         "throttle_cb": lambda e: throttled.append(e.throttle_time)})
    deadline = time.monotonic() + 20
    while not any(throttled) and time.monotonic() < deadline:
        producer.produce("t", b"v")
        producer.flush(5)
    assert any(throttled)
    samples = scrape(broker)
    assert value(samples, "ads_quota_throttled_requests_total", quota="request_percentage") > 0
    assert value(samples, "ads_quota_throttled_requests_total", quota="producer_byte_rate") == 0
    assert value(samples, "ads_quota_throttle_time_seconds_total",
                 quota="request_percentage") > 0


def test_quotas_user_quota_applies_to_the_principal(ads_broker: EmbeddedBroker) -> None:
    """Until TLS or SASL name someone, a connection's user is ANONYMOUS; a quota on that
    user comes before one on the client id (Kafka's order), and throttles."""
    bootstrap = ads_broker.bootstrap_servers
    create_topic(bootstrap, "t")
    assert alter_many(bootstrap, [({"user": "ANONYMOUS"}, {"producer_byte_rate": 100}),
                                  ({"client-id": "app"}, {"producer_byte_rate": 10**12})]
                      ) == [(0, None), (0, None)]
    throttled: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "app",
                         "linger.ms": 0,
                         "throttle_cb": lambda e: throttled.append(e.throttle_time)})
    deadline = time.monotonic() + 20
    while not any(throttled) and time.monotonic() < deadline:
        producer.produce("t", b"v" * 1000)
        producer.flush(5)
    assert any(throttled)
