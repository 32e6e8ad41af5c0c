"""Restarts: clean stop and start, and kill -9 during heavy produce (subprocess broker)."""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ads.records.batch import build_batch
from broker_process import BrokerProcess
from conftest import create_topic


def _recovered_on_last_start(log: str) -> int:
    counts = re.findall(r"loaded \d+ logs \((\d+) recovered", log)
    assert counts, log
    return int(counts[-1])


def _read_all(bootstrap: str, topic: str, partitions: int, idle_s: float = 3.0) -> list:  # type: ignore[type-arg]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eof = [], set()
    deadline = time.time() + 60
    while len(eof) < partitions and time.time() < deadline:
        msg = consumer.poll(idle_s)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == -191, msg.error()  # _PARTITION_EOF
            eof.add(msg.partition())
            continue
        got.append((msg.partition(), msg.offset(), msg.value()))
    consumer.close()
    assert len(eof) == partitions, "did not reach the end of every partition"
    return got


@pytest.mark.broker_process
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_restart_clean_shutdown_keeps_everything(tmp_path: Path, sig: int) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "durable", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(1000):
        producer.produce("durable", value=f"m{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    assert broker.stop(sig) == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert "stopped cleanly" in broker.log()

    broker.start()
    got = _read_all(broker.bootstrap, "durable", 2)
    assert sorted(v for _, _, v in got) == sorted(f"m{i}".encode() for i in range(1000))
    assert broker.stop() == 0
    assert _recovered_on_last_start(broker.log()) == 0  # the clean shutdown skipped recovery


@pytest.mark.broker_process
@pytest.mark.slow
def test_restart_kill9_during_produce_keeps_acknowledged(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", None, "log.flush.interval.messages=1",
                           "log.segment.bytes=200000").start()
    create_topic(broker.bootstrap, "crashy", partitions=2)
    acked: list[tuple[int, int, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            with lock:
                acked.append((msg.partition(), msg.offset(), msg.value()))

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2,
                             "acks": "1", "message.timeout.ms": 5000, "batch.size": 65536,
                             "compression.type": "lz4"})
        i = 0
        while not stop.is_set():
            try:
                producer.produce("crashy", value=f"payload-{i}-".encode() * 8,
                                 partition=i % 2, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(6)

    t = threading.Thread(target=produce)
    t.start()
    deadline = time.time() + 30
    while len(acked) < 20000 and time.time() < deadline:
        time.sleep(0.05)
    broker.kill9()
    stop.set()
    t.join(30)
    assert len(acked) > 1000

    broker.start()
    assert _recovered_on_last_start(broker.log()) == 2  # both partitions were recovered
    got = _read_all(broker.bootstrap, "crashy", 2)
    stored = {(p, o): v for p, o, v in got}
    missing = [(p, o) for p, o, v in acked if stored.get((p, o)) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    for p in (0, 1):
        offsets = sorted(o for q, o, _ in got if q == p)
        assert offsets == list(range(len(offsets)))
    broker.stop()


def _produce(bootstrap: str, topic: str, partitions: int, values: range) -> dict[bytes, int]:
    """Each value to partition value % partitions, acks=all; the offset each was given."""
    offsets: dict[bytes, int] = {}

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        assert err is None, err
        offsets[msg.value()] = msg.offset()

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in values:
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions,
                         on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(offsets) == len(values)
    return offsets


def _tear(data: Path, topic: str, partition: int, end: int) -> int:
    """The first half of a batch at offset `end` appended to the partition's newest segment
    file, as a write cut short by the crash would leave it; the file's size before."""
    segment = sorted((data / f"{topic}-{partition}").glob("*.log"))[-1]
    size = segment.stat().st_size
    torn = build_batch([(None, b"torn" * 100)], base_offset=end)
    with segment.open("ab") as f:
        f.write(torn[: len(torn) // 2])
    return size


def _check_contiguous(got: list, partitions: int, expected: dict[bytes, int]) -> None:  # type: ignore[type-arg]
    assert {v: o for _, o, v in got} == expected
    for p in range(partitions):
        offsets = sorted(o for q, o, _ in got if q == p)
        assert offsets == list(range(len(offsets)))


@pytest.mark.broker_process
@pytest.mark.slow
def test_restart_kill9_after_clean_restart_truncates_torn_tail(tmp_path: Path) -> None:
    """Phases: write, SIGTERM, start (trusting the checkpoints: nothing recovered), read
    back and write more, SIGKILL, tear a tail, start (recovered), read back, write."""
    data, parts = tmp_path / "data", 12
    broker = BrokerProcess(data).start()
    create_topic(broker.bootstrap, "phases", partitions=parts)
    written = _produce(broker.bootstrap, "phases", parts, range(600))
    assert broker.stop() == 0
    assert (data / ".kafka_cleanshutdown").exists()

    broker.start()
    assert _recovered_on_last_start(broker.log()) == 0
    _check_contiguous(_read_all(broker.bootstrap, "phases", parts), parts, written)
    written |= _produce(broker.bootstrap, "phases", parts, range(600, 1200))
    broker.kill9()
    assert not (data / ".kafka_cleanshutdown").exists()
    torn = 5
    end = 1 + max(o for v, o in written.items() if int(v[1:]) % parts == torn)
    good_size = _tear(data, "phases", torn, end)

    broker.start()
    assert _recovered_on_last_start(broker.log()) >= parts
    assert sorted((data / f"phases-{torn}").glob("*.log"))[-1].stat().st_size == good_size
    _check_contiguous(_read_all(broker.bootstrap, "phases", parts), parts, written)
    # The torn batch took no offset: the next record gets the one after the acknowledged.
    assert _produce(broker.bootstrap, "phases", parts, range(1200 + torn, 1201 + torn)) == {
        b"v%d" % (1200 + torn): end}
    assert broker.stop() == 0


@pytest.mark.broker_process
@pytest.mark.slow
def test_restart_unreadable_checkpoint_after_clean_shutdown_recovers_every_log(
        tmp_path: Path) -> None:
    """A clean-shutdown marker without a readable recovery-point checkpoint is not trusted:
    every log is recovered from its start, so a tail torn since is cut off."""
    data, parts = tmp_path / "data", 4
    broker = BrokerProcess(data).start()
    create_topic(broker.bootstrap, "unreadable", partitions=parts)
    written = _produce(broker.bootstrap, "unreadable", parts, range(200))
    assert broker.stop() == 0
    (data / "recovery-point-offset-checkpoint").write_text("0\n3\ngarbage\n")
    end = 1 + max(o for v, o in written.items() if int(v[1:]) % parts == 1)
    good_size = _tear(data, "unreadable", 1, end)

    broker.start()
    assert _recovered_on_last_start(broker.log()) >= parts
    assert sorted((data / "unreadable-1").glob("*.log"))[-1].stat().st_size == good_size
    _check_contiguous(_read_all(broker.bootstrap, "unreadable", parts), parts, written)
    assert broker.stop() == 0
