"""kill -9 of a broker subprocess in the middle of cleaning: after each restart a
confluent-kafka consumer from the start sees a log that satisfies the four guarantees
against every acknowledged write (random workloads, random kill points)."""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from hypothesis import event, given, settings
from hypothesis import strategies as st

from broker_process import BrokerProcess
from compaction_support import Write, check_guarantees, read_partition
from conftest import create_topic

TOPIC = "kv"
RETENTION_MS = 600_000  # every tombstone must still be there when the test reads


def produce(bootstrap: str, rng: random.Random, count: int, keys: int,
            delete_rate: float) -> list[Write]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all",
                         "batch.size": 8192})
    acked: list[Write] = []

    def done(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))

    for i in range(count):
        key = b"key-%d" % rng.randrange(keys)
        value = None if rng.random() < delete_rate else b"%d-" % i + b"v" * rng.randrange(200)
        producer.produce(TOPIC, key=key, value=value, partition=0, on_delivery=done)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == count
    return sorted(acked)


def read_all(bootstrap: str) -> list[tuple[int, bytes | None, bytes | None]]:
    return read_partition(bootstrap, TOPIC, timeout_s=60)


def kill_while_cleaning(broker: BrokerProcess, partition_dir: Path, wait_s: float,
                        on_cleaned_file: bool) -> bool:
    """kill -9 after ``wait_s``, or as soon as a ``.cleaned`` file exists; True if one did."""
    deadline = time.monotonic() + wait_s
    seen_cleaned = False
    while time.monotonic() < deadline:
        seen_cleaned = any(partition_dir.glob("*.cleaned"))
        if seen_cleaned and on_cleaned_file:
            break
        time.sleep(0.002)
    broker.kill9()
    return seen_cleaned


@pytest.mark.broker_process
@pytest.mark.slow
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), keys=st.sampled_from([20, 200]),
       delete_rate=st.sampled_from([0.0, 0.15]))
def test_compaction_kill9_mid_clean_keeps_guarantees(seed: int, keys: int,
                                                      delete_rate: float) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        # A throttled cleaner makes every pass last long enough to be killed inside it.
        broker = BrokerProcess(data, None, "log.cleaner.backoff.ms=20",
                               "log.cleaner.io.max.bytes.per.second=300000").start()
        try:
            create_topic(broker.bootstrap, TOPIC, **{
                "cleanup.policy": "compact", "segment.bytes": "32768",
                "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0",
                "delete.retention.ms": str(RETENTION_MS)})
            writes: list[Write] = []
            for round_ in range(3):
                writes += produce(broker.bootstrap, rng, 1500, keys, delete_rate)
                if kill_while_cleaning(broker, data / f"{TOPIC}-0", rng.uniform(0.2, 1.5),
                                       on_cleaned_file=round_ % 2 == 0):
                    event("killed while a .cleaned segment was being written")
                broker.start()
                seen = read_all(broker.bootstrap)
                check_guarantees(writes, seen, keep_tombstones_after_ms=0)
            leftovers = [p.name for p in (data / f"{TOPIC}-0").iterdir()
                         if p.name.endswith((".cleaned", ".swap"))]
            assert not any(name.endswith(".swap") for name in leftovers)
        finally:
            if broker.proc is not None and broker.proc.poll() is None:
                broker.kill9()
