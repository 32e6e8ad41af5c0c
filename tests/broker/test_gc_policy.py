"""The `ads broker` process's collector: what start-up made and what survives a full
collection is frozen out of later ones, the periodic whole collection frees cycles frozen
meanwhile, and `/metrics` shows it (`ads.common.gc_policy`)."""

from __future__ import annotations

import gc
import time
import urllib.error
import weakref
from pathlib import Path

import pytest
from confluent_kafka import Producer

from ads.common import gc_policy
from ads.common.gc_policy import GcPolicy
from broker_process import BrokerProcess, free_port
from conftest import create_topic
from http_support import metric_samples


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_gc_policy_keeps_frozen_cycles_until_the_whole_collection() -> None:
    cycle = _Node()
    alive = weakref.ref(cycle)
    freezer = GcPolicy(freeze=True)
    assert gc.get_freeze_count() == 0
    freezer.install()
    try:
        assert gc_policy.installed() is freezer
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # this process's objects, the cycle among them
        del cycle
        gc.collect()  # a full collection walks no frozen object: the cycle stays
        assert alive() is not None
        assert freezer.pause_s[2] > 0 and freezer.longest_s[2] > 0
        freezer.collect_all()  # thawed, collected, frozen again
        assert alive() is None
        assert gc.get_freeze_count() > 1000
        with pytest.raises(RuntimeError, match="already installed"):
            GcPolicy(freeze=False).install()
    finally:
        freezer.uninstall()
    assert gc_policy.installed() is None and gc.get_freeze_count() == 0


def test_gc_policy_without_freeze_only_times_collections() -> None:
    policy = GcPolicy(freeze=False)
    policy.install()
    try:
        gc.collect()
        assert gc.get_freeze_count() == 0
        assert policy.pause_s[2] > 0 and policy.longest_s[2] > 0
    finally:
        policy.uninstall()
    assert gc_policy.installed() is None


def _wait_for(url: str, ok, what: str, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            samples = metric_samples(url)
        except urllib.error.URLError as exc:  # the HTTP listener may open after Kafka's
            assert time.monotonic() < deadline, f"{what}: {exc}"
            time.sleep(0.1)
            continue
        if ok(samples):
            return samples
        assert time.monotonic() < deadline, f"{what}: {samples}"
        time.sleep(0.1)


FROZEN = ("ads_gc_frozen_objects", ())
FULL = ("ads_gc_collections_total", (("generation", "2"),))
PAUSE = ("ads_gc_pause_seconds_total", (("generation", "2"),))


@pytest.mark.broker_process
def test_broker_process_freezes_new_partitions_after_a_full_collection(tmp_path: Path) -> None:
    http = free_port()
    broker = BrokerProcess(tmp_path / "data", None, f"http.listener=127.0.0.1:{http}",
                           "gc.full.collection.interval.ms=300").start()
    url = f"http://127.0.0.1:{http}"
    try:
        start = _wait_for(url, lambda s: s.get(FROZEN, 0) > 10_000, "start-up not frozen")
        assert start[PAUSE] > 0
        create_topic(broker.bootstrap, "gc-many", partitions=300)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(3000):
            producer.produce("gc-many", value=b"v%d" % i, partition=i % 300)
        assert producer.flush(30) == 0
        # The periodic whole collection (every 300 ms here) freezes the partitions' logs,
        # segments and indexes with the rest: more than ten objects each.
        after = _wait_for(url, lambda s: s[FROZEN] > start[FROZEN] + 3000
                          and s[FULL] >= start[FULL] + 2, "new partitions not frozen")
        assert after[("ads_topic_messages_in_total", (("topic", "gc-many"),))] == 3000
    finally:
        assert broker.stop() == 0, broker.log()


@pytest.mark.broker_process
def test_broker_process_without_gc_freeze_times_collections_only(tmp_path: Path) -> None:
    http = free_port()
    broker = BrokerProcess(tmp_path / "data", None, f"http.listener=127.0.0.1:{http}",
                           "gc.freeze.enable=false").start()
    try:
        _wait_for(f"http://127.0.0.1:{http}", lambda s: s.get(("ads_broker_ready", ())) == 1,
                  "not ready")
        create_topic(broker.bootstrap, "gc-off", partitions=10)
        samples = metric_samples(f"http://127.0.0.1:{http}")
        assert samples[FROZEN] == 0
        assert PAUSE in samples  # timed all the same
    finally:
        assert broker.stop() == 0, broker.log()
