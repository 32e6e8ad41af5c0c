"""Fetched RecordBatch v2 bytes decoded straight into Arrow columns, batch by batch.

The byte layout of a batch and of its records is the one documented in
``ads.records.batch``. Nothing here writes or persists bytes, so there is no recovery rule:
a fetch that is cut short or corrupt raises ``CorruptRecordError`` and the Spark task that
read it fails and is retried from its start offset.

Theory of operation. Python touches each *batch* (header, CRC, decompression, transaction
state); the *records* are decoded by numpy, column-wise over every record of one fetch:

1. Record start positions. A record opens with its length as a zigzag varint. When every
   record of a batch has the same length (the usual case for machine-produced data) the
   starts are an arithmetic progression, checked by reading every length at once; otherwise
   a short loop walks the lengths, the only per-record Python step.
2. Fields. Each varint field (timestamp delta, offset delta, key length, value length,
   header count) is read for all records at once: one numpy pass per varint byte.
3. Keys and values. The fetched buffer is viewed as an Arrow binary array of 2n slices that
   alternate between a record's key (or value) and the bytes up to the next one; ``take`` of
   the even slices copies the keys into a contiguous column in C. Null keys are nulls.

Offsets outside ``[start, end)`` (a batch that straddles the range) are dropped with one
mask. Control batches and, for ``read_committed``, batches of aborted transactions are
skipped whole, as Kafka's consumers do. Headers are the rare case and go through
``ads.records``' record decoder, only for batches that carry any.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ads.records.batch import (
    ATTRIBUTES_OFFSET,
    RECORDS_OFFSET,
    BatchHeader,
    ControlRecordType,
    TimestampType,
    parse_control_record,
    read_batch_header,
)
from ads.records.compression import decompress
from ads.records.crc import crc32c
from ads.records.errors import CorruptRecordError, RecordError
from ads.records.record import decode_record_body, read_varint

__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_WITH_HEADERS",
    "AbortedTransaction",
    "DecodedChunk",
    "decode_fetched",
    "empty_batch",
]

_HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
])
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", _HEADER_TYPE))

_MAX_UNCOMPRESSED = 1 << 30
_VARINT_BYTES = 5
_VARLONG_BYTES = 10
_FIRST_WINDOW = 1024
_SHORT_RUN = 4
_WALK = 32


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """An entry of a Fetch response's aborted transactions (read_committed only)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class DecodedChunk:
    """The Arrow rows of one fetched record set and the offset to fetch next.

    ``next_offset`` is past every complete batch seen, including skipped control and aborted
    batches, so a reader never fetches the same batch twice. ``batch`` is None when no record
    of the range was found (only control records, or a fetch that was all before ``start``).
    """

    batch: pa.RecordBatch | None
    next_offset: int
    bytes_read: int


@dataclass(slots=True)
class _Plan:
    """Batches kept from one record set, before the column-wise pass."""

    bodies: list[tuple[int, int]] = field(default_factory=list)  # (start, end) in data
    headers: list[BatchHeader] = field(default_factory=list)
    decompressed: list[bytes] | None = None


def empty_batch(include_headers: bool) -> pa.RecordBatch:
    schema = ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA
    return pa.RecordBatch.from_pylist([], schema=schema)


def decode_fetched(
    records: memoryview | bytes,
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    aborted: Sequence[AbortedTransaction] | None = None,
    check_crcs: bool = True,
) -> DecodedChunk:
    """Decode the complete batches of a fetched record set into rows with offsets in
    ``[start, end)``. A partial batch at the end (brokers may cut one at the size limit) is
    left for the next fetch. ``aborted`` is given for read_committed fetches."""
    view = memoryview(records).cast("B") if not isinstance(records, bytes) else memoryview(records)
    plan, next_offset = _plan_batches(view, start, end, aborted, check_crcs)
    if not plan.headers:
        return DecodedChunk(None, next_offset, len(view))
    data = view if plan.decompressed is None else memoryview(b"".join(plan.decompressed))
    batch = _columns(data, plan, topic, partition, start, end, include_headers)
    return DecodedChunk(batch if batch.num_rows else None, next_offset, len(view))


