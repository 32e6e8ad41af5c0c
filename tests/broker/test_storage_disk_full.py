"""A full disk as confluent-kafka sees it: KAFKA_STORAGE_ERROR, nothing acknowledged lost.

The in-process broker's logs write through a ``FaultyFileIO``; the producer has retries
disabled so the broker's error reaches its delivery report.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from ads.storage.fileio import FaultyFileIO
from ads.testing import EmbeddedBroker
from conftest import create_topic

TOPIC = "disk-full"


def _produce(bootstrap: str, values: list[bytes]) -> list[tuple[bytes, KafkaError | None]]:
    """Produce each value on its own (one batch per request); (value, error) per message."""
    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0, "linger.ms": 0,
                         "enable.idempotence": False, "acks": "all"})
    reports: list[tuple[bytes, KafkaError | None]] = []
    for value in values:
        producer.produce(TOPIC, value=value, partition=0,
                         on_delivery=lambda err, msg: reports.append((msg.value(), err)))
        producer.flush(15)
    assert len(reports) == len(values)
    return reports


def _read_all(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return got
            got.append(msg.value())
    finally:
        consumer.close()
    raise AssertionError("did not reach the end of the partition")


def test_storage_disk_full_gives_kafka_storage_error_and_keeps_acknowledged(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    io = FaultyFileIO()
    with EmbeddedBroker(data, file_io=io) as broker:
        create_topic(broker.bootstrap_servers, TOPIC)
        before = [f"before-{i}".encode() for i in range(20)]
        assert all(err is None for _, err in _produce(broker.bootstrap_servers, before))

        io.space_left(40)  # the next batch is cut off part-way by ENOSPC
        failed = _produce(broker.bootstrap_servers, [b"lost-0", b"lost-1"])
        assert [err.code() if err else None for _, err in failed] == \
            [KafkaError.KAFKA_STORAGE_ERROR] * 2
        assert _read_all(broker.bootstrap_servers) == before

        io.space_left(None)  # space is back: produce works again
        after = [f"after-{i}".encode() for i in range(10)]
        assert all(err is None for _, err in _produce(broker.bootstrap_servers, after))
        assert _read_all(broker.bootstrap_servers) == before + after

    with EmbeddedBroker(data) as restarted:  # same directory, the real file layer
        assert _read_all(restarted.bootstrap_servers) == before + after
        more = _produce(restarted.bootstrap_servers, [b"restarted"])
        assert more[0][1] is None
        assert _read_all(restarted.bootstrap_servers) == [*before, *after, b"restarted"]
