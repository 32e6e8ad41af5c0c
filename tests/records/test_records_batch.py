"""RecordBatch v2: header parsing, validation, patching, building and decoding."""

from __future__ import annotations

import struct

import pytest

from ads.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    RECORDS_COUNT_OFFSET,
    BatchHeader,
    ControlRecordType,
    Record,
    RecordSpec,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batch_headers,
    iter_batches,
    parse_control_record,
    patch_base_offset,
    read_batch_header,
    scan_valid_prefix,
    set_log_append_time,
    validate_batches,
)
from ads.records.compression import CompressionType
from ads.records.crc import crc32c
from ads.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)

MAX = 1 << 20
CODECS = list(CompressionType)


def _records(n: int = 3) -> list[RecordSpec]:
    return [
        RecordSpec(f"k{i}".encode(), f"value-{i}".encode() * 10, [("h", b"x")], 1000 + i)
        for i in range(n)
    ]


def _reseal(buf: bytearray) -> None:
    """Recompute the CRC after a test tampers with covered fields."""
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))


def test_records_batch_layout_constants() -> None:
    assert (BATCH_OVERHEAD, LOG_OVERHEAD, MAGIC, MAGIC_OFFSET) == (61, 12, 2, 16)


@pytest.mark.parametrize("codec", CODECS)
def test_records_batch_round_trip_every_codec(codec: CompressionType) -> None:
    batch = build_batch(_records(), base_offset=40, compression=codec)
    [(pos, header)] = validate_batches(memoryview(batch), max_batch_bytes=MAX)
    assert pos == 0
    assert header.compression == codec
    assert header.size == len(batch)
    assert (header.base_offset, header.last_offset, header.next_offset) == (40, 42, 43)
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1002)
    assert decode_records(batch, max_uncompressed_bytes=MAX) == [
        Record(40 + i, 1000 + i, f"k{i}".encode(), f"value-{i}".encode() * 10, (("h", b"x"),))
        for i in range(3)
    ]


def test_records_batch_null_key_value_and_header_value() -> None:
    batch = build_batch(
        [(None, None), (b"", b""), (None, b"v", [("a", None), ("b", b"")])], timestamp=5
    )
    records = decode_records(batch, max_uncompressed_bytes=MAX)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (None, None, ()),
        (b"", b"", ()),
        (None, b"v", (("a", None), ("b", b""))),
    ]


def test_records_batch_header_properties() -> None:
    batch = build_batch(
        [(b"k", b"v")] * 4,
        base_offset=7,
        timestamp=9,
        producer_id=11,
        producer_epoch=3,
        base_sequence=100,
        is_transactional=True,
        partition_leader_epoch=6,
    )
    header = read_batch_header(batch)
    assert header.magic == MAGIC
    assert header.partition_leader_epoch == 6
    assert header.records_count == 4
    assert header.is_transactional and not header.is_control
    assert header.has_producer_id and header.producer_epoch == 3
    assert header.last_sequence == 103
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert not header.has_delete_horizon and header.delete_horizon_ms is None


def test_records_batch_last_sequence_wraps_like_kafka() -> None:
    fields = dict.fromkeys(BatchHeader._fields, 0)
    header = BatchHeader(**{**fields, "base_sequence": 0x7FFFFFFE, "last_offset_delta": 3})
    assert header.last_sequence == 1
    assert BatchHeader(**{**fields, "base_sequence": -1}).last_sequence == -1
    assert not BatchHeader(**{**fields, "producer_id": -1}).has_producer_id


@pytest.mark.parametrize("magic", [0, 1])
def test_records_batch_rejects_old_magic(magic: int) -> None:
    batch = bytearray(build_batch([(b"k", b"v")], timestamp=1))
    batch[MAGIC_OFFSET] = magic
    with pytest.raises(UnsupportedMagicError):
        read_batch_header(batch)
    with pytest.raises(UnsupportedMagicError):
        validate_batches(batch, max_batch_bytes=MAX)
    # A v0 message is shorter than a v2 header; the magic byte still decides the error.
    with pytest.raises(UnsupportedMagicError):
        read_batch_header(bytes(batch[:30]))


def test_records_batch_rejects_unknown_magic_as_corrupt() -> None:
    batch = bytearray(build_batch([(b"k", b"v")], timestamp=1))
    batch[MAGIC_OFFSET] = 7
    with pytest.raises(CorruptRecordError):
        read_batch_header(batch)


