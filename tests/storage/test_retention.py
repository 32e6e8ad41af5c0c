"""Retention deletes whole old segments on a schedule; fetches below the start fail."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ads.testing import EmbeddedBroker
from conftest import create_topic


def _size(data: Path, topic: str) -> int:
    total = 0
    for name in _segments(data, topic):
        try:
            total += (data / f"{topic}-0" / name).stat().st_size
        except FileNotFoundError:  # removed by retention since it was listed
            pass
    return total


def _earliest(admin: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset


def _segments(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in (data / f"{topic}-0").glob("*.log"))


def test_retention_by_time_and_size(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = {"log.retention.check.interval.ms": "100", "log.segment.delete.delay.ms": "0"}
    with EmbeddedBroker(data_dir=data, config=config) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "old", **{"segment.bytes": "2000", "retention.ms": "60000"})
        create_topic(bs, "big", **{"segment.bytes": "2000", "retention.bytes": "5000"})
        producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        hour_ago = int(time.time() * 1000) - 3_600_000
        for i in range(40):
            producer.produce("old", value=b"x" * 200, timestamp=hour_ago, partition=0)
            producer.produce("big", value=b"y" * 200, partition=0)
            producer.flush(10)
        for i in range(3):
            producer.produce("old", value=b"fresh", partition=0)
        assert producer.flush(10) == 0
        admin = AdminClient({"bootstrap.servers": bs})
        # Retention runs every 100 ms, a segment at a time: wait for all of it.
        deadline = time.time() + 20
        while time.time() < deadline and (len(_segments(data, "old")) > 1
                                          or _earliest(admin, "big") == 0
                                          or _size(data, "big") > 5000 + 2000):
            time.sleep(0.2)
        # Every segment of old records is gone; only the active one (where the fresh
        # records went) is kept, and the log now starts at its base offset.
        old_start = _earliest(admin, "old")
        assert 30 <= old_start <= 40
        assert _segments(data, "old") == [f"{old_start:020d}.log"]
        big_start = _earliest(admin, "big")
        assert 0 < big_start < 40
        assert _size(data, "big") <= 5000 + 2000  # retention.bytes plus the active segment
