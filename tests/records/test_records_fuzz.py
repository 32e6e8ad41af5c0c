"""Fuzzing the record-batch parser and its checks: hostile batches (header fields, record
bodies inside every codec, counts that lie) raise only `RecordError`, and never cost work or
memory in proportion to a count the bytes do not back.

Mutations land on the header, on the batch bytes with the CRC recomputed (so they get past
the CRC check), and inside the decompressed body (recompressed with the batch's codec), so
the record parser behind every codec sees them. `tools/fuzz.sh` runs more examples.
"""

from __future__ import annotations

import struct
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from ads.records import batch as rb
from ads.records.checks import RecordRules, bad_records
from ads.records.compression import CompressionType, compress, decompress
from ads.records.crc import crc32c
from ads.records.errors import RecordError
from ads.records.recompress import recompress_batch
from ads.records.scan import batch_body, scan_records
from fuzz_support import fuzz_settings, hostile

MAX_INFLATE = 1 << 20
BLOBS = st.none() | st.binary(max_size=40)
HEADERS = st.lists(st.tuples(st.text(max_size=5), BLOBS), max_size=2)
SPECS = st.builds(rb.RecordSpec, BLOBS, BLOBS, HEADERS, st.integers(0, 2**42))
CODECS = st.sampled_from(list(CompressionType))

_HEADER_FIELDS = {  # offset in the batch, struct code
    "batch_length": (rb.LENGTH_OFFSET, ">i"),
    "magic": (rb.MAGIC_OFFSET, ">b"),
    "attributes": (rb.ATTRIBUTES_OFFSET, ">h"),
    "last_offset_delta": (rb.LAST_OFFSET_DELTA_OFFSET, ">i"),
    "base_timestamp": (rb.BASE_TIMESTAMP_OFFSET, ">q"),
    "max_timestamp": (rb.MAX_TIMESTAMP_OFFSET, ">q"),
    "producer_id": (rb.PRODUCER_ID_OFFSET, ">q"),
    "base_sequence": (rb.BASE_SEQUENCE_OFFSET, ">i"),
    "records_count": (rb.RECORDS_COUNT_OFFSET, ">i"),
}
_HOSTILE_VALUES = [-(1 << 31), -2, -1, 0, 1, 7, 0x7FFFFFFF, 0x7FFFFFFE, 1 << 24]
_RULES = [
    RecordRules("t-0"),
    RecordRules("t-0", require_key=True),
    RecordRules("t-0", log_append_time=True),
    RecordRules("t-0", before_max_ms=1000, after_max_ms=1000),
]


def _fix_crc(batch: bytearray) -> None:
    if len(batch) >= rb.BATCH_OVERHEAD:
        crc = crc32c(memoryview(batch)[rb.ATTRIBUTES_OFFSET:])
        struct.pack_into(">I", batch, rb.CRC_OFFSET, crc)


def _set(batch: bytearray, field: str, value: int) -> None:
    offset, code = _HEADER_FIELDS[field]
    size = struct.calcsize(code)
    lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1
    struct.pack_into(code, batch, offset, min(max(value, lo), hi))


@st.composite
def hostile_batches(draw: st.DrawFn) -> bytes:
    specs = draw(st.lists(SPECS, min_size=1, max_size=6))
    codec = draw(CODECS)
    batch = bytearray(rb.build_batch(specs, compression=codec,
                                     producer_id=draw(st.sampled_from([-1, 7])),
                                     base_sequence=draw(st.sampled_from([-1, 0]))))
    where = draw(st.sampled_from(["header", "bytes", "body"]))
    if where == "header":
        for _ in range(draw(st.integers(1, 3))):
            _set(batch, draw(st.sampled_from(sorted(_HEADER_FIELDS))),
                 draw(st.sampled_from(_HOSTILE_VALUES) | st.integers(-(1 << 31), 1 << 31)))
    elif where == "bytes":
        batch = bytearray(draw(hostile(bytes(batch))))
    else:
        # Bend the (decompressed) records and compress them again with the batch's codec.
        body = decompress(codec, memoryview(batch)[rb.RECORDS_OFFSET:], max_size=MAX_INFLATE)
        bent = draw(hostile(body)) if body else draw(st.binary(max_size=20))
        batch[rb.RECORDS_OFFSET:] = compress(codec, bent)
        struct.pack_into(">i", batch, rb.LENGTH_OFFSET, len(batch) - rb.LOG_OVERHEAD)
    if draw(st.booleans()):
        _fix_crc(batch)
    return bytes(batch)


def _swallow(fn: object, *args: object, **kwargs: object) -> object:
    try:
        return fn(*args, **kwargs)  # type: ignore[operator]
    except RecordError:
        return None


