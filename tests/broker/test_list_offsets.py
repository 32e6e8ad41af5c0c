"""ListOffsets: earliest, latest, by timestamp and max timestamp, through real clients."""

from __future__ import annotations

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from conftest import create_topic


def _produce_with_timestamps(bootstrap: str, topic: str, stamps: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, ts in enumerate(stamps):
        producer.produce(topic, value=f"r{i}".encode(), timestamp=ts, partition=0)
        producer.flush(10)  # one batch per record: lookups are exact
    assert producer.flush(10) == 0


def test_list_offsets_by_timestamp_confluent(bootstrap: str) -> None:
    create_topic(bootstrap, "times")
    base = 1_700_000_000_000
    stamps = [base + 1000 * i for i in range(10)]
    stamps[7] = base + 50_000  # the largest timestamp is not the last record
    _produce_with_timestamps(bootstrap, "times", stamps)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition("times", 0)

    def lookup(spec: OffsetSpec) -> int:
        return admin.list_offsets({tp: spec})[tp].result(10).offset

    assert lookup(OffsetSpec.earliest()) == 0
    assert lookup(OffsetSpec.latest()) == 10
    assert lookup(OffsetSpec.for_timestamp(base)) == 0
    assert lookup(OffsetSpec.for_timestamp(base + 2500)) == 3
    assert lookup(OffsetSpec.for_timestamp(base + 9000)) == 7
    assert lookup(OffsetSpec.for_timestamp(base + 60_000)) == -1
    assert lookup(OffsetSpec.max_timestamp()) == 7


def test_list_offsets_for_times_kafka_python(bootstrap: str) -> None:
    create_topic(bootstrap, "kp-times")
    base = 1_700_000_000_000
    _produce_with_timestamps(bootstrap, "kp-times", [base + 10 * i for i in range(5)])
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tp = KTopicPartition("kp-times", 0)
    found = consumer.offsets_for_times({tp: base + 15})
    assert found[tp].offset == 2
    assert found[tp].timestamp == base + 20
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 5
    consumer.close()


def test_list_offsets_inside_one_batch(bootstrap: str) -> None:
    """Kafka answers with the first record at or after the timestamp, even mid-batch."""
    create_topic(bootstrap, "one-batch")
    base = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000,
                         "compression.type": "zstd"})
    stamps = [base + 10 * i for i in range(8)]
    stamps[5] = base + 1000  # the largest timestamp sits in the middle of the batch
    for i, ts in enumerate(stamps):
        producer.produce("one-batch", value=f"r{i}".encode(), timestamp=ts, partition=0)
    assert producer.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition("one-batch", 0)

    def lookup(spec: OffsetSpec) -> tuple[int, int]:
        found = admin.list_offsets({tp: spec})[tp].result(10)
        return found.offset, found.timestamp

    assert lookup(OffsetSpec.for_timestamp(base + 15)) == (2, base + 20)
    assert lookup(OffsetSpec.for_timestamp(base + 61)) == (5, base + 1000)
    assert lookup(OffsetSpec.max_timestamp()) == (5, base + 1000)
