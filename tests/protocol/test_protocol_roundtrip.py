"""Every schema at every valid version: populate, encode, decode, compare, re-encode."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ads.protocol import messages as m
from ads.protocol.base import Message, Struct
from ads.protocol.schema import Field

_INTS = {
    "int8": (-7, 100),
    "int16": (-300, 12345),
    "int32": (-70000, 2_000_000_000),
    "int64": (-(2**40), 2**62),
    "uint16": (1, 65535),
    "uint32": (1, 4_000_000_000),
}


def _within(rng: tuple[int, int], version: int) -> bool:
    return rng[0] <= version <= rng[1]


class Populator:
    """Builds instances whose every field present at `version` holds a non-default value."""

    def __init__(self, version: int, *, nulls: bool, long_strings: bool) -> None:
        self.version = version
        self.nulls = nulls
        self.long_strings = long_strings
        self.seed = 0

    def next(self) -> int:
        self.seed += 1
        return self.seed

    def struct(self, cls: type[Struct]) -> Struct:
        obj = cls()
        for f in cls._FIELDS:
            if not _within(f.versions, self.version):
                continue
            if self.nulls and _within(f.nullable, self.version):
                setattr(obj, f.name, None)
            else:
                setattr(obj, f.name, self.value(f, f.kind))
        return obj

    def value(self, f: Field, kind: str) -> Any:
        n = self.next()
        if kind in _INTS:
            lo, hi = _INTS[kind]
            return lo if n % 2 else hi
        if kind == "bool":
            return not f.default
        if kind == "float64":
            return 1.5 + n
        if kind == "string":
            base = f"{f.name}-é-{n}"
            return base * 20 if self.long_strings else base
        if kind == "bytes":
            return bytes(range(n % 7 + 1)) * (60 if self.long_strings else 1)
        if kind == "records":
            return b"\x00batch" * (n % 3 + 1) * (40 if self.long_strings else 1)
        if kind == "uuid":
            return uuid.UUID(int=n * 7919 + 1)
        if kind == "struct":
            assert f.struct is not None
            return self.struct(f.struct)
        if kind == "array":
            assert f.element is not None
            count = 130 if self.long_strings and f.element == "int32" else 2
            if f.element == "struct":
                assert f.struct is not None
                return [self.struct(f.struct) for _ in range(count)]
            return [self.value(f, f.element) for _ in range(count)]
        raise AssertionError(kind)


def _all_cases() -> list[tuple[type[Message], int]]:
    cases = []
    for cls in m.MESSAGES.values():
        lo, hi = cls.VALID_VERSIONS
        cases.extend((cls, v) for v in range(lo, hi + 1))
    return cases


CASES = _all_cases()


def _roundtrip(obj: Message, version: int) -> None:
    cls = type(obj)
    data = obj.encode(version)
    decoded = cls.decode(data, version)
    assert decoded == obj, f"{cls.__name__} v{version}"
    assert decoded.encode(version) == data
    # Decoding consumes exactly what encoding wrote.
    _, end = cls.decode_at(memoryview(data + b"trailing"), 0, version)
    assert end == len(data)


@pytest.mark.parametrize("mode", ["values", "nulls", "long"])
def test_protocol_roundtrip_every_schema_every_version(mode: str) -> None:
    for cls, version in CASES:
        pop = Populator(version, nulls=mode == "nulls", long_strings=mode == "long")
        _roundtrip(pop.struct(cls), version)  # type: ignore[arg-type]


def test_protocol_roundtrip_defaults_every_schema_every_version() -> None:
    for cls, version in CASES:
        _roundtrip(cls(), version)


def test_protocol_roundtrip_covers_every_api() -> None:
    assert len(m.API_KEYS) == len(m.ApiKey)
    for key, (_name, req, resp) in m.API_KEYS.items():
        assert req.API_KEY == resp.API_KEY == key
        assert req.VALID_VERSIONS == resp.VALID_VERSIONS
    assert {"OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
            "TransactionLogKey", "TransactionLogValue"} <= set(m.MESSAGES)


def test_protocol_roundtrip_constructor_defaults() -> None:
    PD = m.FetchResponse.FetchableTopicResponse.PartitionData
    r = PD()
    assert r.last_stable_offset == -1
    assert r.records is None
    assert r.aborted_transactions == []
    assert r.diverging_epoch == PD.EpochEndOffset(epoch=-1, end_offset=-1)
    assert r.diverging_epoch is not PD().diverging_epoch
    req = m.ProduceRequest()
    assert req.transactional_id is None
    assert req.topic_data == [] and req.topic_data is not m.ProduceRequest().topic_data
    meta = m.MetadataRequest.MetadataRequestTopic()
    assert meta.topic_id == uuid.UUID(int=0)
    assert meta.name == ""  # nullable from v10, but no null default
    assert m.OffsetCommitValue().leader_epoch == -1
    assert m.ConsumerGroupDescribeResponse.DescribedGroup().authorized_operations == -(2**31)
    assert m.ApiVersionsResponse().finalized_features_epoch == -1


def test_protocol_roundtrip_names_and_metadata() -> None:
    assert m.ApiKey.PRODUCE == 0
    assert m.ApiKey.FETCH == 1
    assert m.ApiKey.LIST_OFFSETS == 2
    assert m.ApiKey.METADATA == 3
    assert m.ApiKey.LEADER_AND_ISR == 4
    assert m.ApiKey.OFFSET_FOR_LEADER_EPOCH == 23
    assert m.ApiKey.API_VERSIONS == 18
    assert m.ApiKey.CREATE_TOPICS == 19
    assert m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS == 50
    assert m.API_KEYS[0] == ("Produce", m.ProduceRequest, m.ProduceResponse)
    assert m.ProduceRequest.FLEXIBLE_VERSIONS == 9
    assert m.ProduceRequest.VALID_VERSIONS == (0, 11)
    assert m.OffsetCommitKey.FLEXIBLE_VERSIONS is None
    assert m.FetchRequest().max_wait_ms == 0
    assert "throttle_time_ms" in m.FetchResponse.__slots__
    assert "producer_id" in m.InitProducerIdResponse.__slots__
    # Shared structs hang off their message; nested ones off their parent struct.
    assert m.ConsumerGroupDescribeResponse.Assignment
    assert m.ProduceRequest.TopicProduceData.PartitionProduceData
    repr(m.ProduceRequest(topic_data=[m.ProduceRequest.TopicProduceData(name="t")]))


def test_protocol_roundtrip_tagged_fields_only_when_set() -> None:
    resp = m.ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
    plain = resp.encode(3)
    assert plain == b"\x00\x00\x01\x00\x00\x00\x00\x00"
    resp.finalized_features_epoch = 5
    tagged = resp.encode(3)
    # one tagged field: tag 1, size 8, int64 5
    assert tagged == b"\x00\x00\x01\x00\x00\x00\x00\x01\x01\x08" + (5).to_bytes(8, "big")
    assert m.ApiVersionsResponse.decode(tagged, 3).finalized_features_epoch == 5
    # unknown tags are skipped
    unknown = b"\x00\x00\x01\x00\x00\x00\x00\x02\x01\x08" + (5).to_bytes(8, "big") + b"\x09\x01\x00"
    assert m.ApiVersionsResponse.decode(unknown, 3).finalized_features_epoch == 5


def test_protocol_roundtrip_nullable_struct_layout() -> None:
    resp = m.ConsumerGroupHeartbeatResponse(member_id="a", assignment=None)
    data = resp.encode(0)
    assert m.ConsumerGroupHeartbeatResponse.decode(data, 0).assignment is None
    resp.assignment = m.ConsumerGroupHeartbeatResponse.Assignment()
    data2 = resp.encode(0)
    assert len(data2) == len(data) + 2  # marker 1 (vs -1), empty array, tags
    assert m.ConsumerGroupHeartbeatResponse.decode(data2, 0).assignment == resp.assignment


def test_protocol_roundtrip_decoded_bytes_are_views() -> None:
    req = m.SaslAuthenticateRequest(auth_bytes=b"secret")
    data = bytearray(req.encode(2))
    decoded = m.SaslAuthenticateRequest.decode(data, 2)
    assert isinstance(decoded.auth_bytes, memoryview)
    assert decoded.auth_bytes.obj is data
    assert decoded.auth_bytes == b"secret"
