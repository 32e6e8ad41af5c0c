"""Compaction through the broker with real clients: the seed's email example, the four
guarantees as a confluent-kafka consumer sees them, keyless produce rejected, per-topic
policies, and reads and writes that never wait for a cleaning pass."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from ads.storage.cleaner import LogCleaner
from ads.testing import EmbeddedBroker
from compaction_support import Write, check_guarantees
from compaction_support import read_partition as consume
from conftest import create_topic

FAST_CLEANER = {"log.cleaner.backoff.ms": "50", "log.retention.check.interval.ms": "100"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "600", "file.delete.delay.ms": "0",
           "min.cleanable.dirty.ratio": "0.01"}

Seen = tuple[int, bytes | None, bytes | None]


def wait_for(cond: Callable[[], object], timeout: float = 20.0, what: str = "") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or cond}")


def cleaner_of(broker: EmbeddedBroker) -> LogCleaner:
    assert broker.broker is not None and broker.broker.log_cleaner is not None
    return broker.broker.log_cleaner




class Writer:
    """A producer that records every acknowledged write (the model's input)."""

    def __init__(self, bootstrap: str) -> None:
        # One record per batch, so small segments roll predictably.
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                  "batch.num.messages": 1})
        self.writes: list[Write] = []
        self.errors: list[KafkaError] = []

    def _done(self, err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            self.errors.append(err)
        else:
            self.writes.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))

    def send(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        self.producer.produce(topic, key=key, value=value, partition=0, on_delivery=self._done)
        self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0
        assert not self.errors, self.errors
        self.writes.sort()

    def filler(self, topic: str, count: int, tag: str = "") -> None:
        for i in range(count):
            self.send(topic, f"filler-{tag}{i}".encode(), b"x" * 100)


def test_compaction_broker_email_example(tmp_path: Path,
                                         caplog: pytest.LogCaptureFixture) -> None:
    config = dict(FAST_CLEANER)
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as broker, \
            caplog.at_level(logging.INFO, logger="ads.storage.cleaner"):
        bs = broker.bootstrap_servers
        create_topic(bs, "emails", **COMPACT, **{"delete.retention.ms": "2000"})
        w = Writer(bs)
        w.send("emails", b"123", b"bill@microsoft.com")
        w.filler("emails", 3, "a")
        w.send("emails", b"123", b"bill@gatesfoundation.org")
        w.filler("emails", 3, "b")
        w.send("emails", b"123", b"bill@gmail.com")
        w.filler("emails", 12, "c")
        w.flush()

        def only_last() -> bool:
            return [v for _, k, v in consume(bs, "emails") if k == b"123"] == [b"bill@gmail.com"]

        wait_for(only_last, what="the first two emails to be compacted away")
        seen = consume(bs, "emails")
        check_guarantees(w.writes, seen)
        assert "cleaned log emails-0" in caplog.text
        metrics = cleaner_of(broker).metrics
        assert metrics.passes >= 1 and metrics.bytes_read > 0 and metrics.messages_read > 0

        # The seed's 36/37/38: the first email's offset is still a valid position.
        first = w.writes[0][0]
        assert consume(bs, "emails", start=first)[0][0] == min(o for o, _, _ in seen if o >= first)

        # A tombstone deletes the key: readers see it for delete.retention.ms, then neither it
        # nor any value of the key remains.
        w.send("emails", b"123", None)
        w.filler("emails", 12, "d")
        w.flush()
        wait_for(lambda: [v for _, k, v in consume(bs, "emails") if k == b"123"] == [None],
                 what="the tombstone to be the only record of 123")
        wait_for(lambda: all(k != b"123" for _, k, _ in consume(bs, "emails")), timeout=30,
                 what="the tombstone to go after delete.retention.ms")
        check_guarantees(w.writes, consume(bs, "emails"))


def test_compaction_broker_guarantees_with_a_tailing_consumer(tmp_path: Path) -> None:
    """1: a consumer at the head sees every record with consecutive offsets, because nothing
    younger than min.compaction.lag.ms is compacted; 2-4 for a consumer from the start."""
    with EmbeddedBroker(data_dir=tmp_path / "data", config=FAST_CLEANER) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "state", **COMPACT, **{"min.compaction.lag.ms": "1500"})
        tail = Consumer({"bootstrap.servers": bs, "group.id": "tail",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        tail.assign([TopicPartition("state", 0, 0)])
        w = Writer(bs)
        tailed: list[int] = []
        for round_ in range(6):
            for i in range(40):
                w.send("state", b"key-%d" % (i % 8), b"round-%d-%d" % (round_, i))
            w.flush()
            while len(tailed) < len(w.writes):
                msg = tail.poll(1.0)
                if msg is not None and not msg.error():
                    tailed.append(msg.offset())
            time.sleep(0.4)
        tail.close()
        assert tailed == list(range(len(w.writes)))
        wait_for(lambda: cleaner_of(broker).metrics.passes > 0, what="a cleaning pass")
        now = int(time.time() * 1000)
        seen = consume(bs, "state")
        assert len(seen) < len(w.writes)
        check_guarantees(w.writes, seen)
        young = {o for o, _, _, ts in w.writes if ts > now - 1500 + 200}
        assert young <= {o for o, _, _ in seen}


def test_compaction_broker_rejects_keyless_records_per_topic_policy(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "data", config=FAST_CLEANER) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "compacted", **COMPACT)
        create_topic(bs, "both", **{**COMPACT, "cleanup.policy": "compact,delete"})
        create_topic(bs, "plain", **{"segment.bytes": "600"})
        w = Writer(bs)
        w.send("compacted", None, b"no key")
        w.send("both", None, b"no key")
        assert w.producer.flush(30) == 0
        assert [e.code() for e in w.errors] == [KafkaError.INVALID_RECORD] * 2
        w.errors.clear()
        for topic in ("compacted", "both", "plain"):
            for i in range(40):
                w.send(topic, b"k%d" % (i % 3), b"v%d" % i)
        w.send("plain", None, b"a keyless record is fine here")
        w.flush()
        assert not w.errors
        wait_for(lambda: len(consume(bs, "compacted")) < 20 and len(consume(bs, "both")) < 20,
                 what="both compacted topics to be cleaned")
        assert len(consume(bs, "plain")) == 41  # retention-only: every record stays


def test_compaction_broker_reads_and_writes_never_wait_for_a_pass(tmp_path: Path) -> None:
    config = {**FAST_CLEANER, "log.cleaner.backoff.ms": "600000",
              "log.cleaner.io.max.bytes.per.second": "1000000"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "big", **{**COMPACT, "segment.bytes": "262144"})
        create_topic(bs, "live", partitions=1)
        w = Writer(bs)
        for i in range(3000):
            w.send("big", b"key-%d" % (i % 300), b"v" * 1000)
        w.flush()
        cleaner = cleaner_of(broker)
        cleaner.wake()
        wait_for(lambda: cleaner.in_progress, what="a throttled pass to start")
        # While the pass runs (throttled to about 1 MB/s over ~5 MB of reads and writes),
        # produce and fetch both topics, counting the records received.
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "live",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        consumer.assign([TopicPartition("live", 0, 0), TopicPartition("big", 0, 3000)])
        received = 0
        sent: set[bytes] = set()
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
            i = 0
            while not stop.is_set():
                key = b"live-%d" % i
                sent.add(key)
                producer.produce("live" if i % 2 else "big", key=key, value=b"x", partition=0)
                producer.poll(0)
                i += 1
                time.sleep(0.01)
            producer.flush(10)

        thread = threading.Thread(target=produce)
        thread.start()
        measured_until = time.monotonic() + 2.5
        try:
            while time.monotonic() < measured_until:
                msg = consumer.poll(0.1)
                if msg is not None and not msg.error() and msg.key() in sent:
                    received += 1
        finally:
            stop.set()
            thread.join()
            consumer.close()
        still_cleaning = bool(cleaner.in_progress)
        assert still_cleaning, "the pass ended before the measurement did"
        # Records written during the pass were read during it: fetches did not wait for the
        # pass. (How long each took is a benchmark's figure, not this test's.)
        assert received > 50
        wait_for(lambda: not cleaner.in_progress, timeout=30, what="the pass to finish")
        check_guarantees(w.writes, [s for s in consume(bs, "big") if s[0] < 3000])


def test_compaction_broker_cleaner_settings_and_disabling(tmp_path: Path) -> None:
    config = {**FAST_CLEANER, "log.cleaner.enable": "false", "log.cleaner.threads": "2",
              "log.cleaner.dedupe.buffer.size": "1048576",
              "log.cleaner.io.max.bytes.per.second": "5000000"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as broker:
        cleaner = cleaner_of(broker)
        assert (cleaner.config.enable, cleaner.config.threads) == (False, 2)
        assert cleaner.config.map_memory_per_thread == 524288
        assert cleaner.throttler.bytes_per_second == 5_000_000
        bs = broker.bootstrap_servers
        create_topic(bs, "kept", **COMPACT)
        w = Writer(bs)
        for i in range(40):
            w.send("kept", b"k%d" % (i % 3), b"v%d" % i)
        w.flush()
        time.sleep(0.5)
        assert len(consume(bs, "kept")) == 40
        assert cleaner.metrics.passes == 0 and cleaner.offset_map_memory_bytes == 0
