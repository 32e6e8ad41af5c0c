"""Partition log: append/read, rolls, indexes, retention, DeleteRecords, ListOffsets."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import BatchHeader, build_batch, iter_batches, validate_batches
from ads.storage.config import LogConfig
from ads.storage.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from ads.storage.log import Log, LogAppendInfo

T0 = 1_700_000_000_000


def open_log(path: Path, clock: ManualClock, **overrides: object) -> Log:
    return Log.open(path / "topic-0", "topic", 0, LogConfig().with_overrides(**overrides),
                    clock=clock, recovery_point=0, log_start_offset=0, clean_shutdown=True)


def append(log: Log, records: int = 1, *, size: int = 10, ts: int = T0, epoch: int = 0,
           log_append_time: bool = False, now: int | None = None) -> LogAppendInfo:
    data = build_batch([(None, b"x" * size)] * records, timestamp=ts)
    headers = validate_batches(data, max_batch_bytes=1 << 30)
    info = log.append(memoryview(data), headers, leader_epoch=epoch,
                      now_ms=ts if now is None else now, log_append_time=log_append_time)
    log.high_watermark = log.log_end_offset
    return info


def headers_of(data: bytes) -> list[BatchHeader]:
    return [h for _, h in iter_batches(data)]


def read_headers(log: Log, offset: int, max_bytes: int = 1 << 20, *,
                 max_offset: int | None = None, min_one_batch: bool = True) -> list[BatchHeader]:
    result = log.read(offset, max_bytes,
                      max_offset=log.log_end_offset if max_offset is None else max_offset,
                      min_one_batch=min_one_batch)
    return headers_of(result.read_bytes())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def test_log_append_assigns_offsets_and_reads_back(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    infos = [append(log, n) for n in (1, 3, 2)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 0), (1, 3), (4, 5)]
    assert log.log_end_offset == 6
    got = read_headers(log, 0)
    assert [(h.base_offset, h.last_offset) for h in got] == [(0, 0), (1, 3), (4, 5)]
    assert all(h.partition_leader_epoch == 0 for h in got)
    log.close()


def test_log_append_many_batches_in_one_request(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    data = build_batch([(None, b"a")] * 2, timestamp=T0) + build_batch([(None, b"b")] * 3,
                                                                        timestamp=T0 + 5)
    info = log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                      leader_epoch=3, now_ms=T0, log_append_time=False)
    assert (info.first_offset, info.last_offset) == (0, 4)
    got = read_headers(log, 0)
    assert [(h.base_offset, h.partition_leader_epoch) for h in got] == [(0, 3), (2, 3)]
    assert log.latest_epoch == 3
    log.close()


def test_log_read_across_segment_rolls(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=1000, index_interval_bytes=100)
    for _ in range(30):
        append(log, 2, size=50)
    assert log.num_segments > 5
    names = sorted(p.name for p in (tmp_path / "topic-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert all(len(n) == len("00000000000000000000.log") for n in names)
    got = read_headers(log, 0)
    assert [h.base_offset for h in got] == list(range(0, 60, 2))
    for offset in range(60):
        first = read_headers(log, offset, 1)[0]
        assert first.base_offset <= offset <= first.last_offset
    log.close()


def test_log_read_inside_and_between_batches(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, index_interval_bytes=0)
    for _ in range(10):
        append(log, 5)
    assert read_headers(log, 12)[0].base_offset == 10
    assert read_headers(log, 15)[0].base_offset == 15
    assert read_headers(log, 19)[0].base_offset == 15
    assert read_headers(log, 49)[0].base_offset == 45
    log.close()


def test_log_read_respects_max_bytes_whole_batches(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    for _ in range(5):
        append(log, 1, size=100)
    one = read_headers(log, 0)[0].size
    got = read_headers(log, 0, one * 2 + one // 2)
    assert [h.base_offset for h in got] == [0, 1]
    log.close()


def test_log_read_min_one_batch_exceeds_max_bytes(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    append(log, 10, size=100)
    append(log, 1)
    got = read_headers(log, 3, 50, min_one_batch=True)
    assert [h.base_offset for h in got] == [0]
    assert log.read(3, 50, max_offset=log.log_end_offset, min_one_batch=False).regions == []
    log.close()


def test_log_read_stops_at_max_offset(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=600)
    for _ in range(20):
        append(log, 2, size=40)
    got = read_headers(log, 0, max_offset=10)
    assert [h.base_offset for h in got] == [0, 2, 4, 6, 8]
    # A batch straddling max_offset is not exposed.
    assert [h.base_offset for h in read_headers(log, 0, max_offset=9)] == [0, 2, 4, 6]
    assert log.read(10, 1 << 20, max_offset=10, min_one_batch=True).regions == []
    log.close()


def test_log_read_out_of_range(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    append(log, 3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100, max_offset=3, min_one_batch=True)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100, max_offset=3, min_one_batch=True)
    at_end = log.read(3, 100, max_offset=3, min_one_batch=True)
    assert at_end.regions == [] and at_end.first_offset is None
    log.delete_records(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100, max_offset=3, min_one_batch=True)
    assert read_headers(log, 2)[0].base_offset == 0  # the batch holding offset 2
    log.close()


def test_log_roll_by_segment_bytes(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=500)
    sizes = []
    for _ in range(12):
        append(log, 1, size=100)
        sizes.append(log.num_segments)
    assert log.num_segments >= 4
    assert all(s.size <= 500 for s in log.segments)
    with pytest.raises(RecordBatchTooLargeError):
        append(log, 1, size=600)
    log.close()


def test_log_roll_by_segment_ms(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_ms=1000)
    append(log, ts=T0)
    append(log, ts=T0 + 999)
    assert log.num_segments == 1
    append(log, ts=T0 + 1001)
    assert log.num_segments == 2
    assert log.active_segment.base_offset == 2
    log.close()
    # Without timestamps the segment's creation time on the clock counts.
    untimed = open_log(tmp_path / "b", clock, segment_ms=1000)
    append(untimed, ts=-1, now=clock.time_ms())
    clock.advance(1000)
    append(untimed, ts=-1, now=clock.time_ms())
    assert untimed.num_segments == 1
    clock.advance(1)
    append(untimed, ts=-1, now=clock.time_ms())
    assert untimed.num_segments == 2
    untimed.close()


def test_log_explicit_roll_and_empty_roll(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    assert log.roll() is log.active_segment  # empty: nothing to roll
    append(log, 2)
    new = log.roll()
    assert new.base_offset == 2 and log.num_segments == 2
    assert (tmp_path / "topic-0" / "00000000000000000002.snapshot").exists()
    assert log.recovery_point == 2  # the rolled segment was flushed
    log.close()


def test_log_retention_by_time(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=10_000)
    for i in range(10):
        append(log, 1, size=100, ts=T0 + i * 1000)
    segments_before = log.num_segments
    assert log.enforce_retention(T0 + 5_000) == 0
    deleted = log.enforce_retention(T0 + 14_500)
    assert deleted > 0 and log.num_segments == segments_before - deleted
    assert log.log_start_offset == log.segments[0].base_offset
    assert all(s.largest_timestamp >= T0 + 4_500 for s in log.segments[:-1])
    # Everything expired: the active segment stays.
    log.enforce_retention(T0 + 1_000_000)
    assert log.num_segments == 1
    assert not list((tmp_path / "topic-0").glob("*.deleted"))
    log.close()


def test_log_retention_by_bytes(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300, retention_bytes=600, retention_ms=-1)
    for _ in range(12):
        append(log, 1, size=100)
    log.enforce_retention(T0 + 10**12)
    assert log.size_bytes - log.active_segment.size <= 600
    assert log.size_bytes > 600 - 300
    assert read_headers(log, log.log_start_offset)[0].base_offset == log.log_start_offset
    log.close()


def test_log_retention_skips_compacted_topics(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=0, cleanup_policy=("compact",))
    for _ in range(6):
        append(log, 1, size=100)
    assert log.enforce_retention(T0 + 10**9) == 0
    log.close()


def test_log_retention_waits_for_high_watermark(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=0)
    for _ in range(6):
        append(log, 1, size=100)
    log.high_watermark = 0
    assert log.enforce_retention(T0 + 10**9) == 0
    log.close()


def test_log_delete_records(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300)
    for _ in range(10):
        append(log, 1, size=100)
    assert log.delete_records(5) == 5
    assert log.log_start_offset == 5
    assert all(s.base_offset <= 5 for s in log.segments[:1])
    assert log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(11)
    assert log.delete_records(3) == 5  # never moves back
    assert log.delete_records(-1) == 10  # -1: up to the high watermark
    assert log.num_segments == 1
    log.close()


def test_log_fetch_offset_by_timestamp(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=400, index_interval_bytes=0)
    for i in range(10):
        append(log, 2, size=50, ts=T0 + i * 100, epoch=i // 5)
    assert log.fetch_offset_by_timestamp(-2) == (0, -1, 0)
    assert log.fetch_offset_by_timestamp(-1) == (20, -1, 1)
    assert log.fetch_offset_by_timestamp(-3) == (18, T0 + 900, 1)
    assert log.fetch_offset_by_timestamp(T0) == (0, T0, 0)
    assert log.fetch_offset_by_timestamp(T0 + 250) == (6, T0 + 300, 0)
    assert log.fetch_offset_by_timestamp(T0 + 700) == (14, T0 + 700, 1)
    assert log.fetch_offset_by_timestamp(T0 + 901) is None
    log.delete_records(7)
    assert log.fetch_offset_by_timestamp(T0) == (7, T0 + 300, 0)
    log.close()


def test_log_append_time(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    info = append(log, 2, ts=T0 - 50_000, log_append_time=True, now=T0 + 7)
    assert info.log_append_time_ms == T0 + 7
    got = read_headers(log, 0)[0]
    assert got.max_timestamp == T0 + 7
    assert got.timestamp_type.name == "LOG_APPEND_TIME"
    validate_batches(log.read(0, 1000, max_offset=2, min_one_batch=True).read_bytes(),
                     max_batch_bytes=1 << 20)  # CRC recomputed
    log.close()


def test_log_truncate_to(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300)
    for i in range(10):
        append(log, 1, size=100, epoch=i)
    assert log.truncate_to(4)
    assert log.log_end_offset == 4 and log.high_watermark == 4
    assert [h.base_offset for h in read_headers(log, 0)] == [0, 1, 2, 3]
    assert log.latest_epoch == 3
    assert not log.truncate_to(7)
    info = append(log, 1, epoch=20)
    assert info.first_offset == 4
    assert log.end_offset_for_epoch(3) == (3, 4)
    log.close()


def test_log_truncate_below_first_segment(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300)
    for _ in range(10):
        append(log, 1, size=100)
    log.delete_records(6)
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (2, 2, 1)
    assert append(log).first_offset == 2
    log.close()


def test_log_end_offset_for_epoch(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    append(log, 2, epoch=1)
    append(log, 2, epoch=3)
    append(log, 2, epoch=3)
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(4) == (-1, -1)
    text = (tmp_path / "topic-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n2\n1 0\n3 2\n"
    log.close()


def test_log_flush_messages_advances_recovery_point(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, flush_messages=1)
    append(log, 3)
    assert log.recovery_point == 3 and log.unflushed_messages == 0
    log.close()
    lazy = open_log(tmp_path / "b", clock)
    append(lazy, 3)
    assert lazy.recovery_point == 0
    lazy.flush()
    assert lazy.recovery_point == 3
    lazy.close()


def test_log_scheduler_runs_roll_flush_and_delayed_delete(tmp_path: Path,
                                                        clock: ManualClock) -> None:
    tasks: list[tuple[int, object]] = []
    log = Log.open(tmp_path / "t-1", "t", 1,
                   LogConfig(segment_bytes=300, retention_ms=0, file_delete_delay_ms=5),
                   clock=clock, recovery_point=0, log_start_offset=0, clean_shutdown=True,
                   scheduler=lambda delay, task: tasks.append((delay, task)))
    for _ in range(6):
        append(log, 1, size=100)
    assert tasks and log.recovery_point == 0
    region = log.read(0, 1000, max_offset=6, min_one_batch=True).regions[0]
    for _, task in tasks:
        task()  # type: ignore[operator]
    assert log.recovery_point > 0
    tasks.clear()
    assert log.enforce_retention(T0 + 10**9) > 0
    assert list((tmp_path / "t-1").glob("*.log.deleted"))
    assert region.read_bytes()  # still readable until the delayed removal
    for delay, task in tasks:
        assert delay == 5
        task()  # type: ignore[operator]
    assert not list((tmp_path / "t-1").glob("*.deleted"))
    log.close()


def test_log_file_region_is_sendfile_ready(tmp_path: Path, clock: ManualClock) -> None:
    import os

    log = open_log(tmp_path, clock)
    append(log, 4, size=30)
    region = log.read(0, 1000, max_offset=4, min_one_batch=True).regions[0]
    out = tmp_path / "out"
    with out.open("wb") as f:
        sent = os.sendfile(f.fileno(), region.fd, region.offset, region.length)
    assert sent == len(region)
    assert out.read_bytes() == region.read_bytes()
    log.close()
