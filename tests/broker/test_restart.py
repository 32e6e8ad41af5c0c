"""Restarts: clean stop and start, and kill -9 during heavy produce (subprocess broker)."""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

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
