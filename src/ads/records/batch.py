"""RecordBatch v2 (magic 2): header parsing, validation, in-place patching, building, decoding.

Byte layout of one batch (big-endian; offsets from the batch start)::

     0  baseOffset            int64    offset of the first record
     8  batchLength           int32    bytes after this field (batch size - 12)
    12  partitionLeaderEpoch  int32
    16  magic                 int8     2
    17  crc                   uint32   CRC32C of bytes [21, end of batch)
    21  attributes            int16
    23  lastOffsetDelta       int32    last record offset - baseOffset
    27  baseTimestamp         int64    first record timestamp, or the delete horizon (bit 6)
    35  maxTimestamp          int64    largest record timestamp, or the LogAppendTime
    43  producerId            int64    -1 if none
    51  producerEpoch         int16    -1 if none
    53  baseSequence          int32    -1 if none
    57  recordsCount          int32
    61  records               recordsCount records, compressed as one block when the codec
                              bits are non-zero

Each record (varints zigzag-encoded; details and decoder in ``ads.records.record``)::

    length varint | attributes int8 (0) | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headersCount varint | headers: (keyLength varint | key UTF-8 | valueLength varint | value)*

A record's offset is baseOffset + offsetDelta; its timestamp baseTimestamp + timestampDelta,
or maxTimestamp for every record when the batch is LogAppendTime.

Attributes bits::

    0-2  compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
    3    timestamp type: 0 CreateTime, 1 LogAppendTime
    4    transactional
    5    control batch (holds control records such as transaction markers)
    6    baseTimestamp holds the delete horizon set by the log cleaner
    7-15 unused, 0

Magic 0 and 1 messages put their magic byte at the same offset 16 (after offset, size and a
4-byte CRC), which is how they are told apart before anything else is read.

The CRC covers attributes to the end of the batch, so baseOffset and partitionLeaderEpoch can
be rewritten in place (``patch_base_offset``) without recomputing it; anything else that
changes (``set_log_append_time``) recomputes it.

Crash recovery: a batch is durable only when all ``batchLength + 12`` bytes are present and
its CRC matches. ``scan_valid_prefix`` returns the end of the last such batch; a log is
truncated there after an unclean shutdown.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from ads.records import compression as _compression
from ads.records.crc import crc32c
from ads.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from ads.records.record import Header, Record, encode_record, iter_record_body

__all__ = [
    "BATCH_OVERHEAD", "LOG_OVERHEAD", "MAGIC", "NO_PARTITION_LEADER_EPOCH", "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID", "NO_SEQUENCE", "NO_TIMESTAMP", "BatchHeader", "ControlRecordType",
    "Record", "RecordSpec", "TimestampType", "build_batch", "build_control_batch",
    "control_record_type", "decode_records", "iter_batch_headers", "iter_batches",
    "iter_records", "parse_control_record",
    "patch_base_offset", "read_batch_header", "scan_valid_prefix", "set_log_append_time",
    "validate_batches",
]

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

LOG_OVERHEAD = 12
BATCH_OVERHEAD = RECORDS_OFFSET
MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD
MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

_INT32_MAX = 0x7FFFFFFF
_MAX_CODEC = 4

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")

Buffer = bytes | bytearray | memoryview


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    """Type field of a control record key; ABORT and COMMIT are transaction markers."""

    ABORT = 0
    COMMIT = 1


class BatchHeader(NamedTuple):
    """The 61-byte header of a RecordBatch v2, as read from the wire or a segment.

    A named tuple rather than a frozen dataclass: one is built for every batch produced or
    fetched, and a tuple is built five times faster (0.25 against 1.3 µs here).
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones and markers, if it set one."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from int32 max to 0 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        if self.base_sequence > _INT32_MAX - self.last_offset_delta:
            return self.last_offset_delta - (_INT32_MAX - self.base_sequence) - 1
        return self.base_sequence + self.last_offset_delta


