"""confluent-kafka (librdkafka) against a real ADS broker over a real socket."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import CODECS, create_topic


def _messages(codec: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    msgs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    for i in range(30):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else f"{codec}-value-{i}-".encode() * (i + 1)
        headers = [("h1", f"v{i}".encode()), ("h2", b"")] if i % 3 == 0 else []
        msgs.append((key, value, headers))
    return msgs


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int,
                 **extra: object) -> list:  # type: ignore[type-arg]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, **extra})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + 30
    while len(got) < expected and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produce_consume_every_codec(bootstrap: str, codec: str) -> None:
    topic = f"confluent-{codec}"
    create_topic(bootstrap, topic, partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 20, "acks": "all"})
    sent = _messages(codec)
    before = int(time.time() * 1000)
    delivered = []

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))

    for i, (key, value, headers) in enumerate(sent):
        producer.produce(topic, key=key, value=value, headers=headers, partition=i % 3,
                         on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(delivered) == len(sent)

    got = _consume_all(bootstrap, topic, 3, len(sent))
    assert len(got) == len(sent)
    by_partition: dict[int, list] = {0: [], 1: [], 2: []}  # type: ignore[type-arg]
    for msg in got:
        by_partition[msg.partition()].append(msg)
    for p, msgs in by_partition.items():
        assert [m.offset() for m in msgs] == list(range(len(msgs)))
        expected = [s for i, s in enumerate(sent) if i % 3 == p]
        for msg, (key, value, headers) in zip(msgs, expected, strict=True):
            assert msg.key() == key
            assert msg.value() == value
            assert (msg.headers() or []) == headers
            ts_type, ts = msg.timestamp()
            assert ts_type == 1  # CreateTime
            assert before - 1000 <= ts <= int(time.time() * 1000) + 1000


def test_confluent_idempotent_producer(bootstrap: str) -> None:
    create_topic(bootstrap, "idem", partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(500):
        producer.produce("idem", value=f"v{i}".encode())
    assert producer.flush(30) == 0
    got = _consume_all(bootstrap, "idem", 1, 500)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(500)]
    assert [m.offset() for m in got] == list(range(500))


def test_confluent_log_append_time_topic(bootstrap: str) -> None:
    create_topic(bootstrap, "lat", partitions=1, **{"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4"})
    before = int(time.time() * 1000)
    for i in range(5):
        producer.produce("lat", value=f"{i}".encode(), timestamp=1_000_000)  # far past
    assert producer.flush(10) == 0
    got = _consume_all(bootstrap, "lat", 1, 5)
    assert [m.value() for m in got] == [f"{i}".encode() for i in range(5)]
    for msg in got:
        ts_type, ts = msg.timestamp()
        assert ts_type == 2  # LogAppendTime
        assert before - 1000 <= ts <= int(time.time() * 1000) + 1000


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks_levels(bootstrap: str, acks: str) -> None:
    topic = f"acks-{acks}"
    create_topic(bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 2})
    for i in range(200):
        producer.produce(topic, value=f"{i}".encode())
    assert producer.flush(10) == 0
    got = _consume_all(bootstrap, topic, 1, 200)
    assert [m.value() for m in got] == [f"{i}".encode() for i in range(200)]
