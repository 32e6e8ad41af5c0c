"""A follower whose log fails keeps replicating its other partitions.

A real ZooKeeper, a leader (`ads broker` process, node 1) and a follower run in this
process (node 2) whose logs write through a fault-injecting file layer (`FaultyFileIO`).
Topics `bad` and `good` have both brokers as replicas, led by node 1. A failed fsync
takes the follower's `bad` log offline (`flush.messages=1` fsyncs each append); the
leader drops the follower from the ISR, DeleteRecords moves `bad`'s log start past the
follower, whose next fetch is answered OFFSET_OUT_OF_RANGE, and starting over at the
leader's log start then fails on the offline log. Only `bad` stops: `good` is still copied,
the failure is logged and `/metrics` counts the failed partition. (Before, that storage
error escaped the fetcher's task and every partition it followed stopped replicating.)
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ads.storage.fileio import FaultyFileIO
from ads.testing.embedded import EmbeddedBroker
from ads.testing.zookeeper import ZooKeeperServer, zookeeper_available
from broker_process import BrokerProcess, free_port
from replication_support import produce

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(180)]


class Pair:
    def __init__(self, zk: ZooKeeperServer, leader: BrokerProcess, follower: EmbeddedBroker,
                 io: FaultyFileIO, metrics_port: int) -> None:
        self.zk, self.leader, self.follower = zk, leader, follower
        self.io, self.metrics_port = io, metrics_port

    def follower_end(self, topic: str) -> int:
        broker = self.follower.broker
        assert broker is not None
        part = broker.replica_manager.get(topic, 0)
        return -1 if part is None else part.log_end_offset

    def follower_offline(self, topic: str) -> bool:
        broker = self.follower.broker
        assert broker is not None
        part = broker.replica_manager.get(topic, 0)
        return part is not None and part.log.offline

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - loopback
            return str(r.read().decode())


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    zk = ZooKeeperServer(tmp_path / "zk", free_port()).start()
    common = [f"zookeeper.connect={zk.connect}", "zookeeper.session.timeout.ms=4000",
              "replica.lag.time.max.ms=2000", "offsets.topic.num.partitions=1"]
    leader = BrokerProcess(tmp_path / "broker-1", None, "node.id=1", *common)
    io = FaultyFileIO()
    metrics_port = free_port()
    follower = EmbeddedBroker(tmp_path / "broker-2", node_id=2, file_io=io, config={
        **dict(s.split("=", 1) for s in common),
        "http.listener": f"127.0.0.1:{metrics_port}"})
    try:
        leader.start()
        follower.start()
        yield Pair(zk, leader, follower, io, metrics_port)
    finally:
        io.clear()
        follower.stop()
        if leader.proc is not None and leader.proc.poll() is None:
            leader.kill9()
        zk.stop()


def _deleted(admin: AdminClient, topic: str, offset: int) -> bool:
    """DeleteRecords up to `offset` (refused while the high watermark is below it)."""
    tp = TopicPartition(topic, 0, offset)
    try:
        admin.delete_records([tp])[tp].result(10)
    except KafkaException:
        return False
    return True


def _wait(check: object, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_replication_fetcher_failed_log_fails_only_its_partition(
        pair: Pair, caplog: pytest.LogCaptureFixture) -> None:
    bootstrap = pair.leader.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic("bad", num_partitions=1, replica_assignment=[[1, 2]],
                 config={"flush.messages": "1"}),
        NewTopic("good", num_partitions=1, replica_assignment=[[1, 2]])])
    for f in futures.values():
        f.result(30)
    assert produce(bootstrap, "bad", [b"b0", b"b1"]) == []
    assert produce(bootstrap, "good", [b"g0"]) == []
    _wait(lambda: pair.follower_end("bad") == 2 and pair.follower_end("good") == 1,
          "the follower caught up")

    pair.io.fail_next_fsync()  # the follower's next append to `bad` fsyncs, and fails
    assert produce(bootstrap, "bad", [f"b{i}".encode() for i in range(2, 12)]) == []
    _wait(lambda: pair.follower_offline("bad"), "the follower's bad log offline")
    # Out of the ISR after replica.lag.time.max.ms, then behind the leader's log start.
    _wait(lambda: _deleted(admin, "bad", 12), "records deleted on the leader", timeout_s=40)

    _wait(lambda: "ads_replica_fetcher_failed_partitions 1.0" in pair.metrics(),
          "the failed partition on /metrics")
    # Long enough for `bad` to have been fetched again after its backoff (1 s), had it
    # been: its answer, OFFSET_OUT_OF_RANGE, is what once stopped the whole fetcher.
    time.sleep(2.5)
    assert produce(bootstrap, "good", [f"g{i}".encode() for i in range(1, 30)]) == []
    _wait(lambda: pair.follower_end("good") == 30, "good still replicated")
    assert pair.follower_end("bad") == 2  # nothing more for the failed one
    assert any("bad-0: replicating from broker 1 failed; the partition is no longer fetched"
               in r.getMessage() and "fsync failed" in r.exc_text for r in caplog.records
               if r.exc_text)
