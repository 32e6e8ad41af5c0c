"""Per-record checks of produced batches (``ads.records.checks``): when the header suffices,
every refused record found, Kafka's messages and the partition's error."""

from __future__ import annotations

import pytest

from ads.records.batch import RecordSpec, TimestampType, build_batch, read_batch_header
from ads.records.checks import BadRecord, RecordRules, bad_records, summary
from ads.records.compression import CompressionType

NOW = 1_700_000_000_000
HOUR = 3_600_000
MAX = 1 << 22
BOUNDED = RecordRules("t-0", before_max_ms=HOUR, after_max_ms=HOUR)


def check(batch: bytes, rules: RecordRules) -> tuple[bool, list[BadRecord]]:
    header = read_batch_header(batch)
    return rules.must_scan(header, NOW), bad_records(batch, 0, header, rules, NOW, MAX)


def test_checks_defaults_never_scan() -> None:
    batch = build_batch([(b"k", b"v")] * 3, timestamps=[0, NOW + 100 * HOUR, 5])
    scan, bad = check(batch, RecordRules("t-0"))
    assert not scan and bad == []


def test_checks_header_in_bounds_does_not_scan() -> None:
    batch = build_batch([(b"k", b"v")] * 2, timestamps=[NOW - HOUR, NOW + HOUR])
    assert check(batch, BOUNDED) == (False, [])


@pytest.mark.parametrize("codec", list(CompressionType))
def test_checks_every_out_of_range_record_found(codec: CompressionType) -> None:
    batch = build_batch([(b"k", b"v")] * 4, base_offset=0, compression=codec,
                        timestamps=[NOW, NOW + 2 * HOUR, NOW, NOW - 2 * HOUR])
    scan, bad = check(batch, BOUNDED)
    assert scan
    assert [b.batch_index for b in bad] == [1, 3]
    assert all(b.timestamp for b in bad)
    assert bad[0].message == (
        f"Timestamp {NOW + 2 * HOUR} of message with offset 1 is out of range. The timestamp "
        f"should be within [{NOW - HOUR}, {NOW + HOUR}]")
    assert summary(bad) == (True, "One or more records have been rejected due to invalid "
                                  "timestamp")


def test_checks_first_record_too_old_scans_the_batch() -> None:
    batch = build_batch([(b"k", b"v")] * 3, timestamps=[NOW - 2 * HOUR, NOW, NOW - 3 * HOUR])
    scan, bad = check(batch, BOUNDED)
    assert scan and [b.batch_index for b in bad] == [0, 2]


def test_checks_record_older_than_an_in_range_first_passes() -> None:
    # The documented limit: the first timestamp stands for the oldest.
    batch = build_batch([(b"k", b"v")] * 2, timestamps=[NOW, NOW - 2 * HOUR])
    assert check(batch, BOUNDED)[0] is False


def test_checks_keys_on_compacted_topic_every_one_and_before_timestamps() -> None:
    rules = RecordRules("c-3", require_key=True, before_max_ms=HOUR)
    batch = build_batch([RecordSpec(b"a", b"v"), RecordSpec(None, b"v", timestamp=0),
                         RecordSpec(b"c", b"v", timestamp=0), RecordSpec(None, b"v")],
                        timestamp=NOW)
    scan, bad = check(batch, rules)
    assert scan
    assert [(b.batch_index, b.timestamp) for b in bad] == [(1, False), (2, True), (3, False)]
    assert bad[0].message == ("Compacted topic cannot accept message without key in topic "
                              "partition c-3.")


def test_checks_summary_of_record_errors_shows_three() -> None:
    bad = [BadRecord(i, f"m{i}", False) for i in range(5)]
    timestamps, message = summary(bad)
    assert not timestamps
    assert message == (
        "One or more records have been rejected due to 5 record errors in total, and only "
        "showing the first three errors at most: [RecordError(batchIndex=0, message='m0'), "
        "RecordError(batchIndex=1, message='m1'), RecordError(batchIndex=2, message='m2')]")


def test_checks_batch_claiming_log_append_time() -> None:
    batch = build_batch([(b"k", b"v")] * 2, timestamp=NOW,
                        timestamp_type=TimestampType.LOG_APPEND_TIME)
    # On a CreateTime topic every record has maxTimestamp: in range, nothing to decode.
    assert check(batch, BOUNDED) == (False, [])
    scan, bad = check(batch, RecordRules("t-0", log_append_time=True))
    assert scan and [b.batch_index for b in bad] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime." in bad[0].message
    late = build_batch([(b"k", b"v")], timestamp=NOW + 2 * HOUR,
                       timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert [b.batch_index for b in check(late, BOUNDED)[1]] == [0]


def test_checks_log_append_time_topic_ignores_create_time_bounds() -> None:
    rules = RecordRules("t-0", log_append_time=True, before_max_ms=HOUR, after_max_ms=HOUR)
    batch = build_batch([(b"k", b"v")], timestamp=0)
    assert check(batch, rules) == (False, [])