def test_records_batch_short_header_and_length() -> None:
    batch = bytearray(build_batch([(b"k", b"v")], timestamp=1))
    with pytest.raises(CorruptRecordError):
        read_batch_header(batch[:BATCH_OVERHEAD - 1])
    with pytest.raises(CorruptRecordError):
        read_batch_header(batch[:10])
    struct.pack_into(">i", batch, 8, 48)
    with pytest.raises(CorruptRecordError):
        read_batch_header(batch)


def test_records_batch_crc_corruption_detected() -> None:
    batch = bytearray(build_batch([(b"k", b"value")], timestamp=1))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(batch, max_batch_bytes=MAX)
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_records(batch, max_uncompressed_bytes=MAX)
    assert scan_valid_prefix(batch) == (0, [])


@pytest.mark.parametrize("cut", [1, 10, 60, 70])
def test_records_batch_truncated(cut: int) -> None:
    one = build_batch([(b"k", b"v" * 50)], timestamp=1)
    data = one + one[: len(one) - cut] if cut < len(one) else one
    with pytest.raises(CorruptRecordError):
        validate_batches(memoryview(data), max_batch_bytes=MAX)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data))
    assert scan_valid_prefix(data)[0] == len(one)
    with pytest.raises(CorruptRecordError):
        decode_records(one[:-cut], max_uncompressed_bytes=MAX)


def test_records_batch_validate_several_batches() -> None:
    batches = [build_batch([(b"k", b"v")] * n, timestamp=1) for n in (1, 2, 3)]
    data = b"".join(batches)
    found = validate_batches(memoryview(data), max_batch_bytes=MAX)
    assert [pos for pos, _ in found] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [h.records_count for _, h in found] == [1, 2, 3]
    assert [h.records_count for h in iter_batch_headers(data)] == [1, 2, 3]
    assert list(iter_batches(data)) == found
    assert scan_valid_prefix(data) == (len(data), found)
    assert [h.records_count for h in iter_batch_headers(data, len(batches[0]))] == [2, 3]
    assert list(iter_batches(data, 0, len(batches[0]))) == found[:1]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data, 0, len(batches[0]) + 5))


def test_records_batch_validate_empty_records_field() -> None:
    with pytest.raises(InvalidRecordError):
        validate_batches(b"", max_batch_bytes=MAX)


def test_records_batch_validate_too_large() -> None:
    batch = build_batch([(b"k", b"v" * 1000)], timestamp=1)
    validate_batches(batch, max_batch_bytes=len(batch))
    with pytest.raises(RecordTooLargeError):
        validate_batches(batch, max_batch_bytes=len(batch) - 1)


def test_records_batch_validate_unknown_codec() -> None:
    batch = bytearray(build_batch([(b"k", b"v")], timestamp=1))
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, 5)
    _reseal(batch)
    with pytest.raises(UnsupportedCompressionError):
        validate_batches(batch, max_batch_bytes=MAX)
    with pytest.raises(UnsupportedCompressionError):
        build_batch([(b"k", b"v")], compression=6)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("count", 0),
        ("count", 2),
        ("count", -1),
        ("max_timestamp", 500),
        ("max_timestamp", -5),
        ("base_sequence", -1),
    ],
)
def test_records_batch_validate_invalid_content(field: str, value: int) -> None:
    batch = bytearray(
        build_batch(
            [(b"k", b"v")], timestamp=1000, producer_id=1, producer_epoch=0, base_sequence=0
        )
    )
    offsets = {"count": RECORDS_COUNT_OFFSET, "max_timestamp": 35, "base_sequence": 53}
    fmt = ">q" if field == "max_timestamp" else ">i"
    struct.pack_into(fmt, batch, offsets[field], value)
    _reseal(batch)
    with pytest.raises(InvalidRecordError):
        validate_batches(batch, max_batch_bytes=MAX)


def test_records_batch_validate_accepts_missing_timestamps() -> None:
    batch = bytearray(build_batch([(b"k", b"v")], timestamp=1000))
    struct.pack_into(">q", batch, 35, -1)
    _reseal(batch)
    validate_batches(batch, max_batch_bytes=MAX)


