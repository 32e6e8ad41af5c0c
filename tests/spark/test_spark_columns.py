"""RecordBatch v2 bytes to Arrow columns (ads.spark.columns), checked against the
record-by-record decoder of ads.records."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ads.records.batch import (
    ControlRecordType,
    RecordSpec,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_records,
)
from ads.records.errors import CorruptRecordError
from ads.spark.columns import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    AbortedTransaction,
    decode_fetched,
    record_set_end,
)

TS = 1_700_000_000_000


def expected_rows(data: bytes, start: int = 0, end: int = 1 << 62) -> list[dict[str, object]]:
    rows = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        for r in decode_records(data[pos:pos + size], max_uncompressed_bytes=1 << 30):
            if start <= r.offset < end:
                rows.append({"key": r.key, "value": r.value, "offset": r.offset,
                             "timestamp": r.timestamp,
                             "headers": [{"key": k, "value": v} for k, v in r.headers] or None})
        pos += size
    return rows


def actual_rows(batch: pa.RecordBatch) -> list[dict[str, object]]:
    out = []
    for row in batch.to_pylist():
        ts = row["timestamp"]
        out.append({"key": row["key"], "value": row["value"], "offset": row["offset"],
                    "timestamp": int(ts.timestamp() * 1000), "headers": row.get("headers")})
    return out


def test_spark_columns_schema_matches_pyspark() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from ads.spark.source import kafka_schema

    assert to_arrow_schema(kafka_schema(False), timezone="UTC").equals(ARROW_SCHEMA)
    assert to_arrow_schema(kafka_schema(True), timezone="UTC").equals(ARROW_SCHEMA_WITH_HEADERS)


def test_spark_columns_decode_uniform_and_varied_lengths() -> None:
    rng = random.Random(7)
    batches = []
    offset = 0
    for n, vary in ((300, False), (50, True), (1, False), (200, True)):
        records = [(b"k%d" % (offset + i),
                    bytes(rng.randint(0, 300) if vary else 100)) for i in range(n)]
        batches.append(build_batch(records, base_offset=offset,
                                   timestamps=[TS + i * 40 for i in range(n)]))
        offset += n
    data = b"".join(batches)
    chunk = decode_fetched(data, topic="t", partition=3, start=0, end=offset,
                           include_headers=False)
    assert chunk.batch is not None
    assert chunk.batch.schema.equals(ARROW_SCHEMA)
    assert chunk.next_offset == offset
    rows = actual_rows(chunk.batch)
    assert [dict(r, headers=None) for r in rows] == expected_rows(data)
    assert set(chunk.batch.column("topic").to_pylist()) == {"t"}
    assert set(chunk.batch.column("partition").to_pylist()) == {3}
    assert set(chunk.batch.column("timestampType").to_pylist()) == {0}


def test_spark_columns_null_keys_values_and_headers() -> None:
    specs = [RecordSpec(None, b"v0"), RecordSpec(b"k1", None, (("h", b"x"), ("h2", None))),
             RecordSpec(b"", b""), RecordSpec(None, None, (("a", b"b"),))]
    data = build_batch(specs, base_offset=10, timestamp=TS)
    chunk = decode_fetched(data, topic="t", partition=0, start=10, end=14,
                           include_headers=True)
    assert chunk.batch is not None and chunk.batch.schema.equals(ARROW_SCHEMA_WITH_HEADERS)
    assert actual_rows(chunk.batch) == expected_rows(data)
    without = decode_fetched(data, topic="t", partition=0, start=10, end=14,
                             include_headers=False)
    assert without.batch is not None and without.batch.num_columns == 7


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_spark_columns_compressed_batches(codec: int) -> None:
    data = b"".join(
        build_batch([(None, b"value-%d" % i) for i in range(base, base + 40)],
                    base_offset=base, timestamp=TS, compression=codec)
        for base in (0, 40, 80))
    chunk = decode_fetched(data, topic="t", partition=0, start=0, end=120,
                           include_headers=False)
    assert chunk.batch is not None
    assert chunk.batch.column("value").to_pylist() == [b"value-%d" % i for i in range(120)]


def test_spark_columns_range_bounds_and_partial_tail() -> None:
    first = build_batch([(None, b"%d" % i) for i in range(10)], base_offset=0, timestamp=TS)
    second = build_batch([(None, b"%d" % i) for i in range(10, 20)], base_offset=10,
                         timestamp=TS)
    data = first + second[:-5]  # a broker may cut the last batch at its size limit
    chunk = decode_fetched(data, topic="t", partition=0, start=4, end=100,
                           include_headers=False)
    assert chunk.batch is not None
    assert chunk.batch.column("offset").to_pylist() == list(range(4, 10))
    assert chunk.next_offset == 10
    assert record_set_end(data) == 10
    capped = decode_fetched(first + second, topic="t", partition=0, start=4, end=13,
                            include_headers=False)
    assert capped.batch is not None
    assert capped.batch.column("offset").to_pylist() == list(range(4, 13))


def test_spark_columns_log_append_time() -> None:
    data = build_batch([(None, b"a"), (None, b"b")], base_offset=0,
                       timestamps=[TS, TS + 5], timestamp_type=TimestampType.LOG_APPEND_TIME)
    chunk = decode_fetched(data, topic="t", partition=0, start=0, end=2,
                           include_headers=False)
    assert chunk.batch is not None
    assert chunk.batch.column("timestampType").to_pylist() == [1, 1]
    stamps = [int(t.timestamp() * 1000) for t in chunk.batch.column("timestamp").to_pylist()]
    assert stamps == [r["timestamp"] for r in expected_rows(data)]


def test_spark_columns_skip_control_and_aborted_batches() -> None:
    committed = build_batch([(None, b"c0"), (None, b"c1")], base_offset=0, producer_id=7,
                            producer_epoch=0, base_sequence=0, is_transactional=True,
                            timestamp=TS)
    commit_marker = build_control_batch(ControlRecordType.COMMIT, 7, 0, 0, base_offset=2,
                                        timestamp=TS)
    aborted = build_batch([(None, b"a3"), (None, b"a4")], base_offset=3, producer_id=8,
                          producer_epoch=0, base_sequence=0, is_transactional=True,
                          timestamp=TS)
    abort_marker = build_control_batch(ControlRecordType.ABORT, 8, 0, 0, base_offset=5,
                                       timestamp=TS)
    plain = build_batch([(None, b"p6")], base_offset=6, timestamp=TS)
    data = committed + commit_marker + aborted + abort_marker + plain
    uncommitted = decode_fetched(data, topic="t", partition=0, start=0, end=7,
                                 include_headers=False)
    assert uncommitted.batch is not None
    assert uncommitted.batch.column("value").to_pylist() == [b"c0", b"c1", b"a3", b"a4", b"p6"]
    committed_only = decode_fetched(data, topic="t", partition=0, start=0, end=7,
                                    include_headers=False,
                                    aborted=[AbortedTransaction(8, 3)])
    assert committed_only.batch is not None
    assert committed_only.batch.column("value").to_pylist() == [b"c0", b"c1", b"p6"]
    assert committed_only.next_offset == 7
    only_markers = decode_fetched(commit_marker, topic="t", partition=0, start=2, end=7,
                                  include_headers=False)
    assert only_markers.batch is None and only_markers.next_offset == 3


def test_spark_columns_corrupt_batch_raises() -> None:
    data = bytearray(build_batch([(b"k", b"v" * 50)] * 3, base_offset=0, timestamp=TS))
    data[-10] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_fetched(bytes(data), topic="t", partition=0, start=0, end=3,
                       include_headers=False)
    # Without CRC checks, the damaged record length is still caught by the column pass.
    bad_length = bytearray(build_batch([(b"k", b"v")] * 3, base_offset=0, timestamp=TS))
    bad_length[61] = 0x7E
    with pytest.raises(CorruptRecordError):
        decode_fetched(bytes(bad_length), topic="t", partition=0, start=0, end=3,
                       include_headers=False, check_crcs=False)


record = st.tuples(st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=300),
                   st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)),
                            max_size=2),
                   st.integers(min_value=0, max_value=1 << 20))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(record, min_size=1, max_size=40), min_size=1, max_size=4),
       st.integers(min_value=0, max_value=4))
def test_spark_columns_match_record_decoder(batches: list[list[tuple]], codec: int) -> None:
    data = b""
    offset = 0
    for records in batches:
        specs = [RecordSpec(k, v, tuple(h)) for k, v, h, _ in records]
        data += build_batch(specs, base_offset=offset, compression=codec,
                            timestamps=[TS + d for *_, d in records])
        offset += len(records)
    chunk = decode_fetched(data, topic="t", partition=0, start=0, end=offset,
                           include_headers=True)
    assert chunk.batch is not None
    assert actual_rows(chunk.batch) == expected_rows(data)
