"""Controlled shutdown with three broker processes: SIGTERM makes a broker ask the
controller (the ControlledShutdown request) to move its leaderships before it exits.

These tests show a clean exit when the broker leads only single-replica partitions, and
the bounded retries and clean exit when its replicated partitions have no other live ISR
member. Leaderships moving to other ISR members under a producer's load are tested in
tests/replication/test_replication_leadership.py, the controller's rules against ZooKeeper
in test_controller_elections_zk.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from test_controller_cluster import create, leaders

from ads.client import Connection
from ads.protocol import messages as m
from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster
from replication_support import partition_state

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]


@pytest.fixture
def retrying_cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 3, "controlled.shutdown.max.retries=2",
                "controlled.shutdown.retry.backoff.ms=100")
    try:
        yield c.start()
    finally:
        c.stop()


def test_cluster_controlled_shutdown_of_rf1_leader_exits_cleanly(
        retrying_cluster: Cluster) -> None:
    c = retrying_cluster
    create(c, "single", 6)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "single").values()), "leaders")
    controller = c.controller()
    with Connection.connect(c.brokers[controller].bootstrap, timeout_s=10) as conn:
        assert conn.api_versions()[m.ApiKey.CONTROLLED_SHUTDOWN] == (1, 3)
    # The controller itself stops: it answers its own request, then gives its place up.
    assert c.brokers[controller].stop() == 0
    log = c.brokers[controller].log()
    assert f"controlled shutdown of broker {controller}" in log
    assert "controlled shutdown succeeded" in log
    assert "stopped cleanly" in log
    others = [n for n in c.brokers if n != controller]
    c.wait_for(lambda: c.controller() in others, "a new controller")


def test_cluster_controlled_shutdown_retries_then_exits_when_nothing_can_move(
        retrying_cluster: Cluster) -> None:
    c = retrying_cluster
    controller = c.controller()
    node, other = (n for n in c.brokers if n != controller)
    admin = c.admin()  # kept: its futures fail once the client is collected
    admin.create_topics([NewTopic("replicated", 2, replica_assignment=[[node, other]] * 2)])[
        "replicated"].result(30)
    c.wait_for(lambda: set(leaders(c, "replicated").values()) == {node}, "leaders")
    # The other replica dies: its session ends, the ISRs shrink to the leader alone, and
    # the leaderships have nowhere to go.
    c.brokers[other].kill9()
    c.wait_for(lambda: all(partition_state(c, "replicated", p)["isr"] == [node]
                           for p in range(2)), "ISRs of the leader alone")
    assert c.brokers[node].stop() == 0
    log = c.brokers[node].log()
    assert "2 partitions remain led here" in log
    assert "retrying controlled shutdown (1 attempts left)" in log
    assert "did not move every leadership after 2 attempts; stopping anyway" in log
    assert "stopped cleanly" in log
