"""Framing and headers: size prefix, header versions, KIP-511, chunked responses."""

from __future__ import annotations

import struct

import pytest

from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.errors import (
    DecodeError,
    ErrorCode,
    UnknownApiKeyError,
    UnsupportedVersionError,
)

FR = m.FetchResponse
PD = FR.FetchableTopicResponse.PartitionData


class Region:
    """Stands in for a file region: only its length matters to the codec."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


def test_protocol_codec_header_versions() -> None:
    assert codec.request_header_version(m.ApiKey.CONTROLLED_SHUTDOWN, 0) == 0
    assert codec.request_header_version(m.ApiKey.CONTROLLED_SHUTDOWN, 1) == 1
    assert codec.request_header_version(m.ApiKey.PRODUCE, 8) == 1
    assert codec.request_header_version(m.ApiKey.PRODUCE, 9) == 2
    assert codec.request_header_version(m.ApiKey.API_VERSIONS, 2) == 1
    assert codec.request_header_version(m.ApiKey.API_VERSIONS, 3) == 2
    assert codec.request_header_version(m.ApiKey.API_VERSIONS, 9) == 2  # newer than ours
    assert codec.response_header_version(m.ApiKey.PRODUCE, 9) == 1
    assert codec.response_header_version(m.ApiKey.FETCH, 11) == 0
    assert codec.response_header_version(m.ApiKey.API_VERSIONS, 3) == 0
    with pytest.raises(UnknownApiKeyError):
        codec.request_header_version(999, 0)


@pytest.mark.parametrize("client_id", [None, "", "rdkafka", "klient-ü"])
@pytest.mark.parametrize(("api_key", "version"), [(0, 3), (0, 9), (18, 0), (18, 3), (7, 0)])
def test_protocol_codec_request_roundtrip(client_id: str | None, api_key: int,
                                          version: int) -> None:
    body = m.API_KEYS[api_key][1]()
    data = codec.encode_request(api_key, version, 1234, client_id, body)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    header, decoded = codec.decode_request(memoryview(data)[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, 1234)
    expected_client = None if codec.request_header_version(api_key, version) == 0 else client_id
    assert header.client_id == expected_client
    assert decoded == body


@pytest.mark.parametrize("version", [1, 2])
def test_protocol_codec_header_matches_schema(version: int) -> None:
    """The hand-written header layout agrees with the generated RequestHeader schema."""
    api_version = 9 if version == 2 else 3
    data = codec.encode_request(0, api_version, 55, "cid", m.ProduceRequest())[4:]
    generic = m.RequestHeaderData(request_api_key=0, request_api_version=api_version,
                                  correlation_id=55, client_id="cid")
    encoded = generic.encode(version)
    assert data.startswith(encoded)
    header, offset = codec.decode_request_header(data)
    assert offset == len(encoded)
    assert m.RequestHeaderData.decode(data, version) == generic


def test_protocol_codec_request_header_skips_tagged_fields() -> None:
    head = struct.pack(">hhih", 18, 3, 8, 3) + b"abc" + b"\x01\x00\x02zz"
    body = m.ApiVersionsRequest(client_software_name="n", client_software_version="v")
    header, decoded = codec.decode_request(head + body.encode(3))
    assert header.client_id == "abc"
    assert decoded == body


def test_protocol_codec_response_roundtrip() -> None:
    for api_key, version in [(0, 8), (0, 9), (18, 0), (18, 3), (3, 12)]:
        body = m.API_KEYS[api_key][2]()
        chunks = codec.encode_response(api_key, version, 99, body)
        data = b"".join(chunks)
        assert struct.unpack_from(">i", data)[0] == len(data) - 4
        correlation_id, decoded = codec.decode_response(api_key, version, data[4:])
        assert correlation_id == 99 and decoded == body


def test_protocol_codec_api_versions_response_header_is_v0() -> None:
    body = m.ApiVersionsResponse(error_code=0, api_keys=[
        m.ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)])
    data = b"".join(codec.encode_response(18, 3, 5, body))
    assert data[4:8] == b"\x00\x00\x00\x05"
    assert data[8:] == body.encode(3)  # no tagged-field byte after the correlation id


def test_protocol_codec_response_chunks_keep_regions() -> None:
    r1, r2 = Region(b"A" * 100), Region(b"B" * 300)
    parts = [PD(partition_index=0, high_watermark=10, records=r1),
             PD(partition_index=1, high_watermark=20, records=None),
             PD(partition_index=2, high_watermark=30, records=r2)]
    body = FR(responses=[FR.FetchableTopicResponse(topic="t", partitions=parts)])
    for version in (4, 11, 12):
        chunks = codec.encode_response(1, version, 3, body)
        # non-flexible versions end with the last records field; flexible ones with tags
        assert len(chunks) == (5 if version >= 12 else 4)
        assert chunks[1] is r1 and chunks[3] is r2
        assert all(isinstance(c, (bytes, bytearray)) for c in chunks[::2])
        wire = b"".join(c.data if isinstance(c, Region) else bytes(c) for c in chunks)
        assert struct.unpack_from(">i", wire)[0] == len(wire) - 4
        corr, decoded = codec.decode_response(1, version, wire[4:])
        assert corr == 3
        got = decoded.responses[0].partitions
        assert bytes(got[0].records) == r1.data
        assert got[1].records is None
        assert bytes(got[2].records) == r2.data
        with pytest.raises(TypeError):
            body.encode(version)
    flat = FR(responses=[FR.FetchableTopicResponse(topic="t", partitions=[
        PD(partition_index=0, records=b"xyz")])])
    assert len(codec.encode_response(1, 12, 3, flat)) == 1
    assert b"".join(flat.encode_chunks(12)) == flat.encode(12)


def test_protocol_codec_kip511_api_versions_fallback() -> None:
    head = struct.pack(">hhih", 18, 7, 31, 4) + b"next" + b"\x00"
    frame = head + b"\x02x\x021\x00"  # whatever a future v7 body holds
    with pytest.raises(UnsupportedVersionError) as info:
        codec.decode_request_header(frame)
    exc = info.value
    assert (exc.api_key, exc.api_version, exc.correlation_id) == (18, 7, 31)
    assert isinstance(exc.header, codec.RequestHeader)
    assert exc.header.client_id == "next"
    ranges = [(0, 0, 11), (1, 4, 17), (18, 0, 4)]
    answer = codec.encode_api_versions_fallback(31, ErrorCode.UNSUPPORTED_VERSION, ranges)
    assert struct.unpack_from(">i", answer)[0] == len(answer) - 4
    corr, resp = codec.decode_response(18, 0, answer[4:])
    assert corr == 31
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == ranges
    assert answer == b"".join(codec.encode_response(18, 0, 31, resp))


def test_protocol_codec_unknown_api_and_unsupported_version() -> None:
    with pytest.raises(UnknownApiKeyError) as unknown:
        codec.decode_request_header(struct.pack(">hhih", 1000, 0, 17, -1))
    assert (unknown.value.api_key, unknown.value.correlation_id) == (1000, 17)
    with pytest.raises(UnsupportedVersionError) as unsupported:
        codec.decode_request_header(struct.pack(">hhih", 0, 40, 18, -1) + b"\x00")
    assert unsupported.value.correlation_id == 18
    assert unsupported.value.header.client_id is None
    with pytest.raises(UnsupportedVersionError) as broken:  # header unreadable
        codec.decode_request_header(struct.pack(">hhi", 0, 40, 19) + b"\x00\x09")
    assert broken.value.correlation_id == 19 and broken.value.header is None
    with pytest.raises(DecodeError):
        codec.decode_request_header(b"\x00\x00\x00")
    with pytest.raises(UnsupportedVersionError):
        m.ProduceRequest().encode(12)
    with pytest.raises(UnsupportedVersionError):
        m.ProduceRequest.decode(b"", -1)


def test_protocol_codec_body_type_checked() -> None:
    with pytest.raises(TypeError):
        codec.encode_request(0, 9, 1, None, m.FetchRequest())
    with pytest.raises(TypeError):
        codec.encode_response(0, 9, 1, m.ProduceRequest())


def test_protocol_codec_decode_request_body_at_offset() -> None:
    body = m.FindCoordinatorRequest(key="group", key_type=0)
    frame = codec.encode_request(10, 3, 1, "c", body)[4:]
    header, offset = codec.decode_request_header(frame)
    assert codec.decode_request_body(header.api_key, header.api_version, frame, offset) == body


@pytest.mark.parametrize("count", [0, 1, 3, 256, 257, 3000])
@pytest.mark.parametrize("version", [0, 9, 12])
def test_protocol_codec_fixed_width_arrays_of_any_length(count: int, version: int) -> None:
    """Arrays of int32 as Metadata carries them, empty, short, at and past the count whose
    packer is kept, in the non-flexible and the flexible encoding: the bytes are what
    `struct` makes of them and decode back to the same values."""
    MR = m.MetadataResponse
    replicas = [i - count // 2 for i in range(count)]  # negative values too
    partition = MR.MetadataResponseTopic.MetadataResponsePartition(
        error_code=0, partition_index=7, leader_id=1, leader_epoch=2,
        replica_nodes=replicas, isr_nodes=replicas[:1], offline_replicas=[])
    body = MR(throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=1,
              topics=[MR.MetadataResponseTopic(error_code=0, name="t", is_internal=False,
                                               partitions=[partition])])
    chunks = codec.encode_response(m.ApiKey.METADATA, version, 5, body)
    frame = b"".join(bytes(c) for c in chunks)[4:]
    assert struct.pack(f">{count}i", *replicas) in frame
    _, back = codec.decode_response(m.ApiKey.METADATA, version, frame)
    (got,) = back.topics[0].partitions
    assert (got.replica_nodes, got.isr_nodes, got.offline_replicas) == (
        replicas, replicas[:1], [])
