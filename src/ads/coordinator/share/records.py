"""Records of `__share_group_state`, in the layout of Kafka's ShareSnapshot and ShareUpdate.

Each key and value starts with a big-endian int16; for the key it is the record type (0: a
ShareSnapshot, 1: a ShareUpdate), for the value its version (0). The key struct is not
flexible, the values are (compact arrays, tagged fields)::

    key     int16 type | group_id string (int16 length) | topic_id uuid (16 bytes) |
            partition int32
    ShareSnapshot value  int16 0 | snapshot_epoch uint16 | state_epoch int32 |
            leader_epoch int32 | start_offset int64 |
            state_batches compact array of StateBatch | tagged fields
    ShareUpdate value    int16 0 | snapshot_epoch uint16 | leader_epoch int32 |
            start_offset int64 (-1: not moved) | state_batches compact array | tagged fields
    StateBatch  first_offset int64 | last_offset int64 | delivery_state int8
                (0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED) | delivery_count int16 | tagged fields

A snapshot is a share-partition's whole state; an update carries only the state batches
one write changed, to be combined with the snapshot and the updates before it
(`state.combine`). A null value (under the snapshot key and the update key) is a
tombstone: the share-partition's state was deleted (DeleteShareGroupState).

Crash rule: one write is one record in one batch, committed (acks=all) before the writer
is answered. A batch torn by a crash fails its CRC and is cut by log recovery, so a reload
rebuilds the state of the last write that was answered, or of a later one that was not.
Because updates need every record since their snapshot, the topic is not compacted
(compaction would keep only the last update of a key): its cleanup policy is `delete`
without time or size retention, as Kafka's.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from ads.protocol.errors import DecodeError
from ads.protocol.types import Reader, Writer

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

SNAPSHOT, UPDATE = 0, 1
VALUE_VERSION = 0
_VERSION = struct.Struct(">h")


class ShareRecordError(Exception):
    """A record of `__share_group_state` could not be decoded."""


class ShareKey(NamedTuple):
    """A share-partition: the coordinator's key."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """What FindCoordinator (key type 2) hashes: "groupId:topicId:partition", with the
        topic id in Kafka's base64 form."""
        return f"{self.group_id}:{kafka_uuid(self.topic_id)}:{self.partition}"


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


class StateBatch(NamedTuple):
    """Offsets `first`..`last` in one delivery state with one delivery count."""

    first: int
    last: int
    state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareValue:
    """A decoded ShareSnapshot (`state_epoch` set) or ShareUpdate (`state_epoch` None)."""

    snapshot_epoch: int
    state_epoch: int | None
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


def encode_key(kind: int, key: ShareKey) -> bytes:
    w = Writer()
    w.int16(kind)
    w.string(key.group_id)
    w.uuid(key.topic_id)
    w.int32(key.partition)
    return w.getvalue()


def encode_value(value: ShareValue) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    w.uint16(value.snapshot_epoch & 0xFFFF)
    if value.state_epoch is not None:
        w.int32(value.state_epoch)
    w.int32(value.leader_epoch)
    w.int64(value.start_offset)
    w.compact_array_length(len(value.batches))
    for b in value.batches:
        w.int64(b.first)
        w.int64(b.last)
        w.int8(b.state)
        w.int16(b.delivery_count)
        w.tagged_fields([])
    w.tagged_fields([])
    return w.getvalue()


def decode_key(data: bytes) -> tuple[int, ShareKey]:
    """(record type, key)."""
    try:
        r = Reader(data)
        kind = r.int16()
        if kind not in (SNAPSHOT, UPDATE):
            raise ShareRecordError(f"unknown share state record type {kind}")
        return kind, ShareKey(r.string(), r.uuid(), r.int32())
    except DecodeError as exc:
        raise ShareRecordError(str(exc)) from exc


def decode_value(kind: int, data: bytes) -> ShareValue:
    try:
        r = Reader(data)
        version = r.int16()
        if version != VALUE_VERSION:
            raise ShareRecordError(f"unknown share state value version {version}")
        snapshot_epoch = r.uint16()
        state_epoch = r.int32() if kind == SNAPSHOT else None
        leader_epoch, start = r.int32(), r.int64()
        count = r.array_length(compact=True, nullable=False, min_element_size=20) or 0
        batches = []
        for _ in range(count):
            batches.append(StateBatch(r.int64(), r.int64(), r.int8(), r.int16()))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
    except DecodeError as exc:
        raise ShareRecordError(str(exc)) from exc
    return ShareValue(snapshot_epoch, state_epoch, leader_epoch, start, tuple(batches))
