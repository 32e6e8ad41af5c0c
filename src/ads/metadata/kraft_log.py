"""Reading the KRaft metadata log, `__cluster_metadata`: its batches, records and frames.

The log is one partition (topic id 0...01, partition 0) of RecordBatch v2 batches
(`ads.records.batch` has the batch layout), appended by the active controller, replicated by
Raft. Two kinds of batch share it:

- control batches (attribute bit 5): Raft's own records (leader change, snapshot header
  and footer, KRaft version, voters), keyed by a control type. A broker following the log
  reads nothing in them but their offsets.
- data batches: metadata records, with a null key and a value framed as::

      frameVersion  unsigned varint   1 (0 was a preview format no controller writes now)
      recordType    unsigned varint   the record schema's API key (TopicRecord = 2, ...)
      version       unsigned varint   the record schema's version
      record        the record encoded at that version (every version is flexible)

  with nothing after the record.

A snapshot is the same batches from a header control batch to a footer control batch, so
`read_batches` reads snapshot chunks as well once they are whole.

A batch that does not decode (bad CRC, a record type or version this broker does not know,
bytes after a record) raises `MetadataRecordError`: the broker never applies half a batch.
Sans-io: bytes in, records out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from ads.metadata.kraft_records import METADATA_RECORDS
from ads.protocol.base import Message
from ads.protocol.errors import ProtocolError
from ads.protocol.types import BytesLike, Reader, Writer
from ads.records.batch import iter_batches, iter_records
from ads.records.errors import RecordError

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
METADATA_PARTITION = 0
FRAME_VERSION = 1
# Metadata batches are small (the controller caps them at 8 KiB of records); this bounds a
# compressed batch that claims more.
MAX_BATCH_BYTES = 64 * 1024 * 1024


class MetadataRecordError(ValueError):
    """A metadata batch or record this broker cannot read."""


@dataclass(frozen=True, slots=True)
class MetadataBatch:
    """One batch of the metadata log: its offsets, the leader epoch that appended it, and
    its records, decoded (none for a control batch)."""

    base_offset: int
    last_offset: int
    epoch: int
    control: bool
    records: tuple[Message, ...]


def decode_record_value(value: BytesLike) -> Message:
    """The metadata record framed in a record's value."""
    reader = Reader(value)
    try:
        frame = reader.uvarint()
        record_type = reader.uvarint()
        version = reader.uvarint()
    except ProtocolError as exc:
        raise MetadataRecordError(f"bad metadata record frame: {exc}") from exc
    if frame != FRAME_VERSION:
        raise MetadataRecordError(f"metadata record frame version {frame} (only 1 is known)")
    cls = METADATA_RECORDS.get(record_type)
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record type {record_type}")
    low, high = cls.VALID_VERSIONS
    if not low <= version <= high:
        raise MetadataRecordError(f"{cls.__name__} version {version} is not in {low}-{high}")
    try:
        record, end = cls.decode_at(reader.buf, reader.pos, version)
    except ProtocolError as exc:
        raise MetadataRecordError(f"{cls.__name__} v{version}: {exc}") from exc
    if end != reader.end:
        raise MetadataRecordError(f"{reader.end - end} bytes after {cls.__name__}")
    return record


def encode_record_value(record: Message, version: int) -> bytes:
    """The framed value of `record` at `version`, as the controller writes it."""
    assert record.API_KEY is not None
    writer = Writer()
    for n in (FRAME_VERSION, record.API_KEY, version):
        writer.uvarint(n)
    record.encode_into(writer, version)
    return bytes(writer.buf)


def read_batches(data: BytesLike) -> Iterator[MetadataBatch]:
    """The batches of `data`, whole batches only (a Fetch response holds whole batches)."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    try:
        for pos, header in iter_batches(view):
            batch = view[pos:pos + header.size]
            if header.is_control:
                yield MetadataBatch(header.base_offset, header.last_offset,
                                    header.partition_leader_epoch, True, ())
                continue
            records = []
            for record in iter_records(batch, max_uncompressed_bytes=MAX_BATCH_BYTES):
                if record.value is None:
                    raise MetadataRecordError(f"metadata record at {record.offset} has no value")
                records.append(decode_record_value(record.value))
            yield MetadataBatch(header.base_offset, header.last_offset,
                                header.partition_leader_epoch, False, tuple(records))
    except RecordError as exc:
        raise MetadataRecordError(f"bad metadata batch: {exc}") from exc
