"""Bad input over a raw socket: the broker answers with Kafka's error or closes that one
connection, keeps serving everyone else, and stores nothing it should not."""

from __future__ import annotations

import os
import struct

import pytest
from confluent_kafka import Consumer, TopicPartition

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.records.compression import CompressionType
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

MAX_REQUEST = 1_000_000


@pytest.fixture
def broker(tmp_path):  # type: ignore[no-untyped-def]
    config = {"socket.request.max.bytes": str(MAX_REQUEST), "message.max.bytes": "100000"}
    with EmbeddedBroker(data_dir=tmp_path / "d", config=config) as b:
        create_topic(b.bootstrap_servers, "t", partitions=1)
        yield b


def _still_serves(bootstrap: str) -> None:
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
        assert resp.error_code == ErrorCode.NONE


def _log_end(bootstrap: str) -> int:
    with RawConnection(bootstrap) as conn:
        LO = m.ListOffsetsRequest  # noqa: N806
        resp = conn.request(m.ApiKey.LIST_OFFSETS, 7, LO(replica_id=-1, topics=[
            LO.ListOffsetsTopic(name="t", partitions=[
                LO.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
        return int(resp.topics[0].partitions[0].offset)


def _produce(conn: RawConnection, records: bytes, topic: str = "t", version: int = 9
             ) -> m.ProduceResponse:
    P = m.ProduceRequest  # noqa: N806
    req = P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
        P.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    return conn.request(m.ApiKey.PRODUCE, version, req)


def _code(resp: m.ProduceResponse) -> int:
    return int(resp.responses[0].partition_responses[0].error_code)


@pytest.mark.parametrize("payload", [
    pytest.param(os.urandom(64), id="garbage"),
    pytest.param(struct.pack(">i", -5) + b"xx", id="negative-size"),
    pytest.param(struct.pack(">i", MAX_REQUEST + 1), id="size-above-socket.request.max.bytes"),
    pytest.param(struct.pack(">i", 2_000_000_000), id="size-2GB"),
    pytest.param(struct.pack(">ihhi", 8, 999, 0, 1), id="unknown-api-key"),
    pytest.param(struct.pack(">ihhih", 10, 3, 99, 1, -1), id="unsupported-metadata-version"),
    # Produce v9 header, then a topics array claiming 2^30 entries in a tiny frame.
    pytest.param(struct.pack(">ihhih", 19, 0, 9, 7, -1) + b"\x00" + b"\x00" + b"\x00\x00\x13\x88"
                 + b"\x80\x80\x80\x80\x04", id="array-longer-than-frame"),
])
def test_bad_input_closes_connection(broker: EmbeddedBroker, payload: bytes) -> None:
    bs = broker.bootstrap_servers
    before = _log_end(bs)
    with RawConnection(bs) as conn:
        conn.send_raw(payload)
        assert conn.is_closed()
    _still_serves(bs)
    assert _log_end(bs) == before


def test_bad_input_truncated_frame_then_disconnect(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    with RawConnection(bs) as conn:
        conn.send_raw(struct.pack(">i", 500) + b"\x00" * 100)
    _still_serves(bs)


def test_bad_input_api_versions_unsupported_version_kip511(broker: EmbeddedBroker) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.send_raw(struct.pack(">ihhih", 10, 18, 99, 42, -1))
        frame = conn.recv_frame()
    assert frame is not None
    corr, error = struct.unpack_from(">ih", frame)
    assert corr == 42
    assert error == ErrorCode.UNSUPPORTED_VERSION
    (count,) = struct.unpack_from(">i", frame, 6)
    keys = {struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)}
    assert (18, 0, 4) in keys
    assert any(k == 0 for k, _, _ in keys)


def test_bad_input_corrupt_crc(broker: EmbeddedBroker) -> None:
    batch = bytearray(build_batch([(b"k", b"v", ())]))
    batch[-1] ^= 0xFF
    with RawConnection(broker.bootstrap_servers) as conn:
        assert _code(_produce(conn, bytes(batch))) == ErrorCode.CORRUPT_MESSAGE
    assert _log_end(broker.bootstrap_servers) == 0


def test_bad_input_magic_v1_rejected(broker: EmbeddedBroker) -> None:
    batch = bytearray(build_batch([(b"k", b"v", ())]))
    batch[16] = 1
    with RawConnection(broker.bootstrap_servers) as conn:
        code = _code(_produce(conn, bytes(batch)))
    assert code in (ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.CORRUPT_MESSAGE)
    assert _log_end(broker.bootstrap_servers) == 0


def test_bad_input_record_too_large(broker: EmbeddedBroker) -> None:
    batch = build_batch([(b"k", b"v" * 150_000, ())])
    with RawConnection(broker.bootstrap_servers) as conn:
        assert _code(_produce(conn, batch)) == ErrorCode.MESSAGE_TOO_LARGE
    assert _log_end(broker.bootstrap_servers) == 0


def test_bad_input_invalid_topic_name(broker: EmbeddedBroker) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        # Produce does not judge names: a topic that cannot exist is unknown, as in Kafka.
        resp = _produce(conn, build_batch([(b"k", b"v", ())]), topic="bad name!")
        assert _code(resp) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        C = m.CreateTopicsRequest  # noqa: N806
        created = conn.request(m.ApiKey.CREATE_TOPICS, 7, C(topics=[C.CreatableTopic(
            name="x" * 250, num_partitions=1, replication_factor=1)], timeout_ms=1000))
        assert created.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_bad_input_produce_to_internal_topic(broker: EmbeddedBroker) -> None:
    # Make the coordinator create __consumer_offsets, then try to write into it.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g"})
    consumer.list_topics(timeout=5)
    consumer.committed([TopicPartition("t", 0)], timeout=10)
    consumer.close()
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = _produce(conn, build_batch([(b"k", b"v", ())]), topic="__consumer_offsets")
    assert _code(resp) == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_bad_input_produce_v2_unsupported(broker: EmbeddedBroker) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = _produce(conn, build_batch([(b"k", b"v", ())]), version=2)
    assert _code(resp) == ErrorCode.UNSUPPORTED_VERSION
    assert _log_end(broker.bootstrap_servers) == 0


def _peak_rss_kb(pid: int) -> int:
    from pathlib import Path

    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.broker_process
@pytest.mark.slow
def test_bad_input_decompression_bomb_bounded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # 64 MB of zeros compresses to a few KB. The broker never inflates a batch on the
    # produce path (it checks headers and CRC only), so its memory stays bounded.
    from broker_process import BrokerProcess

    bomb = build_batch([(b"k", bytes(64 << 20), ())], compression=CompressionType.ZSTD)
    assert len(bomb) < 100_000
    proc = BrokerProcess(tmp_path / "d").start()
    try:
        create_topic(proc.bootstrap, "t")
        assert proc.proc is not None
        before = _peak_rss_kb(proc.proc.pid)
        with RawConnection(proc.bootstrap) as conn:
            code = _code(_produce(conn, bomb))
        grown_kb = _peak_rss_kb(proc.proc.pid) - before
        assert code in (ErrorCode.NONE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
        assert grown_kb < 16 * 1024, f"broker peak memory grew by {grown_kb} KB"
        _still_serves(proc.bootstrap)
    finally:
        proc.stop()


def test_bad_input_batch_larger_than_segment(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with EmbeddedBroker(data_dir=tmp_path / "d") as b:
        create_topic(b.bootstrap_servers, "t", **{"segment.bytes": "1000"})
        with RawConnection(b.bootstrap_servers) as conn:
            code = _code(_produce(conn, build_batch([(b"k", b"v" * 2000, ())])))
            assert code == ErrorCode.RECORD_LIST_TOO_LARGE
            assert _code(_produce(conn, build_batch([(b"k", b"small", ())]))) == ErrorCode.NONE
        assert _log_end(b.bootstrap_servers) == 1


def test_bad_input_delete_records_beyond_high_watermark(broker: EmbeddedBroker) -> None:
    D = m.DeleteRecordsRequest  # noqa: N806
    with RawConnection(broker.bootstrap_servers) as conn:
        _produce(conn, build_batch([(b"k", b"v", ())]))
        resp = conn.request(m.ApiKey.DELETE_RECORDS, 2, D(timeout_ms=1000, topics=[
            D.DeleteRecordsTopic(name="t", partitions=[
                D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=999),
                D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=7, offset=0)])]))
    beyond, unknown = resp.topics[0].partitions
    assert (beyond.error_code, beyond.low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _log_end(broker.bootstrap_servers) == 1
