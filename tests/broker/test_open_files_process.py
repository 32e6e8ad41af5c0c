"""An `ads broker` process whose open-file limit (`ulimit -n`, set with prlimit) is far
below three descriptors per partition: 2,000 partitions are created, written and read back
by confluent-kafka, the broker restarts and serves them again, and its open segment files
stay within `log.open.files.max` (half the limit by default), as `/metrics` and
/proc/PID/fd both show."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_process import BrokerProcess, free_port
from http_support import metric_samples

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")]

LIMIT = 256
TOPICS = [f"many-{n}" for n in range(4)]
PARTITIONS = 500  # each: 2,000 in all, which would take 6,000 descriptors kept open


def _data_files(pid: int, data_dir: Path) -> int:
    """The broker's descriptors open on files of its data directory."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(data_dir))
    return count


def _read_all(bootstrap: str) -> dict[tuple[str, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(t, p, 0) for t in TOPICS for p in range(PARTITIONS)])
    got: dict[tuple[str, int], bytes] = {}
    deadline = time.monotonic() + 120
    try:
        while len(got) < len(TOPICS) * PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                got[(msg.topic(), msg.partition())] = msg.value()
    finally:
        consumer.close()
    return got


def test_open_files_broker_serves_more_partitions_than_its_descriptor_limit(
        tmp_path: Path) -> None:
    http = free_port()
    data = tmp_path / "data"
    broker = BrokerProcess(data, None, f"http.listener=127.0.0.1:{http}",
                           prefix=("prlimit", f"--nofile={LIMIT}:{LIMIT}"))
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in TOPICS],
                                      operation_timeout=120)
        for future in futures.values():
            future.result(150)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for t in TOPICS:
            for p in range(PARTITIONS):
                producer.produce(t, value=f"{t}/{p}".encode(), partition=p)
        assert producer.flush(120) == 0
        expected = {(t, p): f"{t}/{p}".encode() for t in TOPICS for p in range(PARTITIONS)}
        assert _read_all(broker.bootstrap) == expected
        samples = metric_samples(f"http://127.0.0.1:{http}")
        assert samples[("ads_log_open_files_limit", ())] == LIMIT // 2
        assert 0 < samples[("ads_log_open_files", ())] <= LIMIT // 2
        assert samples[("ads_log_file_evictions_total", ())] > 0
        assert broker.proc is not None
        assert _data_files(broker.proc.pid, data) <= LIMIT // 2 + 8  # + checkpoints, locks
        assert broker.stop() == 0, broker.log()
        # A restart opens no segment file until it is used.
        broker.start()
        assert _read_all(broker.bootstrap) == expected
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            assert broker.stop() == 0, broker.log()
    assert "Too many open files" not in broker.log()
