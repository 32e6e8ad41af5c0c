"""Records near message.max.bytes pass; larger ones get MESSAGE_TOO_LARGE."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from ads.testing import EmbeddedBroker
from conftest import create_topic

LIMIT = 200_000


@pytest.fixture
def small_limit_broker(tmp_path):  # type: ignore[no-untyped-def]
    with EmbeddedBroker(data_dir=tmp_path / "d", config={"message.max.bytes": str(LIMIT)}) as b:
        yield b


def test_message_size_limit(small_limit_broker) -> None:  # type: ignore[no-untyped-def]
    bs = small_limit_broker.bootstrap_servers
    create_topic(bs, "sizes")
    results: list = []  # type: ignore[type-arg]
    # The client-side limit is lifted so the broker is the one that decides.
    producer = Producer({"bootstrap.servers": bs, "message.max.bytes": 10_000_000,
                         "compression.type": "none", "linger.ms": 0,
                         "message.send.max.retries": 0})

    def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
        results.append((err, len(msg.value())))

    near = b"a" * (LIMIT - 200)
    producer.produce("sizes", value=near, partition=0, on_delivery=cb)
    producer.flush(10)
    producer.produce("sizes", value=b"b" * (LIMIT + 1000), partition=0, on_delivery=cb)
    producer.flush(10)
    assert results[0][0] is None
    assert results[1][0] is not None and results[1][0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "x", "enable.auto.commit": False,
                         "fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024,
                         "message.max.bytes": 1000, "receive.message.max.bytes": 10_000_000})
    consumer.assign([TopicPartition("sizes", 0, 0)])
    msg = None
    for _ in range(40):
        msg = consumer.poll(0.5)
        if msg is not None:
            break
    consumer.close()
    # KIP-74: a batch larger than the fetch limits is still returned whole.
    assert msg is not None and msg.error() is None and msg.value() == near
