"""Records of `__consumer_offsets`, in Kafka's own key/value layout.

Every record key and value starts with a big-endian int16: for the key it is the record
type (Kafka calls it the key version), for the value the value's schema version. The
struct of that version follows (offset and classic group schemas in
`ads.protocol.messages`, from Kafka's internal-topics JSON; KIP-848 consumer-group schemas
in `consumer_schemas.py`). Keys are never flexible; consumer-group values are (compact
strings and arrays, uvarint lengths plus one, a tagged-field section, here empty: 0x00)::

    offset commit    key   int16 1 | OffsetCommitKey v1: group string | topic string |
                                     partition int32
                     value int16 3 | OffsetCommitValue v3: offset int64 | leader_epoch int32 |
                                     metadata string | commit_timestamp int64
                           (int16 1 | v1 with expire_timestamp int64 when the commit carried
                            a retention time, OffsetCommit v2-v4)
    group metadata   key   int16 2 | GroupMetadataKey v2: group string
                     value int16 3 | GroupMetadataValue v3: protocol_type, generation,
                                     protocol, leader, current_state_timestamp, members
                                     (member_id, group_instance_id, client_id, client_host,
                                     rebalance_timeout, session_timeout, subscription bytes,
                                     assignment bytes)*

    KIP-848 consumer groups (value version 0 each):
    3  ConsumerGroupMetadata             key group | value epoch int32 (the group epoch)
    5  ConsumerGroupMemberMetadata       key group | member | value instance_id? | rack_id? |
                                         client_id | client_host | subscribed_topic_names
                                         [string] | subscribed_topic_regex? |
                                         rebalance_timeout_ms int32 | server_assignor?
    6  ConsumerGroupTargetAssignmentMetadata  key group | value assignment_epoch int32
    7  ConsumerGroupTargetAssignmentMember    key group | member | value
                                         [topic_id uuid | partitions [int32]]
    8  ConsumerGroupCurrentMemberAssignment   key group | member | value member_epoch int32 |
                                         previous_member_epoch int32 | state int8 (0 STABLE,
                                         1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS) |
                                         assigned [topic partitions] | pending revocation
                                         [topic partitions]
    16 ConsumerGroupRegularExpression    key group | regex | value topics [string] |
                                         version int64 | timestamp int64
    (`?` nullable; type 4, ConsumerGroupPartitionMetadata, is no longer written by Kafka 4.x
    and is skipped when read.)

A null value is a tombstone: the offset, group or member record is deleted, and compaction
(`cleanup.policy=compact`) eventually keeps only the last record per key. Key versions 0
and 1 are offset commits, 2 classic group metadata, 3-16 as above; other types (share and
streams groups) are skipped when loading, as are value versions this module does not know.

Crash recovery: one commit, group update or heartbeat's change is one record batch,
committed before the request is acknowledged. A batch torn by a crash fails its CRC and is
truncated by log recovery, so what was never acknowledged may vanish but an acknowledged
change never does. Loading replays the partition in offset order; the last record of a key
wins.
"""

from __future__ import annotations

import enum
import struct
import uuid
from dataclasses import dataclass
from typing import TypeVar

from ads.coordinator.group import consumer_schemas as cs
from ads.coordinator.group.api import CommittedOffset, Owned
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.errors import DecodeError

OFFSETS_TOPIC = "__consumer_offsets"

_VERSION = struct.Struct(">h")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