@fuzz_settings(400)
@given(hostile_batches(), st.sampled_from(_RULES), st.integers(0, 2**42))
def test_records_fuzz_hostile_batches_raise_only_record_errors(
        batch: bytes, rules: RecordRules, now_ms: int) -> None:
    view = memoryview(batch)
    found = _swallow(rb.validate_batches, view, max_batch_bytes=1 << 20) or []
    _swallow(lambda: list(rb.iter_batches(view)))
    end, valid = rb.scan_valid_prefix(view)
    assert 0 <= end <= len(batch)
    records = _swallow(rb.decode_records, batch, max_uncompressed_bytes=MAX_INFLATE,
                       check_crc=False)
    header = _swallow(rb.read_batch_header, view)
    if header is not None and header.compression <= 4 and header.size <= len(batch):
        scanned = _swallow(lambda: scan_records(*batch_body(view, 0, header, MAX_INFLATE),
                                                header.records_count))
        if records is not None and scanned is not None:
            assert len(scanned.keys) == len(records) == header.records_count
        _swallow(recompress_batch, view, 0, header, CompressionType.ZSTD, None, MAX_INFLATE)
    for _, checked in found:
        bad = _swallow(bad_records, view, 0, checked, rules, now_ms, MAX_INFLATE)
        # One entry per record at most: never more than the batch's bytes can hold.
        assert bad is None or len(bad) <= len(batch)


@fuzz_settings(300)
@given(CODECS, st.binary(max_size=300))
def test_records_fuzz_garbage_bodies_decompress_or_raise(codec: CompressionType,
                                                         data: bytes) -> None:
    out = _swallow(decompress, codec, data, max_size=MAX_INFLATE)
    assert out is None or len(out) <= MAX_INFLATE


def _lying_count_batch(count: int, attributes: int, max_timestamp: int) -> bytes:
    """One real record, a header claiming `count` records, and a valid CRC."""
    batch = bytearray(rb.build_batch([(b"k", b"v")], timestamp=1000))
    _set(batch, "records_count", count)
    _set(batch, "last_offset_delta", count - 1)
    _set(batch, "attributes", attributes)
    _set(batch, "max_timestamp", max_timestamp)
    _fix_crc(batch)
    return bytes(batch)


def test_records_fuzz_lying_record_count_costs_nothing() -> None:
    # A batch whose header claims 2^31-1 records passes the header checks (the count agrees
    # with lastOffsetDelta). Deciding its timestamps from the header alone must not loop
    # over, or allocate for, records that are not there.
    for rules, max_ts in [(RecordRules("t-0", log_append_time=True), 5000),
                          (RecordRules("t-0"), rb.NO_TIMESTAMP),
                          (RecordRules("t-0", before_max_ms=10, after_max_ms=10), 5000)]:
        batch = _lying_count_batch(0x7FFFFFFF, rb.TIMESTAMP_TYPE_MASK, max_ts)
        [(_, header)] = rb.validate_batches(batch, max_batch_bytes=1 << 20)
        assert rules.must_scan(header, now_ms=10_000)
        tracemalloc.start()
        try:
            bad = _swallow(bad_records, batch, 0, header, rules, 10_000, MAX_INFLATE)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert bad is None or len(bad) <= 1
        assert peak < 1 << 20, peak


BOMB_BOUND = 8 << 20  # the inflation bound in these tests; the bombs inflate to 32 times it


def _bombs() -> dict[str, bytes]:
    from fuzz_support import bomb_batch  # noqa: PLC0415

    bombs = {name: bomb_batch(codec, 256 << 20) for name, codec in
             [("gzip", CompressionType.GZIP), ("lz4", CompressionType.LZ4),
              ("zstd", CompressionType.ZSTD)]}
    # Raw snappy whose preamble claims 4 GiB: refused before anything is allocated.
    lying = bytearray(rb.build_batch([(b"k", b"v")], compression=CompressionType.SNAPPY))
    del lying[rb.RECORDS_OFFSET:]
    lying += b"\xff\xff\xff\xff\x0f" + b"\x00" * 16
    struct.pack_into(">i", lying, rb.LENGTH_OFFSET, len(lying) - rb.LOG_OVERHEAD)
    _fix_crc(lying)
    bombs["snappy-lying-length"] = bytes(lying)
    return bombs


def test_records_fuzz_bombs_refused_within_the_bound() -> None:
    # Every place that reads inside a produced batch: the key and timestamp checks, the
    # recompression into the topic's codec, and record decoding. Each refuses the bomb with
    # CorruptRecordError, holding at most about twice the bound (Python allocations).
    from ads.records.errors import CorruptRecordError  # noqa: PLC0415

    for name, bomb in _bombs().items():
        [(_, header)] = rb.validate_batches(bomb, max_batch_bytes=4 << 20)
        readers = {
            "checks": lambda: bad_records(bomb, 0, header, _RULES[1], 0, BOMB_BOUND),  # noqa: B023
            "recompress": lambda: recompress_batch(bomb, 0, header,  # noqa: B023
                                                   CompressionType.NONE, None, BOMB_BOUND),
            "decode": lambda: rb.decode_records(bomb, max_uncompressed_bytes=BOMB_BOUND),  # noqa: B023
        }
        for reader, read in readers.items():
            tracemalloc.start()
            try:
                try:
                    read()
                except CorruptRecordError:
                    pass
                else:
                    raise AssertionError(f"{name} bomb accepted by {reader}")
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 2.5 * BOMB_BOUND, (name, reader, peak)