def read_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header of the batch starting at ``pos``; the body need not be present.

    Raises ``UnsupportedMagicError`` for magic 0/1 messages, ``CorruptRecordError`` for any
    other magic, a header cut short, or a batchLength too small to hold the header.
    """
    available = len(buf) - pos
    if available <= MAGIC_OFFSET:
        raise CorruptRecordError(f"{available} bytes cannot hold a batch header")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC:
        if magic in (0, 1):
            raise UnsupportedMagicError(f"message format v{magic} is not supported")
        raise CorruptRecordError(f"invalid magic {magic}")
    if available < BATCH_OVERHEAD:
        raise CorruptRecordError(f"{available} bytes cannot hold a batch header")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} is below the minimum")
    return header


def iter_batches(
    buf: Buffer, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each batch in ``buf[pos:end]``, checking only sizes.

    Stops cleanly at ``end``; raises ``CorruptRecordError`` if the last batch is partial.
    """
    stop = len(buf) if end is None else end
    # No memoryview is held across yields: an mmap with exported views cannot be closed.
    while pos < stop:
        header = read_batch_header(buf, pos)
        if pos + header.size > stop:
            raise CorruptRecordError(
                f"batch at {pos} needs {header.size} bytes, {stop - pos} remain"
            )
        yield pos, header
        pos += header.size


def iter_batch_headers(
    buf: Buffer, pos: int = 0, end: int | None = None
) -> Iterator[BatchHeader]:
    """Like ``iter_batches`` without the positions."""
    for _, header in iter_batches(buf, pos, end):
        yield header


def _crc_matches(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    with memoryview(buf) as view:
        return crc32c(view[pos + ATTRIBUTES_OFFSET : pos + header.size]) == header.crc


def scan_valid_prefix(buf: Buffer, pos: int = 0) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """Walk batches from ``pos`` while each is complete, magic 2 and CRC-valid; never raises.

    Returns the position just past the last valid batch and the valid batches found. Used by
    log recovery, which truncates everything after the returned position.
    """
    found: list[tuple[int, BatchHeader]] = []
    stop = len(buf)
    while pos < stop:
        try:
            header = read_batch_header(buf, pos)
        except CorruptRecordError:
            break
        except UnsupportedMagicError:
            break
        if pos + header.size > stop or not _crc_matches(buf, pos, header):
            break
        found.append((pos, header))
        pos += header.size
    return pos, found


def validate_batches(buf: Buffer, *, max_batch_bytes: int) -> list[tuple[int, BatchHeader]]:
    """Check a produce request's records field and return ``(position, header)`` per batch.

    Per batch, reading only the header and computing one CRC: complete, magic 2, size within
    ``max_batch_bytes`` (``max.message.bytes``), CRC, known codec, at least one record and a
    record count that agrees with lastOffsetDelta, sane timestamps, and a sequence number
    whenever a producer id is set. Raises the matching ``RecordError`` subclass.
    """
    total = len(buf)
    if total == 0:
        raise InvalidRecordError("produce request carries no record batch")
    found: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < total:
        header = read_batch_header(buf, pos)
        size = header.size
        if size > max_batch_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {max_batch_bytes}"
            )
        if pos + size > total:
            raise CorruptRecordError(f"batch at {pos} needs {size} bytes, {total - pos} remain")
        if not _crc_matches(buf, pos, header):
            raise CorruptRecordError(f"CRC mismatch in batch at {pos}")
        if header.compression > _MAX_CODEC:
            raise UnsupportedCompressionError(f"unknown compression codec {header.compression}")
        _check_header_content(header)
        found.append((pos, header))
        pos += size
    return found


def _check_header_content(header: BatchHeader) -> None:
    count = header.records_count
    if count < 1:
        raise InvalidRecordError(f"invalid record count {count}")
    if header.last_offset_delta + 1 != count:
        raise InvalidRecordError(
            f"lastOffsetDelta {header.last_offset_delta} disagrees with record count {count}"
        )
    base_ts, max_ts = header.base_timestamp, header.max_timestamp
    if base_ts < NO_TIMESTAMP or max_ts < NO_TIMESTAMP:
        raise InvalidRecordError(f"negative timestamp (base {base_ts}, max {max_ts})")
    # -1 on either side means "no timestamp"; some clients write it for one field only.
    if base_ts != NO_TIMESTAMP and max_ts != NO_TIMESTAMP and max_ts < base_ts:
        raise InvalidRecordError(f"maxTimestamp {max_ts} is below baseTimestamp {base_ts}")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence {header.base_sequence} for producer id {header.producer_id}"
        )


