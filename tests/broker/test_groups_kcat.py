"""kcat's balanced consumer (-G) forms a group on ADS and commits its position."""

from __future__ import annotations

import shutil
import subprocess
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import create_topic

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def test_groups_kcat_balanced_consumer_commits(bootstrap: str) -> None:
    assert KCAT, "kcat is installed by `make test` (Debian package kcat)"
    create_topic(bootstrap, "kcat-group", partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce("kcat-group", key=f"k{i}".encode(), value=f"v{i}".encode(),
                         partition=i % 2)
    assert producer.flush(10) == 0
    done = subprocess.run(
        [KCAT, "-b", bootstrap, "-G", "kcat-g", "-o", "beginning", "-c", "20",
         "-X", "auto.commit.interval.ms=100", "-X", "session.timeout.ms=6000",
         "-f", "%p %o %s\n", "kcat-group"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    rows = sorted(tuple(line.split()) for line in done.stdout.splitlines() if line)
    assert len(rows) == 20
    assert {r[2] for r in rows} == {f"v{i}" for i in range(20)}

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kcat-g"})
    deadline = time.time() + 10
    committed: list[TopicPartition] = []
    while time.time() < deadline:
        committed = consumer.committed(
            [TopicPartition("kcat-group", 0), TopicPartition("kcat-group", 1)], timeout=5)
        if [tp.offset for tp in committed] == [10, 10]:
            break
        time.sleep(0.2)
    consumer.close()
    assert [tp.offset for tp in committed] == [10, 10]
