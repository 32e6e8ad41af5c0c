"""The KIP-848 consumer-group records of `__consumer_offsets`: Kafka's byte layout, and
every type round-trips (key and value)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ads.coordinator.group import records as rec

T = rec.ConsumerRecordType
T1 = uuid.UUID(int=1)

names = st.text(max_size=8)
owned = st.dictionaries(st.uuids(), st.sets(st.integers(0, 2**31 - 1), min_size=1),
                        max_size=3)


def test_coordinator_consumer_records_have_kafkas_layout() -> None:
    """Keys: int16 type, then int16-length strings; values: int16 version 0, then compact
    (flexible) fields and an empty tagged-field section."""
    assert rec.consumer_key(T.MEMBER_METADATA, "g", "m1") == (
        b"\x00\x05" + b"\x00\x01g" + b"\x00\x02m1")
    assert rec.consumer_key(T.GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert rec.epoch_value(7) == b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00"
    assert rec.member_metadata_value(rec.MemberMetadata(
        None, "r", "c", "/h", ("a", "b"), None, 300, "uniform")) == (
        b"\x00\x00" + b"\x00" + b"\x02r" + b"\x02c" + b"\x03/h" + b"\x03\x02a\x02b"
        + b"\x00" + b"\x00\x00\x01\x2c" + b"\x08uniform" + b"\x00")
    assert rec.current_assignment_value(rec.CurrentAssignment(5, 4, 1, {T1: {2, 0}}, {})) == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x04" + b"\x01"
        + b"\x02" + T1.bytes + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x02" + b"\x00"
        + b"\x01" + b"\x00")


@pytest.mark.parametrize("kind", list(T))
def test_coordinator_consumer_record_keys_round_trip(kind: rec.ConsumerRecordType) -> None:
    member = "" if kind in (T.GROUP_METADATA, T.PARTITION_METADATA,
                            T.TARGET_ASSIGNMENT_METADATA) else "member-1"
    assert rec.parse_key(rec.consumer_key(kind, "group", member)) == rec.ConsumerKey(
        kind, "group", member)


@given(st.integers(-(2**31), 2**31 - 1), owned)
def test_coordinator_consumer_epoch_and_target_values_round_trip(epoch: int, target: dict
                                                                 ) -> None:
    assert rec.parse_epoch_value(rec.epoch_value(epoch)) == epoch
    assert rec.parse_target_member_value(rec.target_member_value(target)) == target


@given(st.builds(rec.MemberMetadata, st.none() | names, st.none() | names, names, names,
                 st.lists(names, max_size=3).map(tuple), st.none() | names,
                 st.integers(-1, 2**31 - 1), st.none() | names))
def test_coordinator_consumer_member_metadata_round_trips(v: rec.MemberMetadata) -> None:
    assert rec.parse_member_metadata_value(rec.member_metadata_value(v)) == v


@given(st.builds(rec.CurrentAssignment, st.integers(-2, 2**31 - 1), st.integers(-2, 100),
                 st.sampled_from([0, 1, 2]), owned, owned))
def test_coordinator_consumer_current_assignment_round_trips(v: rec.CurrentAssignment
                                                             ) -> None:
    assert rec.parse_current_assignment_value(rec.current_assignment_value(v)) == v


@given(st.builds(rec.ResolvedRegex, st.lists(names, max_size=3).map(tuple),
                 st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)))
def test_coordinator_consumer_regex_value_round_trips(v: rec.ResolvedRegex) -> None:
    assert rec.parse_regex_value(rec.regex_value(v)) == v


def test_coordinator_consumer_record_values_refuse_garbage() -> None:
    with pytest.raises(rec.CoordinatorRecordError):
        rec.parse_current_assignment_value(b"\x00\x00\x00\x00")
    with pytest.raises(rec.CoordinatorRecordError):
        rec.parse_epoch_value(b"\x00\x01\x00\x00\x00\x07\x00")  # unknown value version
    assert rec.parse_key(b"\x00\x09\x00\x01g") is None  # another group type's record
