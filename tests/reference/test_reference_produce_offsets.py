"""ListOffsets, Produce refusals and idempotent sequences, and the offsets of an unknown
group: Apache Kafka against ADS.

Each test runs one client program against a Kafka broker (tests/kafka_reference.py) and an
ADS broker and asserts both answer what Kafka answers: confluent-kafka where it shows what
the broker said, single Produce requests through kafka-python's protocol classes
(tests/kafka_python_wire.py) where librdkafka would decide by itself (an unknown partition)
or hide the answer (sequence numbers). ListOffsets by timestamp looks inside batches, so
the records are written several to a batch with timestamps out of order.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka.protocol.producer.produce import ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_python_wire import GROUP, Wire
from kafka_reference import KafkaReference, retry_retriable

pytestmark = pytest.mark.kafka_reference


def _both(kafka: KafkaReference, ads: EmbeddedBroker) -> list[str]:
    return [kafka.bootstrap, ads.bootstrap_servers]


def _create(bootstrap: str, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)],
                        operation_timeout=10)[name].result(timeout=15)


def _produce(bootstrap: str, topic: str, batches: list[list[int]],
             value: bytes = b"v") -> list[str]:
    """Writes each list of timestamps as one batch (acks=all); the delivery error of every
    record, within the message timeout."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200,
                         "enable.idempotence": True, "message.max.bytes": 10_000_000,
                         "message.timeout.ms": 5000})
    errors: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        errors.append("NO_ERROR" if err is None else str(err.name()))

    for timestamps in batches:
        for ts in timestamps:
            producer.produce(topic, value, partition=0, timestamp=ts, on_delivery=delivered)
        assert producer.flush(15) == 0
    return errors


# (batches of record timestamps; each inner list is one batch)
TIMESTAMPS = [[1000, 4000, 2000], [3000], [5000, 1500, 5000]]
SPECS = {
    "earliest": OffsetSpec.earliest(),
    "latest": OffsetSpec.latest(),
    "max timestamp": OffsetSpec.max_timestamp(),
    "at 0": OffsetSpec.for_timestamp(0),
    "at 2500": OffsetSpec.for_timestamp(2500),
    "at 4000": OffsetSpec.for_timestamp(4000),
    "at 4001": OffsetSpec.for_timestamp(4001),
    "after the last": OffsetSpec.for_timestamp(6000),
}


def _list_offsets(bootstrap: str, topic: str) -> dict[str, tuple[int, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answers = {}
    for what, spec in SPECS.items():
        tp = TopicPartition(topic, 0)
        info = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=15)
        answers[what] = (info.offset, info.timestamp)
    return answers


def test_list_offsets_by_spec_and_timestamp_match_kafka(kafka: KafkaReference,
                                                        ads: EmbeddedBroker) -> None:
    answers = []
    for bootstrap in _both(kafka, ads):
        _create(bootstrap, "timestamps")
        assert _produce(bootstrap, "timestamps", TIMESTAMPS) == ["NO_ERROR"] * 7
        _create(bootstrap, "empty")
        answers.append((_list_offsets(bootstrap, "timestamps"),
                        _list_offsets(bootstrap, "empty")))
    reference, ads_answer = answers
    assert reference[0]["max timestamp"] == (4, 5000)
    assert reference[0]["at 2500"] == (1, 4000)
    assert reference[1]["latest"] == (0, -1)
    assert ads_answer == reference


def test_produce_size_and_min_isr_rules_match_kafka(kafka: KafkaReference,
                                                    ads: EmbeddedBroker) -> None:
    answers = []
    for bootstrap in _both(kafka, ads):
        _create(bootstrap, "small-records", **{"max.message.bytes": "2000"})
        # min.insync.replicas above the replication factor: Kafka 4 caps it at the replicas
        _create(bootstrap, "two-isr-wanted", **{"min.insync.replicas": "2"})
        answers.append((_produce(bootstrap, "small-records", [[1]], b"x" * 1900),
                        _produce(bootstrap, "small-records", [[1]], b"x" * 3000),
                        _produce(bootstrap, "two-isr-wanted", [[1]])))
    assert answers[0] == (["NO_ERROR"], ["MSG_SIZE_TOO_LARGE"], ["NO_ERROR"])
    assert answers[1] == answers[0]


def _unknown_group_offsets(bootstrap: str) -> tuple[list[tuple[str, int, int]], str]:
    _create(bootstrap, "committed-nowhere")
    # librdkafka 2.16's admin thread was seen to crash (SIGSEGV) on Kafka's first answers
    # while __consumer_offsets is created; the topic is made to exist first.
    with Wire(bootstrap) as wire:
        wire.await_coordinator("no-such-group", GROUP)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions("no-such-group",
                                           [TopicPartition("committed-nowhere", 0)])
    fetched = retry_retriable(lambda: admin.list_consumer_group_offsets(
        [request])["no-such-group"].result(timeout=15))
    offsets = [(tp.topic, tp.partition, tp.offset) for tp in fetched.topic_partitions]
    described = admin.describe_consumer_groups(["no-such-group"])["no-such-group"]
    try:
        state = described.result(timeout=15).state.name
    except KafkaException as exc:
        state = str(exc.args[0].name())
    return offsets, state


def test_unknown_group_offsets_and_description_match_kafka(kafka: KafkaReference,
                                                           ads: EmbeddedBroker) -> None:
    reference = _unknown_group_offsets(kafka.bootstrap)
    assert reference[0] == [("committed-nowhere", 0, -1001)]
    assert _unknown_group_offsets(ads.bootstrap_servers) == reference


def _batch(producer_id: int = -1, epoch: int = -1, sequence: int = -1) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16,
                                   producer_id=producer_id, producer_epoch=epoch,
                                   base_sequence=sequence)
    builder.append(timestamp=None, key=None, value=b"v")
    builder.close()
    return bytes(builder.buffer())


