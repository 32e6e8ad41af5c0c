"""kafka-python against a real ADS broker; its default producer is idempotent."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from conftest import create_topic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_consume(bootstrap: str, codec: str | None) -> None:
    topic = f"kp-{codec or 'none'}"
    create_topic(bootstrap, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=10)
    sent = []
    for i in range(40):
        key = None if i % 4 == 0 else f"k{i}".encode()
        value = None if (key is not None and i % 9 == 5) else f"value-{i}".encode() * 3
        headers = [("hdr", f"x{i}".encode())] if i % 2 else []
        meta = producer.send(topic, key=key, value=value, headers=headers, partition=i % 2)
        sent.append((i % 2, key, value, headers, meta))
    producer.flush(30)
    offsets = {0: 0, 1: 0}
    for part, _, _, _, fut in sent:
        md = fut.get(timeout=10)
        assert md.partition == part
        assert md.offset == offsets[part]
        offsets[part] += 1
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    consumer.seek_to_beginning()
    got = []
    for msg in consumer:
        got.append(msg)
        if len(got) == len(sent):
            break
    consumer.close()
    assert len(got) == len(sent)
    for part in (0, 1):
        mine = [m for m in got if m.partition == part]
        expected = [s for s in sent if s[0] == part]
        assert [m.offset for m in mine] == list(range(len(expected)))
        for msg, (_, key, value, headers, _) in zip(mine, expected, strict=True):
            assert msg.key == key
            assert msg.value == value
            assert list(msg.headers) == headers
            assert msg.timestamp > 0
