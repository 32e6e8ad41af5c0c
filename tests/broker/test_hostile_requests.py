"""Hostile requests the fuzzer found, each over a raw socket against an in-process broker:
answered with Kafka's error or a closed connection, with one clear log line, and the broker
keeps serving."""

from __future__ import annotations

import logging
import struct

import pytest

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    build_batch,
)
from ads.records.crc import crc32c
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection


@pytest.fixture
def broker(tmp_path):  # type: ignore[no-untyped-def]
    with EmbeddedBroker(data_dir=tmp_path / "d") as b:
        create_topic(b.bootstrap_servers, "t", **{"message.timestamp.type": "LogAppendTime"})
        yield b


def _still_serves(bootstrap: str) -> None:
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.METADATA, 12, m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name="t")]))
        assert resp.topics[0].error_code == ErrorCode.NONE


def test_hostile_metadata_null_topic_name_before_v12(broker: EmbeddedBroker,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    # v10 and v11 may carry a null name on the wire, but their response cannot: the
    # request is refused (it used to fail while encoding the response).
    MR = m.MetadataRequest  # noqa: N806
    for version in (10, 11):
        with RawConnection(broker.bootstrap_servers) as conn, caplog.at_level(logging.WARNING):
            conn.send_raw(_frame(m.ApiKey.METADATA, version, MR(
                topics=[MR.MetadataRequestTopic(name=None)], allow_auto_topic_creation=False)))
            assert conn.is_closed()
        assert f"Metadata v{version} with a null topic name" in caplog.text
    assert "Traceback" not in caplog.text and "error handling" not in caplog.text
    with RawConnection(broker.bootstrap_servers) as conn:  # v12 looks the id up
        resp = conn.request(m.ApiKey.METADATA, 12, MR(topics=[MR.MetadataRequestTopic(
            name=None)]))
        assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    _still_serves(broker.bootstrap_servers)


def test_hostile_client_id_cannot_forge_log_lines(broker: EmbeddedBroker,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    frame = _frame(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=[]),
                   client_id="x\n2099-01-01 00:00:00,000 ERROR ads: forged")
    with RawConnection(broker.bootstrap_servers) as conn, caplog.at_level(logging.WARNING):
        body = frame[4:-2]  # cut short: malformed
        conn.send_raw(struct.pack(">i", len(body)) + body)
        assert conn.is_closed()
    lines = [r.getMessage() for r in caplog.records if "malformed METADATA" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    _still_serves(broker.bootstrap_servers)


def test_hostile_lying_record_count_is_refused_at_once(broker: EmbeddedBroker) -> None:
    # One real record, a header claiming LogAppendTime and 2^31-1 records (lastOffsetDelta
    # agrees), a valid CRC: the topic refuses LogAppendTime from producers, and the refusal
    # used to list every claimed record, looping 2^31 times.
    batch = bytearray(build_batch([(b"k", b"v")], timestamp=1000))
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_MASK)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_OFFSET, 0x7FFFFFFE)
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, 0x7FFFFFFF)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    P = m.ProduceRequest  # noqa: N806
    req = P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="t", partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(batch))])])
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.request(m.ApiKey.PRODUCE, 9, req)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    _still_serves(broker.bootstrap_servers)


def _frame(api_key: int, version: int, body: m.Message, client_id: str | None = "c") -> bytes:
    from ads.protocol import codec  # noqa: PLC0415

    return codec.encode_request(api_key, version, 7, client_id, body)


def test_hostile_acks0_produce_failure_closes_with_a_line(
        broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture) -> None:
    # acks=0 has no response to carry an error: the connection is closed, as Kafka does,
    # and the log says which partitions failed and why.
    P = m.ProduceRequest  # noqa: N806
    req = P(acks=0, timeout_ms=1000, topic_data=[P.TopicProduceData(
        name="missing", partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=build_batch([(b"k", b"v")]))])])
    with RawConnection(broker.bootstrap_servers) as conn, caplog.at_level(logging.INFO):
        conn.send_raw(_frame(m.ApiKey.PRODUCE, 9, req))
        assert conn.is_closed()
    assert "acks=0 produce failed (missing-0: UNKNOWN_TOPIC_OR_PARTITION)" in caplog.text
    _still_serves(broker.bootstrap_servers)
