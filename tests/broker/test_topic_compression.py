"""Topic compression.type acts as in Kafka: batches are stored in the topic's codec
(recompressed on append, at the KIP-390 level), `producer` keeps the producer's codec, and
consumers read the same records either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from ads.records.batch import iter_batch_headers
from ads.records.compression import CompressionType
from ads.testing import EmbeddedBroker
from conftest import create_topic

COUNT = 200


def stored_codecs(broker: EmbeddedBroker, topic: str) -> set[int]:
    segment = Path(broker.data_dir) / f"{topic}-0" / "00000000000000000000.log"
    return {h.compression for h in iter_batch_headers(segment.read_bytes())}


def produce(bs: str, topic: str, codec: str) -> None:
    p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 20})
    for i in range(COUNT):
        p.produce(topic, key=b"k%d" % i, value=b"value %d " % i * 10)
    assert p.flush(30) == 0


def consume(bs: str, topic: str) -> list[tuple[bytes, bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"read-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, bytes]] = []
    try:
        while len(out) < COUNT:
            msg = c.poll(10)
            assert msg is not None and msg.error() is None
            out.append((msg.key(), msg.value()))
    finally:
        c.close()
    return out


@pytest.mark.parametrize(("topic_codec", "producer_codec", "stored"), [
    ("zstd", "none", CompressionType.ZSTD),
    ("uncompressed", "gzip", CompressionType.NONE),
    ("lz4", "snappy", CompressionType.LZ4),
    ("gzip", "zstd", CompressionType.GZIP),
    ("producer", "snappy", CompressionType.SNAPPY),
    ("zstd", "zstd", CompressionType.ZSTD),
])
def test_topic_compression_stored_in_the_topics_codec_confluent(
        topic_codec: str, producer_codec: str, stored: CompressionType) -> None:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "t", **{"compression.type": topic_codec})
        produce(bs, "t", producer_codec)
        assert stored_codecs(broker, "t") == {stored}
        assert consume(bs, "t") == [(b"k%d" % i, b"value %d " % i * 10) for i in range(COUNT)]


def test_topic_compression_broker_default_and_level() -> None:
    config = {"compression.type": "zstd", "compression.zstd.level": "19"}
    with EmbeddedBroker(config=config) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "by-broker")
        create_topic(bs, "fast", **{"compression.zstd.level": "-100"})
        for topic in ("by-broker", "fast"):
            produce(bs, topic, "none")
            assert stored_codecs(broker, topic) == {CompressionType.ZSTD}
        size = {t: (Path(broker.data_dir) / f"{t}-0" / "00000000000000000000.log").stat()
                .st_size for t in ("by-broker", "fast")}
        assert size["by-broker"] < size["fast"]


def test_topic_compression_kafka_python() -> None:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "t", **{"compression.type": "uncompressed"})
        producer = KafkaProducer(bootstrap_servers=bs, compression_type="gzip", linger_ms=20)
        for i in range(COUNT):
            producer.send("t", key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(30)
        producer.close()
        assert stored_codecs(broker, "t") == {CompressionType.NONE}
        consumer = KafkaConsumer(bootstrap_servers=bs, consumer_timeout_ms=5000)
        consumer.assign([KTopicPartition("t", 0)])
        consumer.seek_to_beginning()
        values = [r.value for r in consumer]
        consumer.close()
        assert values == [b"v%d" % i for i in range(COUNT)]
