"""Client quotas with real clients: set with AlterClientQuotas by kafka-python's admin
client, enforced on confluent-kafka producers and consumers (librdkafka), read back with
DescribeClientQuotas.

The rate checks measure what the quota is for: a client held to its byte rate. Kafka's
rate is measured over `quota.window.num` samples and lets a new client through its first
`quota.window.num - 1` samples' worth at once; with two 1-second samples the steady state
repeats every 2 s, so the rate is taken over whole cycles after the first. A consumer takes
longer to settle: a fetch over the quota is answered empty (as Kafka does), so its first
cycles alternate bursts and pauses; its rate is taken from the fifth second, over six whole
cycles (fewer let one burst on either edge move the figure by several percent)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ads.testing import EmbeddedBroker
from conftest import create_topic
from quota_support import alter, consume_for, fill, produce_for

QUOTA = 256_000  # bytes per second
# Whole cycles of the two-sample rate, after the first.
FROM_S, TO_S = 2.0, 8.0
RUN_S = 8.5
CONSUMER_FROM_S, CONSUMER_TO_S = 5.0, 17.0
CONSUMER_RUN_S = 17.5


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"quota.window.num": "2"}) as b:
        yield b


def test_quotas_producer_held_to_its_byte_rate_beside_an_unthrottled_one(
        broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "limited")
    create_topic(bootstrap, "free")
    assert alter(bootstrap, {"client-id": "slow-producer"},
                 {"producer_byte_rate": QUOTA}) == (0, None)
    free: list = []
    other = threading.Thread(
        target=lambda: free.append(produce_for(bootstrap, "free", "free-producer", RUN_S)))
    other.start()
    slow = produce_for(bootstrap, "limited", "slow-producer", RUN_S)
    other.join(30)

    rate = slow.rate(FROM_S, TO_S)
    assert abs(rate - QUOTA) <= 0.1 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"
    assert slow.throttles, "the producer was told of its throttling (throttle_time_ms)"
    [fast] = free
    assert not fast.throttles
    assert fast.total > 2 * QUOTA * RUN_S, "the unthrottled producer was held back"


def test_quotas_consumer_held_to_its_byte_rate_beside_an_unthrottled_one(
        broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "data")
    # A fixed amount, twice what the quota lets through in the run: the unthrottled
    # consumer must read it all in its 5 s however busy the machine is.
    filled = fill(bootstrap, "data", 2 * QUOTA * int(CONSUMER_RUN_S + 1))
    assert alter(bootstrap, {"client-id": "slow-consumer"},
                 {"consumer_byte_rate": QUOTA}) == (0, None)
    free: list = []
    other = threading.Thread(
        target=lambda: free.append(consume_for(bootstrap, "data", "free-consumer", 5.0)))
    other.start()
    slow = consume_for(bootstrap, "data", "slow-consumer", CONSUMER_RUN_S)
    other.join(30)

    rate = slow.rate(CONSUMER_FROM_S, CONSUMER_TO_S)
    assert abs(rate - QUOTA) <= 0.1 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"
    assert slow.throttles
    [fast] = free
    assert not fast.throttles
    assert fast.total == filled, "the unthrottled consumer read everything"