def patch_base_offset(
    buf: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int
) -> None:
    """Rewrite baseOffset and partitionLeaderEpoch in place; the CRC does not cover them."""
    _BASE_OFFSET.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)
    _LEADER_EPOCH.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch at ``pos`` LogAppendTime with ``timestamp_ms``, recomputing its CRC.

    Like Kafka, only maxTimestamp and the timestamp type change; readers give every record of
    such a batch the maxTimestamp and ignore the per-record deltas.
    """
    header = read_batch_header(buf, pos)
    if len(buf) - pos < header.size:
        raise CorruptRecordError(f"batch at {pos} is incomplete")
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    if attributes == header.attributes and header.max_timestamp == timestamp_ms:
        return
    _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _MAX_TIMESTAMP.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    with memoryview(buf) as view:
        crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + header.size])
    _CRC.pack_into(buf, pos + CRC_OFFSET, crc)


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """A record to put in a batch. ``timestamp`` and ``offset`` default to the batch's."""

    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[Header] = ()
    timestamp: int | None = None
    offset: int | None = None


RecordInput = (
    RecordSpec
    | tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[Header]]
)


def _as_spec(record: RecordInput) -> RecordSpec:
    if isinstance(record, RecordSpec):
        return record
    key, value, *rest = record
    return RecordSpec(key, value, rest[0] if rest else ())


