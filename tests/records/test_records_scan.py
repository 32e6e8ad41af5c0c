"""The record scanner (``ads.records.scan``) and the shared varint reader."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads.records.batch import RecordSpec, build_batch, read_batch_header
from ads.records.compression import CompressionType
from ads.records.errors import CorruptRecordError
from ads.records.record import encode_varint, read_varint
from ads.records.scan import RecordScan, batch_body, scan_records

MAX = 1 << 22
BLOBS = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=10), BLOBS), max_size=3)
SPECS = st.builds(RecordSpec, BLOBS, BLOBS, HEADERS, st.integers(0, 2**42))


def _scan(batch: bytes) -> RecordScan:
    header = read_batch_header(batch)
    body, start, end = batch_body(batch, 0, header, MAX)
    return scan_records(body, start, end, header.records_count)


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 63, -64, 64, -65, 8191, 8192, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)],
)
def test_read_varint_boundaries_round_trip(value: int) -> None:
    data = b"\x07" + encode_varint(value) + b"\x09"
    assert read_varint(data, 1) == (value, len(data) - 1)


def test_read_varint_truncated_raises_index_error_and_overlong_raises_corrupt() -> None:
    with pytest.raises(IndexError):
        read_varint(encode_varint(8192)[:-1], 0)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff" * 11, 0)


def test_scan_records_every_field_and_headers() -> None:
    batch = build_batch(
        [
            RecordSpec(b"k1", b"v" * 5000, [("h", b"x"), ("n", None)], 1_000),
            RecordSpec(None, b"v", [], 1_005),
            RecordSpec(b"k3", None, [], 990),
        ],
        base_offset=100,
        timestamp=1_000,
    )
    scan = _scan(batch)
    assert scan.keys == [b"k1", None, b"k3"]
    assert scan.offset_deltas == [0, 1, 2]
    assert scan.timestamp_deltas == [0, 5, -10]
    assert scan.tombstones == [False, False, True]
    assert scan.ends[-1] == len(batch)


def test_scan_records_truncated_body_raises_corrupt_record_error() -> None:
    batch = build_batch([RecordSpec(b"key", b"value" * 40)])
    header = read_batch_header(batch)
    body, start, end = batch_body(batch, 0, header, MAX)
    for cut in range(start, end):
        with pytest.raises(CorruptRecordError):
            scan_records(body[:cut], start, cut, header.records_count)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(SPECS, min_size=1, max_size=20), st.sampled_from(list(CompressionType)))
def test_scan_records_matches_built_records_property(
    specs: list[RecordSpec], codec: CompressionType
) -> None:
    batch = build_batch(specs, compression=codec)
    scan = _scan(batch)
    assert scan.keys == [s.key for s in specs]
    assert scan.tombstones == [s.value is None for s in specs]
    assert scan.offset_deltas == list(range(len(specs)))
    header = read_batch_header(batch)
    stamps = [header.base_timestamp + d for d in scan.timestamp_deltas]
    assert stamps == [s.timestamp for s in specs]