def test_records_batch_patch_base_offset_keeps_crc() -> None:
    data = bytearray(build_batch([(b"a", b"1")], timestamp=1) * 2)
    second = len(data) // 2
    patch_base_offset(data, second, 1234, 9)
    patch_base_offset(memoryview(data), 0, 1233, 9)
    found = validate_batches(data, max_batch_bytes=MAX)
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in found] == [(1233, 9), (1234, 9)]
    assert decode_records(data[second:], max_uncompressed_bytes=MAX)[0].offset == 1234


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_records_batch_set_log_append_time(codec: CompressionType) -> None:
    data = bytearray(build_batch([(b"a", b"1"), (b"b", b"2")], timestamp=5, compression=codec))
    set_log_append_time(data, 0, 99_000)
    [(_, header)] = validate_batches(data, max_batch_bytes=MAX)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert (header.base_timestamp, header.max_timestamp) == (5, 99_000)
    assert header.compression == codec
    records = decode_records(data, max_uncompressed_bytes=MAX)
    assert [r.timestamp for r in records] == [99_000, 99_000]
    before = bytes(data)
    set_log_append_time(memoryview(data), 0, 99_000)
    assert bytes(data) == before


def test_records_batch_build_log_append_time_type() -> None:
    batch = build_batch(
        [(b"a", b"1")], timestamp=77, timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    assert read_batch_header(batch).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert decode_records(batch, max_uncompressed_bytes=MAX)[0].timestamp == 77


def test_records_batch_build_per_record_timestamps() -> None:
    batch = build_batch(
        [(b"a", b"1"), RecordSpec(b"b", b"2", timestamp=50), (b"c", b"3")],
        timestamps=[30, 0, 10],
    )
    header = read_batch_header(batch)
    assert (header.base_timestamp, header.max_timestamp) == (30, 50)
    records = decode_records(batch, max_uncompressed_bytes=MAX)
    assert [r.timestamp for r in records] == [30, 50, 10]
    with pytest.raises(ValueError, match="length"):
        build_batch([(b"a", b"1")], timestamps=[1, 2])


def test_records_batch_build_sparse_offsets_for_cleaner() -> None:
    batch = build_batch(
        [RecordSpec(b"a", b"1", offset=101), RecordSpec(b"c", b"3", offset=104)],
        base_offset=100,
        timestamp=1,
        last_offset_delta=5,
        delete_horizon_ms=8_000,
    )
    header = read_batch_header(batch)
    assert (header.records_count, header.last_offset, header.delete_horizon_ms) == (2, 105, 8_000)
    records = decode_records(batch, max_uncompressed_bytes=MAX)
    assert [(r.offset, r.timestamp) for r in records] == [(101, 1), (104, 1)]
    empty = read_batch_header(build_batch([], base_offset=10, last_offset_delta=2, timestamp=3))
    assert (empty.records_count, empty.next_offset) == (0, 13)
    with pytest.raises(ValueError, match="increase"):
        build_batch([RecordSpec(offset=3), RecordSpec(offset=3)])


def test_records_batch_decode_rejects_garbage_body() -> None:
    batch = bytearray(build_batch([(b"key", b"value")], timestamp=1))
    batch[BATCH_OVERHEAD] = 0x7E  # record length far beyond the batch
    _reseal(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch, max_uncompressed_bytes=MAX)
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, 2)
    batch[BATCH_OVERHEAD] = 0x16
    _reseal(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch, max_uncompressed_bytes=MAX)


def test_records_batch_decode_bounded_body() -> None:
    batch = build_batch([(b"k", b"\0" * 100_000)], timestamp=1, compression=CompressionType.GZIP)
    with pytest.raises(CorruptRecordError):
        decode_records(batch, max_uncompressed_bytes=10_000)


@pytest.mark.parametrize("kind", list(ControlRecordType))
def test_records_batch_control_batch(kind: ControlRecordType) -> None:
    batch = build_control_batch(kind, 42, 7, 3, base_offset=500, timestamp=1)
    header = read_batch_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (42, 7, 500)
    [record] = decode_records(batch, max_uncompressed_bytes=MAX)
    assert record.offset == 500
    assert parse_control_record(record.key, record.value) == (kind, 3)


def test_records_batch_parse_control_record_errors() -> None:
    with pytest.raises(InvalidRecordError):
        parse_control_record(b"\x00", b"")
    with pytest.raises(InvalidRecordError):
        parse_control_record(None, None)
    with pytest.raises(InvalidRecordError):
        parse_control_record(b"\x00\x00\x00\x01", b"\x00")
    assert parse_control_record(b"\x00\x00\x00\x02", None) == (2, -1)