def build_batch(  # noqa: PLR0913 - by keyword, the RecordBatch v2 fields a caller may set
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    timestamp: int | None = None,
    timestamps: Sequence[int] | None = None,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode records as one RecordBatch v2 with a valid CRC.

    ``records`` holds ``RecordSpec`` values or ``(key, value)`` / ``(key, value, headers)``
    tuples. A record's timestamp is, in order of precedence, its ``RecordSpec.timestamp``,
    ``timestamps[i]``, ``timestamp``, or the wall clock. A record's offset is its
    ``RecordSpec.offset`` (the log cleaner keeps original offsets) or ``base_offset + i``.
    ``last_offset_delta`` overrides the default (the last record's delta) so the cleaner can
    keep a batch's offset range when it drops trailing records or all of them.
    ``delete_horizon_ms`` sets attribute bit 6 and stores the horizon as baseTimestamp.
    """
    if not 0 <= compression <= _MAX_CODEC:
        raise UnsupportedCompressionError(f"unknown compression codec {compression}")
    if timestamps is not None and len(timestamps) != len(records):
        raise ValueError("timestamps and records differ in length")
    default_ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
    specs = [_as_spec(r) for r in records]
    stamps = [
        spec.timestamp
        if spec.timestamp is not None
        else (timestamps[i] if timestamps is not None else default_ts)
        for i, spec in enumerate(specs)
    ]
    base_timestamp, max_timestamp = _batch_timestamps(stamps, timestamp, delete_horizon_ms)

    body = bytearray()
    delta = -1
    for i, spec in enumerate(specs):
        next_delta = i if spec.offset is None else spec.offset - base_offset
        if next_delta <= delta:
            raise ValueError("record offsets must increase")
        delta = next_delta
        encode_record(body, delta, stamps[i] - base_timestamp, spec.key, spec.value, spec.headers)
    if last_offset_delta is None:
        last_offset_delta = max(delta, 0)
    elif last_offset_delta < delta:
        raise ValueError("last_offset_delta is below the last record's offset delta")

    attributes = _attributes(compression, timestamp_type, is_transactional, is_control,
                             delete_horizon_ms is not None)
    payload = _compression.compress(compression, body) if compression else body

    out = bytearray(BATCH_OVERHEAD)
    out += payload
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(specs),
    )
    _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _batch_timestamps(stamps: Sequence[int], timestamp: int | None,
                      delete_horizon_ms: int | None) -> tuple[int, int]:
    """``(baseTimestamp, maxTimestamp)`` of a batch whose records have ``stamps``."""
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    elif stamps:
        base_timestamp = stamps[0]
    else:
        base_timestamp = timestamp if timestamp is not None else NO_TIMESTAMP
    max_timestamp = max(stamps) if stamps else base_timestamp
    if delete_horizon_ms is not None and not stamps:
        max_timestamp = NO_TIMESTAMP
    return base_timestamp, max_timestamp


def _attributes(compression: int, timestamp_type: TimestampType, is_transactional: bool,
                is_control: bool, has_delete_horizon: bool) -> int:
    attributes = compression
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return attributes


def decode_records(
    batch: Buffer, *, max_uncompressed_bytes: int, check_crc: bool = True
) -> list[Record]:
    """Decode the records of the batch at the start of ``batch`` (decompressing as needed).

    Offsets and timestamps are absolute. Raises ``CorruptRecordError`` on a truncated or
    malformed batch, a CRC mismatch (unless ``check_crc`` is false), or a body that would
    decompress to more than ``max_uncompressed_bytes``.
    """
    return list(iter_records(batch, max_uncompressed_bytes=max_uncompressed_bytes,
                             check_crc=check_crc))


def iter_records(
    batch: Buffer, *, max_uncompressed_bytes: int, check_crc: bool = True
) -> Iterator[Record]:
    """``decode_records`` one record at a time, for readers that stop at the one they want."""
    header = read_batch_header(batch, 0)
    if header.size > len(batch):
        raise CorruptRecordError(f"batch needs {header.size} bytes, {len(batch)} present")
    if check_crc and not _crc_matches(batch, 0, header):
        raise CorruptRecordError("CRC mismatch")
    if header.compression > _MAX_CODEC:
        raise UnsupportedCompressionError(f"unknown compression codec {header.compression}")
    if header.records_count < 0:
        raise CorruptRecordError(f"negative record count {header.records_count}")
    with memoryview(batch) as view:
        payload = view[RECORDS_OFFSET : header.size]
        if header.compression:
            body = _compression.decompress(
                header.compression, payload, max_size=max_uncompressed_bytes
            )
        else:
            body = bytes(payload)
    log_append_time = (
        header.max_timestamp
        if header.timestamp_type == TimestampType.LOG_APPEND_TIME
        else None
    )
    return iter_record_body(
        body, header.records_count, header.base_offset, header.base_timestamp, log_append_time
    )


def build_control_batch(
    kind: ControlRecordType,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    *,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Build a transaction marker: a transactional control batch holding one control record.

    Key: version int16 (0), type int16 (0 abort, 1 commit).
    Value: version int16 (0), coordinator epoch int32.
    """
    key = _CONTROL_KEY.pack(0, int(kind))
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [RecordSpec(key, value)],
        base_offset=base_offset,
        timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def control_record_type(key: bytes | bytearray | memoryview | None) -> int:
    """The type of a control record from its key: a ``ControlRecordType`` when known, else
    the raw int (Kafka ignores control records it does not know)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError("control record key is missing or too short")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    return ControlRecordType(kind) if kind in (0, 1) else int(kind)


def parse_control_record(key: bytes | None, value: bytes | None) -> tuple[int, int]:
    """Return ``(type, coordinator_epoch)`` of a control record.

    The type is a ``ControlRecordType`` when known, else the raw int (Kafka ignores control
    records it does not know). The coordinator epoch is -1 for non-marker types.
    """
    kind = control_record_type(key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return kind, -1
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise InvalidRecordError("transaction marker value is missing or too short")
    value_version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if value_version < 0:
        raise InvalidRecordError(f"invalid transaction marker version {value_version}")
    return ControlRecordType(kind), coordinator_epoch