def _plan_batches(view: memoryview, start: int, end: int,
                  aborted: Sequence[AbortedTransaction] | None,
                  check_crcs: bool) -> tuple[_Plan, int]:
    plan = _Plan()
    next_offset = start
    pending = sorted(aborted or (), key=lambda a: a.first_offset)
    aborting: set[int] = set()
    bodies: list[bytes | memoryview] = []
    compressed = False
    pos = 0
    limit = len(view)
    while limit - pos >= RECORDS_OFFSET:
        header = read_batch_header(view, pos)
        batch_end = pos + header.size
        if batch_end > limit:
            break
        if header.base_offset >= end:
            break
        next_offset = max(next_offset, header.next_offset)
        body = view[pos + RECORDS_OFFSET:batch_end]
        batch_pos, pos = pos, batch_end
        if header.next_offset <= start or header.records_count == 0:
            continue
        if check_crcs and crc32c(view[batch_pos + ATTRIBUTES_OFFSET:batch_end]) != header.crc:
            raise CorruptRecordError(
                f"CRC mismatch in the batch at offset {header.base_offset}")
        if not _holds_rows(header, body, pending, aborting):
            continue
        if header.compression:
            compressed = True
            bodies.append(decompress(header.compression, body, max_size=_MAX_UNCOMPRESSED))
        else:
            bodies.append(body)
        plan.headers.append(header)
        plan.bodies.append((batch_pos + RECORDS_OFFSET, batch_end))
    if compressed:
        plan.decompressed = [bytes(b) if isinstance(b, memoryview) else b for b in bodies]
        positions = []
        at = 0
        for b in plan.decompressed:
            positions.append((at, at + len(b)))
            at += len(b)
        plan.bodies = positions
    return plan, next_offset


def _holds_rows(header: BatchHeader, body: memoryview, pending: list[AbortedTransaction],
                aborting: set[int]) -> bool:
    """Whether a batch's records are rows: not a control batch, nor one of an aborted
    transaction. Batches come in offset order; ``pending`` holds the aborted transactions
    not started yet (first offset first), ``aborting`` the producers whose aborted
    transaction is open; both move along as batches pass."""
    while pending and pending[0].first_offset <= header.last_offset:
        aborting.add(pending.pop(0).producer_id)
    if header.is_control:
        if header.producer_id in aborting and _is_abort_marker(body, header):
            aborting.discard(header.producer_id)
        return False
    return not (header.is_transactional and header.producer_id in aborting)


def _is_abort_marker(body: memoryview, header: BatchHeader) -> bool:
    try:
        records = decode_record_body(bytes(body), header.records_count, header.base_offset,
                                     header.base_timestamp, None)
        return bool(records) and parse_control_record(
            records[0].key, records[0].value)[0] == ControlRecordType.ABORT
    except RecordError:
        return False


