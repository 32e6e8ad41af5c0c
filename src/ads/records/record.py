"""Records inside a RecordBatch v2 body: varints and the per-record layout.

Byte layout of one record (all varints are zigzag-encoded, as in protobuf)::

    length            varint    bytes that follow, up to the end of the headers
    attributes        int8      unused, always 0
    timestampDelta    varlong   record timestamp - batch baseTimestamp
    offsetDelta       varint    record offset - batch baseOffset
    keyLength         varint    -1 for a null key
    key               bytes
    valueLength       varint    -1 for a null value
    value             bytes
    headersCount      varint
    headers           headersCount times:
        headerKeyLength   varint
        headerKey         UTF-8 bytes
        headerValueLength varint    -1 for a null value
        headerValue       bytes

Records only ever exist inside a batch whose CRC covers them, so there is no crash-recovery
rule at this level: a torn or corrupted record is caught by the batch CRC before anyone decodes
it. Decoding still checks every length against the bytes present and raises
``CorruptRecordError`` rather than returning a partial record.

This is the one place that loops over records in Python. The produce and fetch paths never
call it; it serves compaction, control records, internal topics and tests.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ads.records.errors import CorruptRecordError

__all__ = [
    "Header",
    "Record",
    "decode_record_body",
    "encode_record",
    "encode_varint",
    "iter_record_body",
    "read_varint",
]

Header = tuple[str, bytes | None]

_VARINT_MAX_SHIFT = 63  # a varlong takes at most 10 bytes


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit integer as a varint."""
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _encode_bytes(out: bytearray, data: bytes | bytearray | memoryview | None) -> None:
    if data is None:
        out += b"\x01"  # zigzag(-1)
    else:
        out += encode_varint(len(data))
        out += data


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    headers: Sequence[Header] = (),
) -> None:
    """Append one encoded record to ``out``."""
    body = bytearray(b"\x00")
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    _encode_bytes(body, key)
    _encode_bytes(body, value)
    body += encode_varint(len(headers))
    for header_key, header_value in headers:
        _encode_bytes(body, header_key.encode())
        _encode_bytes(body, header_value)
    out += encode_varint(len(body))
    out += body


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """The zigzag varint (or varlong) at ``pos`` and the position after it; ``IndexError``
    past the buffer's end, ``CorruptRecordError`` past 10 bytes."""
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > _VARINT_MAX_SHIFT:
            raise CorruptRecordError("varint longer than 10 bytes")


def _read_nullable(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"negative length {length}")
        return None, pos
    stop = pos + length
    if stop > end:
        raise CorruptRecordError("field runs past the end of its record")
    return buf[pos:stop], stop


def decode_record_body(
    buf: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> list[Record]:
    """Decode exactly ``count`` records filling all of ``buf``.

    ``log_append_time``, when given, replaces every record's timestamp, as Kafka readers do
    for batches whose timestamp type is LogAppendTime.
    """
    return list(iter_record_body(buf, count, base_offset, base_timestamp, log_append_time))


def iter_record_body(
    buf: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> Iterator[Record]:
    """``decode_record_body`` one record at a time, for a reader that may stop early: a
    batch of millions of tiny records (a few kilobytes compressed) then costs one record's
    memory, not millions of objects. The errors are raised when the reader reaches them."""
    pos = 0
    limit = len(buf)
    try:
        for _ in range(count):
            length, pos = read_varint(buf, pos)
            end = pos + length
            if length <= 0 or end > limit:
                raise CorruptRecordError(f"record length {length} does not fit the batch")
            pos += 1  # record attributes are unused
            timestamp_delta, pos = read_varint(buf, pos)
            offset_delta, pos = read_varint(buf, pos)
            key, pos = _read_nullable(buf, pos, end)
            value, pos = _read_nullable(buf, pos, end)
            header_count, pos = read_varint(buf, pos)
            if header_count < 0 or header_count > end - pos:
                raise CorruptRecordError(f"invalid header count {header_count}")
            headers: list[Header] = []
            for _ in range(header_count):
                raw_key, pos = _read_nullable(buf, pos, end)
                if raw_key is None:
                    raise CorruptRecordError("null header key")
                header_value, pos = _read_nullable(buf, pos, end)
                headers.append((raw_key.decode(), header_value))
            if pos != end:
                raise CorruptRecordError("record length does not match its fields")
            timestamp = (
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time
            )
            yield Record(base_offset + offset_delta, timestamp, key, value, tuple(headers))
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    except UnicodeDecodeError:
        raise CorruptRecordError("header key is not UTF-8") from None
    if pos != limit:
        raise CorruptRecordError(f"{limit - pos} bytes after the last record")
