"""The record scanner: keys, offset and timestamp deltas and record bounds of a batch body,
without decoding values; used by the log cleaner and the produce path's record checks
(``ads.records.checks``).

The record layout is ``ads.records.record``'s. The cleaner needs, per record, only its key,
offset delta, whether the value is null (a tombstone) and where the record's bytes start and
end, so it can copy retained records into a new batch byte for byte. Values and headers are
skipped by the record's length prefix: for 1 KB values this is most of the saving over
``decode_record_body``, which copies every value.

Nothing here is stored, so there is no crash rule; malformed bodies raise
``CorruptRecordError`` (a batch whose CRC matched but whose records do not parse).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ads.records import compression
from ads.records.batch import RECORDS_OFFSET, BatchHeader
from ads.records.errors import CorruptRecordError
from ads.records.record import encode_varint, read_varint

__all__ = ["RecordScan", "batch_body", "rebase_timestamps", "scan_records"]

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class RecordScan:
    """Per-record columns of one batch body; record i spans ``ends[i-1]`` (or the body start)
    to ``ends[i]``."""

    start: int
    keys: list[Buffer | None] = field(default_factory=list)  # slices of the body
    offset_deltas: list[int] = field(default_factory=list)
    timestamp_deltas: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    tombstones: list[bool] = field(default_factory=list)


def batch_body(
    buf: Buffer, pos: int, header: BatchHeader, max_uncompressed_bytes: int
) -> tuple[Buffer, int, int]:
    """``(body, start, end)``: where the batch's records lie, decompressing if needed."""
    start, end = pos + RECORDS_OFFSET, pos + header.size
    if header.compression:
        with memoryview(buf) as view:
            body = compression.decompress(
                header.compression, view[start:end], max_size=max_uncompressed_bytes
            )
        return body, 0, len(body)
    return buf, start, end


def scan_records(  # noqa: C901, PLR0912, PLR0915 - hot loop: varints inline, no call per field
        body: Buffer, start: int, end: int, count: int) -> RecordScan:
    """Scan ``count`` records filling ``body[start:end]``."""
    scan = RecordScan(start)
    add_key, add_delta = scan.keys.append, scan.offset_deltas.append
    add_stamp, add_end = scan.timestamp_deltas.append, scan.ends.append
    add_tombstone = scan.tombstones.append
    pos = start
    try:
        for _ in range(count):
            # One-byte varints are the common case for every field; the record length of
            # records up to 8 KB takes two.
            b = body[pos]
            if b < 0x80:  # noqa: PLR2004
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif body[pos + 1] < 0x80:  # noqa: PLR2004
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, pos = read_varint(body, pos)
            record_end = pos + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(f"record length {length} does not fit the batch")
            b = body[pos + 1]  # after the attributes
            if b < 0x80:  # noqa: PLR2004
                stamp, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                stamp, pos = read_varint(body, pos + 1)
            b = body[pos]
            if b < 0x80:  # noqa: PLR2004
                delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                delta, pos = read_varint(body, pos)
            b = body[pos]
            if b < 0x80:  # noqa: PLR2004
                key_length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                key_length, pos = read_varint(body, pos)
            if key_length >= 0:
                key_end = pos + key_length
                if key_end >= record_end:
                    raise CorruptRecordError("key runs past the end of its record")
                add_key(body[pos:key_end])
                pos = key_end
            elif key_length == -1:
                if pos >= record_end:
                    raise CorruptRecordError("record ends before its value")
                add_key(None)
            else:
                raise CorruptRecordError(f"negative key length {key_length}")
            add_tombstone(body[pos] == 1)  # zigzag(-1): a null value
            add_delta(delta)
            add_stamp(stamp)
            add_end(record_end)
            pos = record_end
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record")
    return scan


def rebase_timestamps(
    body: Buffer, scan: RecordScan, indexes: list[int], shift: int, out: bytearray
) -> None:
    """Append records ``indexes`` of ``scan`` to ``out`` with timestamp deltas lowered by
    ``shift`` (the batch's base timestamp moved up by ``shift``: the delete horizon)."""
    for i in indexes:
        pos = scan.ends[i - 1] if i else scan.start
        end = scan.ends[i]
        _, pos = read_varint(body, pos)
        stamp, after = read_varint(body, pos + 1)
        rest = bytearray(b"\x00")
        rest += encode_varint(stamp - shift)
        rest += body[after:end]
        out += encode_varint(len(rest))
        out += rest