def _record_starts(buf: np.ndarray, data: memoryview, body_start: int, body_end: int,
                   count: int) -> np.ndarray:
    """Start positions of the ``count`` records filling ``data[body_start:body_end]``.

    Records of one batch mostly share one length, changing only where a varint field grows a
    byte (offset delta 64, timestamp delta 64 ms...), so the starts are found run by run: guess
    that the next records have the current record's length and check a window of them at
    once. Where lengths vary record by record the guesses fail fast and a plain walk takes over
    for a stretch.
    """
    parts: list[np.ndarray] = []
    pos = body_start
    found = 0
    window = _FIRST_WINDOW
    walk = _WALK
    while found < count:
        length, width = _varint_at(data, pos, body_end)
        stride = length + width
        if length <= 0 or pos + stride > body_end:
            raise CorruptRecordError(f"record length {length} does not fit the batch")
        k = min(count - found, window, (body_end - pos) // stride)
        if k > 1:
            candidates = np.arange(pos, pos + k * stride, stride, dtype=np.int64)
            lengths, widths = _varints(buf, candidates, _VARINT_BYTES, strict=False)
            bad = np.flatnonzero((lengths + widths != stride) | (widths == 0))
            run = int(bad[0]) if bad.size else k
            parts.append(candidates[:run])
        else:
            run = 1
            parts.append(np.array([pos], dtype=np.int64))
        pos += run * stride
        found += run
        if run == k:
            window *= 2
            walk = _WALK
            continue
        window = _FIRST_WINDOW
        if run < _SHORT_RUN and found < count:
            walked, pos = _walk(data, pos, body_end, min(walk, count - found))
            parts.append(walked)
            found += len(walked)
            walk *= 2
    if pos != body_end:
        raise CorruptRecordError("record lengths do not fill the batch")
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _varint_at(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    """The zigzag varint at ``pos`` (read by ``ads.records.record.read_varint``) and its width."""
    try:
        value, after = read_varint(data, pos)
    except IndexError:
        raise CorruptRecordError("record length runs past the batch") from None
    if after > end:
        raise CorruptRecordError("record length runs past the batch")
    if after - pos > _VARINT_BYTES:
        raise CorruptRecordError("record length varint is too long")
    return value, after - pos


def _walk(data: memoryview, pos: int, end: int, count: int) -> tuple[np.ndarray, int]:
    starts = []
    for _ in range(count):
        starts.append(pos)
        length, width = _varint_at(data, pos, end)
        if length <= 0:
            raise CorruptRecordError(f"record length {length}")
        pos += width + length
        if pos > end:
            raise CorruptRecordError("record runs past the batch")
    return np.array(starts, dtype=np.int64), pos


def _varints(buf: np.ndarray, positions: np.ndarray, max_bytes: int, *, strict: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at ``positions``: (values as int64, encoded widths).

    Not ``strict`` (probing positions that may not hold a varint at all), a varint that is
    too long or runs off the buffer gets width 0 instead of raising.
    """
    last = len(buf) - 1
    invalid = None if strict else np.zeros(len(positions), dtype=bool)
    try:
        b = buf[positions if strict else np.minimum(positions, last)]
        raw = (b & 0x7F).astype(np.uint64)
        widths = np.ones(len(positions), dtype=np.int64)
        more = np.flatnonzero(b & 0x80)
        shift = 7
        while more.size:
            if shift >= 7 * max_bytes:
                if invalid is None:
                    raise CorruptRecordError("varint is too long")
                invalid[more] = True
                break
            at = positions[more] + widths[more]
            if invalid is not None:
                invalid[more[at > last]] = True
                at = np.minimum(at, last)
            b = buf[at]
            raw[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
            widths[more] += 1
            more = more[(b & 0x80) != 0]
            shift += 7
    except IndexError:
        raise CorruptRecordError("record runs past the end of the fetched data") from None
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    if invalid is not None:
        widths[invalid] = 0
    return values, widths


def _slices(data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, keep: np.ndarray
            ) -> pa.Array:
    """A binary column of ``data[starts[i]:starts[i] + lengths[i]]`` (null where the length is
    -1) for the rows in ``keep``, copied contiguously by Arrow."""
    n = len(starts)
    ends = starts + np.maximum(lengths, 0)
    bounds = np.empty(2 * n + 1, dtype=np.int32)
    bounds[0:2 * n:2] = starts
    bounds[1:2 * n:2] = ends
    bounds[2 * n] = ends[-1]
    validity = None
    nulls = lengths < 0
    null_count = int(np.count_nonzero(nulls))
    if null_count:
        valid = np.ones(2 * n, dtype=bool)
        valid[0::2] = ~nulls
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    interleaved = pa.Array.from_buffers(pa.binary(), 2 * n,
                                        [validity, pa.py_buffer(bounds), data],
                                        null_count=null_count)
    return interleaved.take(pa.array(keep * 2))


def _columns(data: memoryview, plan: _Plan, topic: str, partition: int, start: int, end: int,
             include_headers: bool) -> pa.RecordBatch:
    buf = np.frombuffer(data, dtype=np.uint8)
    starts_parts = []
    counts = []
    for (body_start, body_end), header in zip(plan.bodies, plan.headers, strict=True):
        starts_parts.append(_record_starts(buf, data, body_start, body_end,
                                           header.records_count))
        counts.append(header.records_count)
    starts = np.concatenate(starts_parts)
    count_arr = np.array(counts, dtype=np.int64)
    record_lengths, p = _varints(buf, starts, _VARINT_BYTES)
    record_ends = starts + p + record_lengths
    p = starts + p + 1  # record attributes are unused
    ts_delta, w = _varints(buf, p, _VARLONG_BYTES)
    p += w
    offset_delta, w = _varints(buf, p, _VARINT_BYTES)
    p += w
    key_len, w = _varints(buf, p, _VARINT_BYTES)
    key_start = p + w
    p = key_start + np.maximum(key_len, 0)
    value_len, w = _varints(buf, np.minimum(p, len(buf) - 1), _VARINT_BYTES)
    value_start = p + w
    p = value_start + np.maximum(value_len, 0)
    header_count, w = _varints(buf, np.minimum(p, len(buf) - 1), _VARINT_BYTES)
    p += w
    if (bool(np.any(key_len < -1)) or bool(np.any(value_len < -1))
            or bool(np.any(header_count < 0)) or bool(np.any(p > record_ends))
            or bool(np.any((header_count == 0) & (p != record_ends)))):
        raise CorruptRecordError("record fields do not match the record length")

    base_offsets = np.repeat(np.array([h.base_offset for h in plan.headers], dtype=np.int64),
                             count_arr)
    offsets = base_offsets + offset_delta
    keep = np.flatnonzero((offsets >= start) & (offsets < end))
    log_append = np.array([h.timestamp_type == TimestampType.LOG_APPEND_TIME
                           for h in plan.headers], dtype=bool)
    base_ts = np.array([h.max_timestamp if la else h.base_timestamp
                        for h, la in zip(plan.headers, log_append, strict=True)], dtype=np.int64)
    per_record_la = np.repeat(log_append, count_arr)
    timestamps = np.repeat(base_ts, count_arr) + np.where(per_record_la, 0, ts_delta)

    arrow_data = pa.py_buffer(data)
    n = len(keep)
    topic_bytes = topic.encode()
    columns: list[pa.Array] = [
        _slices(arrow_data, key_start, key_len, keep),
        _slices(arrow_data, value_start, value_len, keep),
        pa.Array.from_buffers(pa.string(), n, [
            None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(topic_bytes)),
            pa.py_buffer(topic_bytes * n)]),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets[keep]),
        pa.array(timestamps[keep] * 1000, type=pa.timestamp("us", tz="UTC")),
        pa.array(per_record_la[keep].astype(np.int32)),
    ]
    schema = ARROW_SCHEMA
    if include_headers:
        columns.append(_headers(data, plan, header_count, count_arr, keep))
        schema = ARROW_SCHEMA_WITH_HEADERS
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _headers(data: memoryview, plan: _Plan, header_count: np.ndarray, counts: np.ndarray,
             keep: np.ndarray) -> pa.Array:
    """Spark's Kafka source gives null, not an empty list, for a record without headers."""
    if not bool(np.any(header_count[keep])):
        return pa.nulls(len(keep), type=_HEADER_TYPE)
    rows: list[list[dict[str, object]] | None] = []
    bounds = np.concatenate(([0], np.cumsum(counts)))
    for i, ((body_start, body_end), header) in enumerate(
            zip(plan.bodies, plan.headers, strict=True)):
        if not bool(np.any(header_count[bounds[i]:bounds[i + 1]])):
            rows.extend([None] * int(counts[i]))
            continue
        for record in decode_record_body(bytes(data[body_start:body_end]),
                                         header.records_count, header.base_offset,
                                         header.base_timestamp, None):
            rows.append([{"key": k, "value": v} for k, v in record.headers] or None)
    return pa.array([rows[i] for i in keep], type=_HEADER_TYPE)


def record_set_end(records: memoryview | bytes) -> int | None:
    """Offset after the last complete batch of a record set, read from headers only (so the
    next fetch can be sent before this one is decoded); None if there is no complete batch."""
    view = memoryview(records)
    pos = 0
    last: int | None = None
    while len(view) - pos >= RECORDS_OFFSET:
        header = read_batch_header(view, pos)
        if pos + header.size > len(view):
            break
        last = header.next_offset
        pos += header.size
    return last

