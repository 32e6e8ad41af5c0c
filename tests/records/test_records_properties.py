"""Property tests of the batch codec: round trips, recovery scans, and hostile input."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads.records.batch import (
    RecordSpec,
    build_batch,
    decode_records,
    scan_valid_prefix,
    validate_batches,
)
from ads.records.compression import CompressionType
from ads.records.errors import RecordError
from ads.records.record import decode_record_body, encode_varint

MAX = 1 << 22
INT64 = st.integers(-(2**63), 2**63 - 1)
TIMESTAMPS = st.integers(0, 2**42)
BLOBS = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=10), BLOBS), max_size=3)
SPECS = st.builds(RecordSpec, BLOBS, BLOBS, HEADERS, TIMESTAMPS)
CODECS = st.sampled_from(list(CompressionType))

fast = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(st.lists(SPECS, min_size=1, max_size=20), CODECS, st.integers(0, 2**40))
def test_records_properties_round_trip(
    specs: list[RecordSpec], codec: CompressionType, base_offset: int
) -> None:
    batch = build_batch(specs, base_offset=base_offset, compression=codec)
    [(_, header)] = validate_batches(memoryview(batch), max_batch_bytes=MAX)
    assert header.records_count == len(specs)
    assert header.max_timestamp == max(s.timestamp or 0 for s in specs)
    records = decode_records(batch, max_uncompressed_bytes=MAX)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (base_offset + i, s.timestamp, s.key, s.value, tuple(s.headers))
        for i, s in enumerate(specs)
    ]


@fast
@given(st.lists(INT64, min_size=1, max_size=50))
def test_records_properties_varint_round_trip(values: list[int]) -> None:
    # A record body is a run of varints; decode them through the record decoder's reader.
    from ads.records.record import read_varint

    data = b"".join(encode_varint(v) for v in values)
    pos = 0
    decoded = []
    for _ in values:
        value, pos = read_varint(data, pos)
        decoded.append(value)
    assert decoded == values and pos == len(data)


@fast
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.data())
def test_records_properties_scan_stops_at_torn_tail(counts: list[int], data: st.DataObject) -> None:
    batches = [build_batch([(b"k", b"v" * n)] * n, timestamp=1) for n in counts]
    log = b"".join(batches)
    cut = data.draw(st.integers(0, len(log)))
    end, found = scan_valid_prefix(log[:cut])
    whole = 0
    boundaries = [0]
    for batch in batches:
        whole += len(batch)
        boundaries.append(whole)
    expected_end = max(b for b in boundaries if b <= cut)
    assert end == expected_end
    assert [pos for pos, _ in found] == boundaries[: len(found)]
    assert len(found) == boundaries.index(expected_end)


@fast
@given(
    st.lists(SPECS, min_size=1, max_size=5),
    CODECS,
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_records_properties_hostile_bytes_raise_record_errors(
    specs: list[RecordSpec], codec: CompressionType, flips: list[tuple[int, int]]
) -> None:
    batch = bytearray(build_batch(specs, compression=codec))
    for index, byte in flips:
        batch[index % len(batch)] = byte
    try:
        decode_records(batch, max_uncompressed_bytes=1 << 16, check_crc=False)
    except RecordError:
        pass
    try:
        validate_batches(batch, max_batch_bytes=MAX)
    except RecordError:
        pass


@fast
@given(st.binary(max_size=200), st.integers(0, 10))
def test_records_properties_garbage_record_body(body: bytes, count: int) -> None:
    try:
        decode_record_body(body, count, 0, 0, None)
    except RecordError:
        pass
