"""Share groups (KIP-932) over a replicated partition: the share-partition's state lives in
`__share_group_state` (the share coordinator), so when its leader is killed the new leader
goes on from what was acknowledged. Three broker processes on a real ZooKeeper,
confluent-kafka ShareConsumers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer

from cluster_support import Cluster
from replication_support import FAST, create, partition_state
from share_support import share_worker

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]

N = 24
RELEASES = 2  # the first record the consumer gets is released this many times
# One record a batch, and share fetches of a few batches (a fetch acquires whole batches
# up to its byte limit), so that two consumers share the records.
VALUE = b"x" * 200
SMALL_FETCHES = {"fetch.max.bytes": "1000", "message.max.bytes": "1000"}


class Tally:
    """What one explicit-mode ShareConsumer saw and had acknowledged."""

    def __init__(self, consumer: ShareConsumer, done_elsewhere: set[int]) -> None:
        self.consumer = consumer
        self.done_elsewhere = done_elsewhere  # offsets accepted by another consumer
        self.accepted: set[int] = set()  # acknowledgements answered without error
        self.counts: dict[int, list[int]] = {}  # delivery counts seen, by offset
        self.again: list[int] = []  # offsets delivered after their acceptance
        self.released: int | None = None

    def step(self) -> None:
        msgs: list[Message] = [m for m in self.consumer.poll(0.5) if m.error() is None]
        if not msgs:
            return
        accepting = []
        for msg in msgs:
            offset = msg.offset()
            if offset in self.accepted or offset in self.done_elsewhere:
                self.again.append(offset)
            self.counts.setdefault(offset, []).append(msg.delivery_count())
            if self.released is None:
                self.released = offset
            if offset == self.released and len(self.counts[offset]) <= RELEASES:
                self.consumer.acknowledge(msg, AcknowledgeType.RELEASE)
            else:
                self.consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
                accepting.append(offset)
        results = self.consumer.commit_sync(10)
        if results and all(e is None for e in results.values()):
            self.accepted.update(accepting)

    def run_until(self, done: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline:
            self.step()


def test_replication_share_state_survives_the_leader(tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, *FAST, "group.share.enable=true",
                "group.share.auto.offset.reset=earliest",
                "group.share.heartbeat.interval.ms=300",
                "share.coordinator.state.topic.num.partitions=3").start()
    consumer: ShareConsumer | None = None
    try:
        create(c, "sq", 1, 3, **{"min.insync.replicas": "2"})
        c.wait_for(lambda: len(partition_state(c, "sq", 0)["isr"]) == 3, "ISR of three")
        producer = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0, "acks": "all"})
        for _ in range(N):
            producer.produce("sq", VALUE, partition=0)
            assert producer.flush(30) == 0
        # One consumer process accepts a poll and holds the next when the leader dies.
        with share_worker(c.bootstrap, "sq-group", "sq",
                          *(f"{k}={v}" for k, v in SMALL_FETCHES.items())) as worker:
            assert worker.committed
            elsewhere = {off for _, off in worker.acked}
            consumer = ShareConsumer({"bootstrap.servers": c.bootstrap, "group.id": "sq-group",
                                      "share.acknowledgement.mode": "explicit",
                                      "max.poll.records": 3, **SMALL_FETCHES})
            consumer.subscribe(["sq"])
            tally = Tally(consumer, elsewhere)
            # Before the kill: a record released RELEASES times (its count written each
            # time), the others of those polls accepted (the worker's accepted ones too).
            tally.run_until(lambda: tally.released is not None and len(
                tally.counts[tally.released]) >= RELEASES, 30)
            assert tally.released is not None
            seen_before = len(tally.counts[tally.released])
            assert seen_before == RELEASES

            leader = partition_state(c, "sq", 0)["leader"]
            c.brokers[leader].kill9()
            c.wait_for(lambda: partition_state(c, "sq", 0)["leader"] not in (leader, -1),
                       "a new leader from the ISR")
            tally.run_until(lambda: tally.accepted | elsewhere >= set(range(N)), 60)
        assert tally.accepted | elsewhere == set(range(N)), "records lost"
        assert tally.again == [], "acknowledged records were delivered again"
        # The worker's held records were ACQUIRED when the leader died: available again.
        assert {off for _, off in worker.held} <= tally.accepted
        # The released record's delivery count went on from the count written for it.
        counts = tally.counts[tally.released]
        after = counts[seen_before:]
        assert counts[:RELEASES] == list(range(1, RELEASES + 1)) and after, counts
        assert after[0] == RELEASES + 1, counts
    finally:
        if consumer is not None:
            consumer.close()
        c.stop()
