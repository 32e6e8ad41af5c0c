"""Per-record produce errors (KIP-467) as real producers see them: every refused record of a
batch named with its own error, the others failed as "a different record in the same
batch", keyless records on compacted topics and timestamps outside
message.timestamp.before.max.ms / message.timestamp.after.max.ms."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kafka import errors as kerrors

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

HOUR = 3_600_000


def produce_batch(bootstrap: str, topic: str, records: list[tuple[bytes | None, int | None]]
                  ) -> list[KafkaError | None]:
    """Sends the records in one batch with confluent-kafka; the delivery error of each."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200,
                         "message.send.max.retries": 0})
    results: dict[int, KafkaError | None] = {}
    for i, (key, timestamp) in enumerate(records):
        def done(err: KafkaError | None, _msg: Any, i: int = i) -> None:
            results[i] = err

        extra = {} if timestamp is None else {"timestamp": timestamp}
        producer.produce(topic, value=b"v%d" % i, key=key, on_delivery=done, **extra)
    assert producer.flush(30) == 0
    return [results[i] for i in range(len(records))]


def codes(errors: list[KafkaError | None]) -> list[int | None]:
    return [None if e is None else e.code() for e in errors]


def test_produce_record_errors_compacted_topic_names_every_keyless_record() -> None:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "compacted", **{"cleanup.policy": "compact"})
        errors = produce_batch(bs, "compacted",
                               [(b"a", None), (None, None), (b"c", None), (None, None),
                                (b"e", None)])
        other = KafkaError._INVALID_DIFFERENT_RECORD
        assert codes(errors) == [other, KafkaError.INVALID_RECORD, other,
                                 KafkaError.INVALID_RECORD, other]
        # A batch of keyed records goes through.
        assert codes(produce_batch(bs, "compacted", [(b"k", None)] * 3)) == [None] * 3


def test_produce_record_errors_timestamp_bounds_topic_keys() -> None:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "bounded", **{"message.timestamp.before.max.ms": str(HOUR),
                                       "message.timestamp.after.max.ms": str(HOUR)})
        now = int(time.time() * 1000)
        errors = produce_batch(bs, "bounded", [
            (b"0", now), (b"1", now + 2 * HOUR), (b"2", now), (b"3", now - 2 * HOUR)])
        other = KafkaError._INVALID_DIFFERENT_RECORD
        # librdkafka fails each listed record with INVALID_RECORD, whatever the partition's
        # error (INVALID_TIMESTAMP here, as the raw test below sees).
        assert codes(errors) == [other, KafkaError.INVALID_RECORD, other,
                                 KafkaError.INVALID_RECORD]
        # Within the bounds, and on a topic with Kafka's defaults, anything goes.
        assert codes(produce_batch(bs, "bounded", [(b"k", now - HOUR // 2)] * 2)) == [None] * 2
        create_topic(bs, "unbounded")
        assert codes(produce_batch(bs, "unbounded", [(b"k", now + 100 * HOUR)])) == [None]


def test_produce_record_errors_timestamp_bounds_broker_keys() -> None:
    config = {"log.message.timestamp.after.max.ms": str(HOUR)}
    with EmbeddedBroker(config=config) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "t")
        now = int(time.time() * 1000)
        # The broker key bounds the future only; the past stays unbounded.
        # A batch of one record fails with the partition's error.
        assert codes(produce_batch(bs, "t", [(b"0", now + 2 * HOUR)])) == [
            KafkaError.INVALID_TIMESTAMP]
        assert codes(produce_batch(bs, "t", [(b"0", 0)])) == [None]
        # The deprecated key applies while the new ones keep their defaults, as in Kafka.
        create_topic(bs, "old", **{"message.timestamp.difference.max.ms": str(HOUR)})
        assert codes(produce_batch(bs, "old", [(b"0", now - 2 * HOUR)])) == [
            KafkaError.INVALID_TIMESTAMP]


def produce_raw(bootstrap: str, topic: str, batch: bytes, version: int) -> Any:
    req = m.ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
            m.ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    with RawConnection(bootstrap) as conn:
        return conn.request(0, version, req).responses[0].partition_responses[0]


def test_produce_record_errors_response_fields_by_version() -> None:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "compacted", **{"cleanup.policy": "compact"})
        batch = build_batch([(b"k", b"v"), (None, b"v"), (None, b"v")])
        for version in (7, 8, 11):
            part = produce_raw(bs, "compacted", batch, version)
            assert part.error_code == ErrorCode.INVALID_RECORD
            if version < 8:
                continue
            assert [(e.batch_index, e.batch_index_error_message)
                    for e in part.record_errors] == [
                (i, "Compacted topic cannot accept message without key in topic "
                    "partition compacted-0.") for i in (1, 2)]
            assert part.error_message is not None
            assert part.error_message.startswith(
                "One or more records have been rejected due to 2 record errors in total")


def test_produce_record_errors_timestamp_response() -> None:
    with EmbeddedBroker(config={"log.message.timestamp.before.max.ms": str(HOUR)}) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "t")
        now = int(time.time() * 1000)
        # The first record is too old, so the batch is scanned and the last one found too.
        batch = build_batch([(b"a", b"v"), (b"b", b"v"), (b"c", b"v")],
                            timestamps=[now - 2 * HOUR, now, now - 3 * HOUR])
        part = produce_raw(bs, "t", batch, 11)
        assert part.error_code == ErrorCode.INVALID_TIMESTAMP
        assert part.error_message == "One or more records have been rejected due to invalid " \
            "timestamp"
        assert [e.batch_index for e in part.record_errors] == [0, 2]
        message = part.record_errors[0].batch_index_error_message
        assert message.startswith(f"Timestamp {now - 2 * HOUR} of message with offset 0 is "
                                  "out of range. The timestamp should be within [")


def test_produce_record_errors_kafka_python() -> None:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "compacted", **{"cleanup.policy": "compact"})
        producer = KafkaProducer(bootstrap_servers=bs, linger_ms=200, retries=0)
        try:
            futures = [producer.send("compacted", key=k, value=b"v")
                       for k in (b"a", None, b"c")]
            producer.flush(30)
            failures = []
            for f in futures:
                with pytest.raises(kerrors.KafkaError) as info:
                    f.get(timeout=10)
                failures.append(info.value)
        finally:
            producer.close(timeout=5)
        assert isinstance(failures[1], kerrors.InvalidRecordError)
        assert "without key" in str(failures[1])
        assert not isinstance(failures[0], kerrors.InvalidRecordError)
        assert "one more more invalid records" in str(failures[0])


def test_produce_record_errors_kafka_python_timestamp() -> None:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "bounded", **{"message.timestamp.after.max.ms": str(HOUR)})
        now = int(time.time() * 1000)
        producer = KafkaProducer(bootstrap_servers=bs, linger_ms=200, retries=0)
        try:
            ok = producer.send("bounded", key=b"a", value=b"v", timestamp_ms=now)
            late = producer.send("bounded", key=b"b", value=b"v", timestamp_ms=now + 2 * HOUR)
            producer.flush(30)
            with pytest.raises(kerrors.InvalidTimestampError, match="out of range"):
                late.get(timeout=10)
            with pytest.raises(kerrors.KafkaError, match="invalid records"):
                ok.get(timeout=10)
        finally:
            producer.close(timeout=5)
