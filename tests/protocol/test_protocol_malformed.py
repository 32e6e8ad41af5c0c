"""Hostile and broken input: every failure is a DecodeError, never a crash or an allocation."""

from __future__ import annotations

import struct
import tracemalloc
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.errors import DecodeError, ProtocolError

P = m.ProduceRequest
F = m.FetchRequest


def _produce(version: int) -> m.ProduceRequest:
    return P(
        transactional_id="txn-é", acks=-1, timeout_ms=1500,
        topic_data=[P.TopicProduceData(name="orders", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=b"\x00" * 70),
            P.TopicProduceData.PartitionProduceData(index=1, records=None),
        ])])


def _fetch(version: int) -> m.FetchRequest:
    return F(
        cluster_id="c1", replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
        isolation_level=1, session_id=0, session_epoch=-1,
        topics=[F.FetchTopic(topic="orders", topic_id=uuid.UUID(int=5), partitions=[
            F.FetchTopic.FetchPartition(partition=3, current_leader_epoch=4, fetch_offset=99,
                                        last_fetched_epoch=2, log_start_offset=-1,
                                        partition_max_bytes=65536)])],
        forgotten_topics_data=[], rack_id="r1")


SAMPLES = [
    (0, 3, _produce(3)),
    (0, 9, _produce(9)),
    (0, 11, _produce(11)),
    (1, 4, _fetch(4)),
    (1, 12, _fetch(12)),
    (1, 16, _fetch(16)),
    (3, 12, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="a")],
                              allow_auto_topic_creation=True)),
    (18, 3, m.ApiVersionsRequest(client_software_name="x", client_software_version="1")),
]


@pytest.mark.parametrize(("api_key", "version", "body"), SAMPLES)
def test_protocol_malformed_truncated_at_every_byte(api_key: int, version: int,
                                                    body: m.Message) -> None:
    frame = codec.encode_request(api_key, version, 42, "client-1", body)[4:]
    header, decoded = codec.decode_request(frame)
    assert decoded.encode(version) == body.encode(version)
    assert header.correlation_id == 42
    for cut in range(len(frame)):
        with pytest.raises(DecodeError):
            codec.decode_request(frame[:cut])


def test_protocol_malformed_truncated_body_carries_correlation_id() -> None:
    frame = codec.encode_request(0, 9, 77, "c", _produce(9))[4:]
    with pytest.raises(DecodeError) as info:
        codec.decode_request(frame[:-3])
    assert info.value.correlation_id == 77


def _metadata_v1_with_topic_count(count: int) -> bytes:
    header = struct.pack(">hhih", 3, 1, 9, 1) + b"c"
    return header + struct.pack(">i", count) + b"\x00\x01a"


@pytest.mark.parametrize("count", [2**31 - 1, 2**20, 5])
def test_protocol_malformed_huge_array_count_rejected_quickly(count: int) -> None:
    """Refused from the frame's size, before anything is allocated for the count: the
    memory the decode takes stays small whatever the count claims (time is load's)."""
    frame = _metadata_v1_with_topic_count(count)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            codec.decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # a list for 2**20 entries alone would take 8 MiB


def test_protocol_malformed_huge_counts_everywhere() -> None:
    # compact array count 2^32-2 (uvarint 0xffffffff) in a flexible Produce request
    head = struct.pack(">hhih", 0, 9, 1, -1) + b"\x00"  # header v2, null client id, no tags
    body = b"\x00" + struct.pack(">hi", 1, 1000) + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(DecodeError):
        codec.decode_request(head + body)
    # []int32 with 2^31-1 elements (the fixed-width fast path), compact and not
    lpr = m.ListPartitionReassignmentsRequest
    data = lpr(timeout_ms=1, topics=[lpr.ListPartitionReassignmentsTopics(
        name="t", partition_indexes=[7, 8])]).encode(0)
    ints = struct.pack(">ii", 7, 8)
    assert b"\x03" + ints in data
    with pytest.raises(DecodeError):
        lpr.decode(data.replace(b"\x03" + ints, b"\xff\xff\xff\xff\x07" + ints), 0)
    cpa = m.ConsumerProtocolAssignment
    data = cpa(assigned_partitions=[cpa.TopicPartition(topic="t", partitions=[7, 8])]).encode(0)
    assert struct.pack(">i", 2) + ints in data
    with pytest.raises(DecodeError):
        cpa.decode(data.replace(struct.pack(">i", 2) + ints, struct.pack(">i", 2**31 - 1) + ints),
                   0)
    # tagged field count larger than the input
    with pytest.raises(DecodeError):
        m.ApiVersionsResponse.decode(b"\x00\x00\x01\x00\x00\x00\x00\xff\xff\x03", 3)


def test_protocol_malformed_negative_lengths() -> None:
    header = struct.pack(">hhih", 3, 1, 9, 1) + b"c"
    with pytest.raises(DecodeError):  # array -2
        codec.decode_request(header + struct.pack(">i", -2))
    with pytest.raises(DecodeError):  # topic name length -1 in a non-nullable string
        codec.decode_request(header + struct.pack(">ih", 1, -1))
    with pytest.raises(DecodeError):  # client id length -2
        codec.decode_request(struct.pack(">hhih", 3, 1, 9, -2))
    # records length -2 in Produce v3
    body = struct.pack(">hhi", -1, 1, 100) + struct.pack(">ih", 1, 1) + b"t"
    body += struct.pack(">iii", 1, 0, -2)
    with pytest.raises(DecodeError):
        codec.decode_request(struct.pack(">hhih", 0, 3, 1, -1) + body)
    # nullable records (-1) are fine
    body_ok = body[:-4] + struct.pack(">i", -1)
    _, req = codec.decode_request(struct.pack(">hhih", 0, 3, 1, -1) + body_ok)
    assert req.topic_data[0].partition_data[0].records is None


def test_protocol_malformed_bad_utf8() -> None:
    header = struct.pack(">hhih", 3, 1, 9, 1) + b"c"
    with pytest.raises(DecodeError):
        codec.decode_request(header + struct.pack(">ih", 1, 2) + b"\xff\xfe")
    with pytest.raises(DecodeError):  # bad client id
        codec.decode_request(struct.pack(">hhih", 3, 1, 9, 1) + b"\xc3" + struct.pack(">i", 0))
    flexible = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="ab")])
    data = bytearray(flexible.encode(12))
    at = data.index(b"ab")
    data[at:at + 2] = b"\xed\xa0"  # a lone surrogate is not valid UTF-8
    with pytest.raises(DecodeError):
        m.MetadataRequest.decode(data, 12)


def test_protocol_malformed_overlong_uvarint() -> None:
    with pytest.raises(DecodeError):
        m.ApiVersionsRequest.decode(b"\x80\x80\x80\x80\x80\x80\x01", 3)


def test_protocol_malformed_tagged_field_overrun() -> None:
    # ApiVersionsResponse v3 with tag 1 (int64) declared 4 bytes long
    data = b"\x00\x00\x01\x00\x00\x00\x00\x01\x01\x04" + (5).to_bytes(8, "big")
    with pytest.raises(DecodeError):
        m.ApiVersionsResponse.decode(data, 3)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_protocol_malformed_random_frames_never_crash(data: bytes) -> None:
    try:
        codec.decode_request(data)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_protocol_malformed_mutated_frames_never_crash(data: st.DataObject) -> None:
    api_key, version, body = data.draw(st.sampled_from(SAMPLES))
    frame = bytearray(codec.encode_request(api_key, version, 1, "c", body)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    try:
        codec.decode_request(frame)
    except ProtocolError:
        pass
