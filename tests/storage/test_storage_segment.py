"""Log segments: appends, offset translation, reads by whole batches, deletion."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, iter_batches
from ads.storage.config import LogConfig
from ads.storage.open_files import OpenFiles
from ads.storage.segment import LogSegment
from ads.storage.timestamps import first_at_or_after

FILES = OpenFiles()

T0 = 1_700_000_000_000


def fill(segment: LogSegment, base: int, batches: int, records: int = 4) -> list[int]:
    """Append ``batches`` batches of ``records`` records; returns their positions."""
    positions = []
    offset = base
    for i in range(batches):
        data = build_batch([(None, b"p" * 20)] * records, base_offset=offset, timestamp=T0 + i)
        positions.append(segment.append(data, offset, offset + records - 1, T0 + i, offset))
        offset += records
    return positions


def new_segment(tmp_path: Path, base: int = 1000, **overrides: object) -> LogSegment:
    config = LogConfig(index_interval_bytes=200).with_overrides(**overrides)
    return LogSegment.create(tmp_path, base, config, ManualClock(T0), files=FILES)


def test_segment_translate_offset(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    positions = fill(segment, 1000, 20)
    assert segment.offset_index.entries > 3
    for offset in range(1000, 1080):
        found = segment.translate_offset(offset)
        assert found is not None
        position, header = found
        assert header.base_offset <= offset <= header.last_offset
        assert position == positions[(offset - 1000) // 4]
    assert segment.translate_offset(1080) is None
    assert segment.translate_offset(5, start_position=positions[3])[1].base_offset == 1012
    assert segment.next_offset() == 1080
    segment.close()


def test_segment_read_whole_batches(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    positions = fill(segment, 1000, 10)
    size = positions[1] - positions[0]
    region = segment.read(1005, size * 3 + 10)
    assert region is not None
    assert (region.offset, region.length) == (positions[1], size * 3)
    headers = [h for _, h in iter_batches(region.read_bytes())]
    assert [h.base_offset for h in headers] == [1004, 1008, 1012]
    capped = segment.read(1005, 10**6, max_position=positions[3])
    assert capped is not None and capped.length == size * 2
    assert segment.read(1005, 10, min_one_batch=False).length == 0  # type: ignore[union-attr]
    assert segment.read(1005, 10, min_one_batch=True).length == size  # type: ignore[union-attr]
    assert segment.read(2000, 100) is None
    segment.close()


def test_segment_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    fill(segment, 1000, 10)
    assert first_at_or_after(segment, T0, 0) == (1000, T0)
    assert first_at_or_after(segment, T0 + 7, 0) == (1028, T0 + 7)
    assert first_at_or_after(segment, T0 + 7, 1030) == (1030, T0 + 7)
    assert first_at_or_after(segment, T0 + 10, 0) is None
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (T0 + 9, 1036)
    segment.close()


def test_segment_truncate_to(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    positions = fill(segment, 1000, 10)
    total = segment.size
    assert segment.truncate_to(1013) == (total - positions[3], 1012)
    assert segment.size == positions[3]
    assert segment.next_offset() == 1012
    assert segment.translate_offset(1012) is None
    assert segment.max_timestamp <= T0 + 2
    fill(segment, 1012, 2)
    assert segment.next_offset() == 1020
    segment.close()


def test_segment_reads_of_recent_batches_match_a_reopened_segment(tmp_path: Path) -> None:
    # Reads at the offsets of the last appended batches take their remembered places; a
    # reopened segment has none and finds them through the index. Both must agree, also
    # for batches appended again after a truncation, and for batches remembered no longer.
    segment = new_segment(tmp_path)
    fill(segment, 1000, 100, records=1)
    assert segment.truncate_to(1090) is not None
    positions = fill(segment, 1090, 10, records=3)  # offsets 1090..1119, other sizes
    segment.flush()
    reopened = LogSegment.open(tmp_path, 1000, segment.config, ManualClock(T0), files=FILES)
    for offset in [1000, 1030, 1089, *range(1090, 1120)]:
        for budget in (1, 200, 10_000):
            ours, theirs = segment.read(offset, budget), reopened.read(offset, budget)
            assert ours is not None and theirs is not None
            assert (ours.offset, ours.length) == (theirs.offset, theirs.length), (offset, budget)
    hit = segment.read(1093, 1, min_one_batch=True)
    assert hit is not None
    assert (hit.offset, hit.length) == (positions[1], positions[2] - positions[1])
    assert [h.base_offset for _, h in iter_batches(hit.read_bytes())] == [1093]
    assert segment.read(1120, 100) is None
    segment.on_become_inactive()  # sealed by a roll: reads go through the index again
    sealed = segment.read(1093, 1, min_one_batch=True)
    assert sealed is not None and (sealed.offset, sealed.length) == (hit.offset, hit.length)
    reopened.close()
    segment.close()


def test_segment_should_roll(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, segment_bytes=1000, segment_ms=500)
    assert not segment.should_roll(900, T0, 1000, T0)
    fill(segment, 1000, 1)
    assert segment.should_roll(1000, T0, 1004, T0)
    assert segment.should_roll(10, T0 + 501, 1004, T0)
    assert not segment.should_roll(10, T0 + 500, 1004, T0)
    assert segment.should_roll(10, T0, 1000 + 2**31, T0)
    segment.close()


def test_segment_delete_keeps_regions_readable_until_removal(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, file_delete_delay_ms=100)
    fill(segment, 1000, 3)
    region = segment.read(1000, 10**6)
    assert region is not None
    expected = region.read_bytes()
    pending: list[Callable[[], None]] = []
    segment.delete(lambda delay, task: pending.append(task))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00000000000000001000.index.deleted", "00000000000000001000.log.deleted",
                     "00000000000000001000.timeindex.deleted"]
    assert region.read_bytes() == expected
    pending[0]()
    assert not list(tmp_path.iterdir())
    assert segment.closed


def test_segment_reopen_loads_indexes_lazily(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    fill(segment, 1000, 20)
    segment.close()
    again = LogSegment.open(tmp_path, 1000, LogConfig(index_interval_bytes=200), ManualClock(T0),
                            files=FILES)
    assert not again.offset_index.loaded
    assert again.max_timestamp == T0 + 19  # from the time index's last entry, no full load
    assert not again.offset_index.loaded
    assert again.translate_offset(1041)[1].base_offset == 1040  # type: ignore[index]
    assert again.offset_index.loaded
    again.close()


def test_segment_region_outlives_immediate_delete(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, file_delete_delay_ms=0)
    fill(segment, 1000, 3)
    region = segment.read(1000, 10**6)
    assert region is not None
    expected = region.read_bytes()
    segment.delete(None)
    assert not list(tmp_path.iterdir()) and segment.closed
    assert region.read_bytes() == expected  # the region holds the descriptor open
    fd = region.fd
    del region
    with pytest.raises(OSError):
        os.fstat(fd)
