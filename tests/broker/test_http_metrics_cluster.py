"""/metrics and /readyz of three `ads broker` processes on a real ZooKeeper: every broker is
ready, exactly one reports itself the active controller, and when a broker holding RF=1
partitions is killed the controller reports as offline exactly the partitions that
Metadata (read with confluent-kafka) shows without a leader, and counts the clean leader
election that moved an RF=3 partition the killed broker led."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from prometheus_client.parser import text_string_to_metric_families

from ads.testing.zookeeper import zookeeper_available
from broker_process import free_port
from cluster_support import Cluster
from http_support import http_call

pytestmark = [pytest.mark.slow, pytest.mark.broker_process]


def status(url: str) -> int:
    return http_call(url, timeout_s=5).status


def gauges(url: str) -> dict[str, float]:
    """The unlabelled samples of a broker's /metrics, by name."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if not s.labels}


def test_http_metrics_cluster_controller_and_offline_partitions(tmp_path: Path) -> None:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 3)
    http = {}
    for node, broker in c.brokers.items():
        port = free_port()
        http[node] = f"http://127.0.0.1:{port}"
        broker.sets = (*broker.sets, f"http.listener=127.0.0.1:{port}")
    c.start()
    try:
        c.wait_for(lambda: all(status(u + "/readyz") == 200 for u in http.values()),
                   "every broker ready")
        c.wait_for(lambda: sum(gauges(u)["ads_active_controller"] for u in http.values()) == 1,
                   "one active controller")
        controller = c.controller()
        assert gauges(http[controller])["ads_active_controller"] == 1
        assert all(gauges(u)["ads_brokers"] == 3 for u in http.values())

        victim = next(n for n in c.brokers if n != controller)
        admin = c.admin()
        admin.create_topics([NewTopic("spread", 6, 1)])["spread"].result(30)
        others = [n for n in c.brokers if n not in (victim, controller)]
        admin.create_topics([NewTopic("moved", 1, replica_assignment=[
            [victim, controller, *others]])])["moved"].result(30)
        assert all(gauges(u)["ads_leader_elections_total"] == 0 for u in http.values())

        def leaderless() -> int:
            md = c.admin(survivor).list_topics(timeout=10)
            return sum(1 for t in md.topics.values() for p in t.partitions.values()
                       if p.leader < 0)

        survivor = controller
        c.wait_for(lambda: gauges(http[victim])["ads_leader_partitions"] >= 1,
                   "the victim leads partitions")
        assert gauges(http[controller])["ads_offline_partitions"] == 0
        c.wait_for(lambda: len(admin.list_topics("moved", timeout=10).topics["moved"]
                               .partitions[0].isrs) == 3, "`moved` to have its full ISR")
        c.brokers[victim].kill9()
        c.wait_for(lambda: leaderless() >= 1, "partitions without a leader")
        c.wait_for(lambda: gauges(http[controller])["ads_offline_partitions"] == leaderless(),
                   "the controller's offline count to match Metadata")
        assert all(gauges(http[n])["ads_offline_partitions"] == 0 for n in others)
        c.wait_for(lambda: gauges(http[controller])["ads_leader_elections_total"] >= 1,
                   "the controller to count the election that moved `moved`")
        assert gauges(http[controller])["ads_unclean_leader_elections_total"] == 0
        assert all(gauges(http[n])["ads_leader_elections_total"] == 0 for n in others)
        assert gauges(http[controller])["ads_brokers"] == 2
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(http[victim] + "/healthz", timeout=5)
    finally:
        c.stop()