def _raw_produce(wire: Wire, topic: str, partition: int, batch: bytes,
                 acks: int = -1) -> tuple[str, int]:
    """Produce v9 of one batch: the partition's error and base offset."""
    r = ProduceRequest
    answer = wire.request(r(
        transactional_id=None, acks=acks, timeout_ms=5000,
        topic_data=[r.TopicProduceData(name=topic, partition_data=[
            r.TopicProduceData.PartitionProduceData(index=partition, records=batch)])],
        version=9))
    part = answer.responses[0].partition_responses[0]
    return ErrorCode(part.error_code).name, part.base_offset


def _raw_produce_answers(bootstrap: str) -> dict[str, tuple[str, int]]:
    _create(bootstrap, "raw-produce")
    _create(bootstrap, "idempotent")
    a = {}
    with Wire(bootstrap) as w:
        a["partition 7 of 1"] = _raw_produce(w, "raw-produce", 7, _batch())
        a["unknown topic"] = _raw_produce(w, "no-such-topic", 0, _batch())
        a["invalid topic name"] = _raw_produce(w, "bad name!", 0, _batch())
        w.await_coordinator("a-group", GROUP)  # __consumer_offsets exists from here on
        a["internal topic"] = _raw_produce(w, "__consumer_offsets", 0, _batch())
        a["acks=2"] = _raw_produce(w, "raw-produce", 0, _batch(), acks=2)
        a["plain"] = _raw_produce(w, "raw-produce", 0, _batch())
        new = w.init_producer_id(None)
        assert new.error_code == 0, new
        a["new producer, first sequence 3"] = _raw_produce(
            w, "idempotent", 0, _batch(new.producer_id, new.producer_epoch, 3))
        init = w.init_producer_id(None)
        assert init.error_code == 0, init
        pid, epoch = init.producer_id, init.producer_epoch
        steps = [("sequence 0", epoch, 0),
                 ("sequence 0 again", epoch, 0), ("sequence 2 after 0", epoch, 2),
                 ("sequence 1", epoch, 1), ("next epoch, sequence 5", epoch + 1, 5),
                 ("next epoch, sequence 0", epoch + 1, 0),
                 ("previous epoch, sequence 2", epoch, 2)]
        for what, e, seq in steps:
            a[what] = _raw_produce(w, "idempotent", 0, _batch(pid, e, seq))
    return a


def test_produce_errors_and_sequences_match_kafka(kafka: KafkaReference,
                                                  ads: EmbeddedBroker) -> None:
    reference = _raw_produce_answers(kafka.bootstrap)
    assert reference["partition 7 of 1"][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert reference["internal topic"][0] == "INVALID_TOPIC_EXCEPTION"
    assert reference["new producer, first sequence 3"] == ("NONE", 0)
    assert reference["sequence 0 again"] == ("NONE", 1)
    assert reference["sequence 2 after 0"][0] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert _raw_produce_answers(ads.bootstrap_servers) == reference