class CoordinatorRecordError(Exception):
    """A record of the internal topic could not be decoded."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def offset_key(group: str, topic: str, partition: int) -> bytes:
    body = m.OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _VERSION.pack(OFFSET_KEY_VERSION) + body.encode(OFFSET_KEY_VERSION)


def offset_value(committed: CommittedOffset) -> bytes:
    version = (OFFSET_VALUE_VERSION if committed.expire_timestamp < 0
               else OFFSET_VALUE_VERSION_WITH_EXPIRY)
    body = m.OffsetCommitValue(
        offset=committed.offset, leader_epoch=committed.leader_epoch,
        metadata=committed.metadata, commit_timestamp=committed.commit_timestamp,
        expire_timestamp=committed.expire_timestamp)
    return _VERSION.pack(version) + body.encode(version)


def group_key(group: str) -> bytes:
    return _VERSION.pack(GROUP_KEY_VERSION) + m.GroupMetadataKey(group=group).encode(
        GROUP_KEY_VERSION)


def group_value(value: m.GroupMetadataValue) -> bytes:
    return _VERSION.pack(GROUP_VALUE_VERSION) + value.encode(GROUP_VALUE_VERSION)


def _version(data: bytes) -> int:
    if len(data) < _VERSION.size:
        raise CoordinatorRecordError(f"record of {len(data)} bytes has no version")
    return int(_VERSION.unpack_from(data)[0])


def parse_key(data: bytes) -> OffsetKey | GroupKey | ConsumerKey | None:
    """The key of a record, or None for a key version this broker does not use."""
    version = _version(data)
    body = memoryview(data)[2:]
    try:
        if version in (0, 1):
            k = m.OffsetCommitKey.decode(body, version)
            return OffsetKey(k.group, k.topic, k.partition)
        if version == GROUP_KEY_VERSION:
            return GroupKey(m.GroupMetadataKey.decode(body, version).group)
        if version in _CONSUMER_TYPES:
            kind = ConsumerRecordType(version)
            if kind in _GROUP_KEYED:
                return ConsumerKey(kind, cs.ConsumerGroupKey.decode(body, 0).group_id)
            mk = cs.ConsumerMemberKey.decode(body, 0)
            return ConsumerKey(kind, mk.group_id, mk.member_id)
    except DecodeError as exc:
        raise CoordinatorRecordError(str(exc)) from exc
    return None


def parse_offset_value(data: bytes) -> CommittedOffset:
    version = _version(data)
    if not 0 <= version <= m.OffsetCommitValue.VALID_VERSIONS[1]:
        raise CoordinatorRecordError(f"unknown offset commit value version {version}")
    try:
        v = m.OffsetCommitValue.decode(memoryview(data)[2:], version)
    except DecodeError as exc:
        raise CoordinatorRecordError(str(exc)) from exc
    return CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                           v.expire_timestamp)


def parse_group_value(data: bytes) -> m.GroupMetadataValue:
    version = _version(data)
    if not 0 <= version <= m.GroupMetadataValue.VALID_VERSIONS[1]:
        raise CoordinatorRecordError(f"unknown group metadata value version {version}")
    try:
        return m.GroupMetadataValue.decode(memoryview(data)[2:], version)
    except DecodeError as exc:
        raise CoordinatorRecordError(str(exc)) from exc


# -- KIP-848 consumer groups ---------------------------------------------------------------
class ConsumerRecordType(enum.IntEnum):
    """The key version of each consumer-group record, as Kafka numbers them."""

    GROUP_METADATA = 3
    PARTITION_METADATA = 4  # not written since Kafka 4.0; skipped when read
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_MEMBER_ASSIGNMENT = 8
    REGULAR_EXPRESSION = 16


_M = TypeVar("_M", bound=Message)
_CONSUMER_TYPES = frozenset(int(t) for t in ConsumerRecordType)
_GROUP_KEYED = frozenset({ConsumerRecordType.GROUP_METADATA,
                          ConsumerRecordType.PARTITION_METADATA,
                          ConsumerRecordType.TARGET_ASSIGNMENT_METADATA})
CONSUMER_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """A consumer-group record's key: `member` is the member id (types 5, 7, 8), the
    regular expression (16), or empty (3, 4, 6)."""

    type: ConsumerRecordType
    group: str
    member: str = ""


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """What a member said of itself: the ConsumerGroupMemberMetadata value."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """Where a member is in its reconciliation: the ConsumerGroupCurrentMemberAssignment
    value (`state` as Kafka numbers MemberState)."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Owned
    pending_revocation: Owned


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """The topics a subscribed regular expression matched, and when."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


def consumer_key(kind: ConsumerRecordType, group: str, member: str = "") -> bytes:
    if kind in _GROUP_KEYED:
        body = cs.ConsumerGroupKey(group_id=group).encode(0)
    else:
        body = cs.ConsumerMemberKey(group_id=group, member_id=member).encode(0)
    return _VERSION.pack(kind) + body


def _value(body: Message) -> bytes:
    return _VERSION.pack(CONSUMER_VALUE_VERSION) + body.encode(CONSUMER_VALUE_VERSION)


def _topic_partitions(owned: Owned) -> list[cs.TopicPartitions]:
    return [cs.TopicPartitions(topic_id=t, partitions=sorted(p))
            for t, p in sorted(owned.items(), key=lambda kv: kv[0].bytes) if p]


def _owned(tps: list[cs.TopicPartitions]) -> Owned:
    out: dict[uuid.UUID, set[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out


def epoch_value(epoch: int) -> bytes:
    """The value of a ConsumerGroupMetadata or ConsumerGroupTargetAssignmentMetadata record."""
    return _value(cs.EpochValue(epoch=epoch))


def member_metadata_value(v: MemberMetadata) -> bytes:
    return _value(cs.MemberMetadataValue(
        instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
        client_host=v.client_host, subscribed_topic_names=list(v.subscribed_topic_names),
        subscribed_topic_regex=v.subscribed_topic_regex,
        rebalance_timeout_ms=v.rebalance_timeout_ms, server_assignor=v.server_assignor))


def target_member_value(owned: Owned) -> bytes:
    return _value(cs.TargetAssignmentMemberValue(topic_partitions=_topic_partitions(owned)))


def current_assignment_value(v: CurrentAssignment) -> bytes:
    return _value(cs.CurrentMemberAssignmentValue(
        member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
        state=v.state, assigned_partitions=_topic_partitions(v.assigned),
        partitions_pending_revocation=_topic_partitions(v.pending_revocation)))


def regex_value(v: ResolvedRegex) -> bytes:
    return _value(cs.RegularExpressionValue(topics=list(v.topics), version=v.version,
                                            timestamp=v.timestamp))


def _decode_value(cls: type[_M], data: bytes) -> _M:
    version = _version(data)
    if version != CONSUMER_VALUE_VERSION:
        raise CoordinatorRecordError(f"unknown {cls.__name__} version {version}")
    try:
        return cls.decode(memoryview(data)[2:], version)
    except DecodeError as exc:
        raise CoordinatorRecordError(str(exc)) from exc


def parse_epoch_value(data: bytes) -> int:
    return _decode_value(cs.EpochValue, data).epoch


def parse_member_metadata_value(data: bytes) -> MemberMetadata:
    v = _decode_value(cs.MemberMetadataValue, data)
    return MemberMetadata(v.instance_id, v.rack_id, v.client_id, v.client_host,
                          tuple(v.subscribed_topic_names), v.subscribed_topic_regex,
                          v.rebalance_timeout_ms, v.server_assignor)


def parse_target_member_value(data: bytes) -> Owned:
    return _owned(_decode_value(cs.TargetAssignmentMemberValue, data).topic_partitions)


def parse_current_assignment_value(data: bytes) -> CurrentAssignment:
    v = _decode_value(cs.CurrentMemberAssignmentValue, data)
    return CurrentAssignment(v.member_epoch, v.previous_member_epoch, v.state,
                             _owned(v.assigned_partitions),
                             _owned(v.partitions_pending_revocation))


def parse_regex_value(data: bytes) -> ResolvedRegex:
    v = _decode_value(cs.RegularExpressionValue, data)
    return ResolvedRegex(tuple(v.topics), v.version, v.timestamp)
