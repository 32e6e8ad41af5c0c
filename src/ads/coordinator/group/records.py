"""Records of `__consumer_offsets`, in Kafka's own key/value layout.

Every record key and value starts with a big-endian int16 schema version, followed by the
struct of that version (schemas in `ads.protocol.messages`, from Kafka's internal-topics
JSON)::

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

A null value is a tombstone: the offset or group is deleted, and compaction
(`cleanup.policy=compact`) eventually keeps only the last record per key. Key versions 0
and 1 are offset commits, 2 group metadata; higher versions (Kafka's KIP-848 group
records) are skipped when loading, as are value versions this module does not know.

Crash recovery: one commit or group update is one record batch, committed before the
request is acknowledged. A batch torn by a crash fails its CRC and is truncated by log
recovery, so what was never acknowledged may vanish but an acknowledged commit never does.
Loading replays the partition in offset order; the last record of a key wins.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ads.coordinator.group.api import CommittedOffset
from ads.protocol import messages as m
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


def parse_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of a record, or None for a key version this broker does not use."""
    version = _version(data)
    try:
        if version in (0, 1):
            k = m.OffsetCommitKey.decode(memoryview(data)[2:], version)
            return OffsetKey(k.group, k.topic, k.partition)
        if version == GROUP_KEY_VERSION:
            return GroupKey(m.GroupMetadataKey.decode(memoryview(data)[2:], version).group)
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
