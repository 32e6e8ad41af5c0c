"""Quotas across a cluster: two `ads broker` processes on a real ZooKeeper; a quota set
through one broker is described and enforced by the other, from ZooKeeper's entity configs
and their change notifications, and again once that broker restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster
from quota_support import EXACT, alter, describe

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 2)
    try:
        yield c.start()
    finally:
        c.stop()


def _throttled(bootstrap: str, topic: str, client_id: str, sends: int = 1000) -> bool:
    """Whether a producer with this client id is told of a throttle within `sends` sends
    (and 15 s)."""
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "linger.ms": 0, "throttle_cb": lambda e: throttles.append(
                             e.throttle_time)})
    deadline = time.monotonic() + 15
    for _ in range(sends):
        if any(throttles) or time.monotonic() > deadline:
            break
        producer.produce(topic, b"v")
        producer.flush(5)
    return any(throttles)


def test_quotas_cluster_set_on_one_broker_enforced_by_the_other(two_brokers: Cluster) -> None:
    c = two_brokers
    one, two = c.brokers[1].bootstrap, c.brokers[2].bootstrap
    admin = c.admin(2)
    admin.create_topics([NewTopic("on-two", 1, replica_assignment=[[2]])])["on-two"].result(30)
    assert alter(one, {"client-id": "busy"}, {"request_percentage": 0.01}) == (0, None)
    wanted = {(("client-id", "busy"),): {"request_percentage": 0.01}}
    c.wait_for(lambda: describe(two, [("client-id", EXACT, "busy")])[1] == wanted,
               "broker 2 describes the quota set through broker 1")
    # Every request of this producer goes to broker 2, the only one it knows and the leader.
    assert _throttled(two, "on-two", "busy")
    assert not _throttled(two, "on-two", "idle-client", sends=20)

    c.brokers[2].stop()
    c.brokers[2].start()
    c.wait_for(lambda: describe(two, [("client-id", EXACT, "busy")])[1] == wanted,
               "the quota after a restart")
    assert _throttled(two, "on-two", "busy")
