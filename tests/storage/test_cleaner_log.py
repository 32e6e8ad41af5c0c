"""The cleaner on one log, run by hand: what a pass keeps, drops and rewrites."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, iter_batches, read_batch_header, validate_batches
from ads.storage.checkpoint import read_offset_checkpoint
from ads.storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from ads.storage.log import Log
from compaction_support import T0, TOPIC, Harness, check_guarantees, compact_config


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def harness(tmp_path: Path, clock: ManualClock, **config: object) -> Harness:
    return Harness(tmp_path / "data", clock, compact_config(**config))


def fill(h: Harness, start: int, count: int, size: int = 100) -> None:
    """Unique filler keys, enough to roll segments."""
    for i in range(start, start + count):
        h.append([(b"filler-%d" % i, b"f" * size)])


def batch_headers(h: Harness) -> list:  # type: ignore[type-arg]
    out = []
    for segment in h.log.segments:
        data = segment.log_path.read_bytes()
        out += [hdr for _, hdr in iter_batches(data)]
    return out


def test_cleaner_log_keeps_last_value_per_key(tmp_path: Path, clock: ManualClock,
                                              caplog: pytest.LogCaptureFixture) -> None:
    h = harness(tmp_path, clock)
    h.append([(b"123", b"bill@microsoft.com")])
    fill(h, 0, 3)
    h.append([(b"123", b"bill@gatesfoundation.org")])
    fill(h, 3, 3)
    h.append([(b"123", b"bill@gmail.com")])
    fill(h, 6, 40)
    assert h.log.num_segments > 2
    with caplog.at_level(logging.INFO, logger="ads.storage.cleaner"):
        stats = h.clean()
    assert stats is not None and stats.keys > 0
    assert "cleaned log compacted-0" in caplog.text and "dirty ratio" in caplog.text
    seen = h.read()
    assert [v for _, k, v in seen if k == b"123"] == [b"bill@gmail.com"]
    check_guarantees(h.writes, seen, keep_from_offset=h.log.active_segment.base_offset)
    assert stats.dirty_ratio_before > stats.dirty_ratio_after
    metrics = h.cleaner.metrics
    assert metrics.passes == 1 and metrics.bytes_read >= stats.bytes_read > 0
    assert metrics.last_pass is stats


def test_cleaner_log_offsets_never_change_and_gaps_read_forward(
        tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock)
    for i in range(60):
        h.append([(b"k%d" % (i % 7), b"v%d" % i)])
    before = h.read()
    assert h.clean() is not None
    after = h.read()
    assert len(after) < len(before)
    kept = [o for o, _, _ in after]
    # The seed's 36/37/38: a compacted-away offset reads from the next larger offset.
    for offset in range(h.log.log_start_offset, h.log.log_end_offset):
        first = h.read(offset)[0][0]
        assert first == min(o for o in kept if o >= offset)
    check_guarantees(h.writes, after, keep_from_offset=h.log.active_segment.base_offset)


def test_cleaner_log_tombstones_keep_for_delete_retention(tmp_path: Path,
                                                          clock: ManualClock) -> None:
    h = harness(tmp_path, clock, delete_retention_ms=60_000)
    h.append([(b"123", b"bill@gmail.com")])
    fill(h, 0, 5)
    tombstone = h.append([(b"123", None)])
    fill(h, 5, 40)
    assert h.clean() is not None
    seen = h.read()
    assert [(o, v) for o, k, v in seen if k == b"123"] == [(tombstone, None)]
    horizon_batches = [hdr for hdr in batch_headers(h) if hdr.has_delete_horizon]
    assert [hdr.delete_horizon_ms for hdr in horizon_batches] == [T0 + 60_000]
    # Within delete.retention.ms another pass keeps it.
    clock.advance(59_000)
    fill(h, 45, 30)
    h.clean()
    assert (tombstone, b"123", None) in h.read()
    check_guarantees(h.writes, h.read(), keep_tombstones_after_ms=clock.time_ms() - 60_000)
    # After the horizon the next pass removes it, and the key is gone entirely; the pass is
    # due for the horizon alone, with nothing new written, even after a restart.
    h.restart(clean=True)
    clock.advance(2_000)
    assert h.clean() is not None
    seen = h.read()
    assert all(k != b"123" for _, k, _ in seen)
    check_guarantees(h.writes, seen)


def test_cleaner_log_min_compaction_lag_protects_young_records(tmp_path: Path,
                                                               clock: ManualClock) -> None:
    h = harness(tmp_path, clock, min_compaction_lag_ms=10_000)
    for i in range(80):
        h.append([(b"k%d" % (i % 3), b"v" * 60)])
        clock.advance(100)  # 8 s in all: everything is younger than the lag
    assert h.log.num_segments > 2
    assert h.clean() is None
    assert len(h.read()) == 80
    clock.advance(5_000)  # now the older segments are past the lag
    stats = h.clean()
    assert stats is not None
    young = [w[0] for w in h.writes if w[3] > clock.time_ms() - 10_000]
    seen_offsets = {o for o, _, _ in h.read()}
    assert young and all(o in seen_offsets for o in young)
    check_guarantees(h.writes, h.read())


def test_cleaner_log_max_compaction_lag_forces_cleaning(tmp_path: Path,
                                                        clock: ManualClock) -> None:
    h = harness(tmp_path, clock, segment_bytes=100_000)
    for i in range(100):
        h.append([(b"distinct-%d" % i, b"x" * 50)])
    h.log.roll()
    assert h.clean() is not None  # a large clean tail of distinct keys
    h.log.update_config(compact_config(segment_bytes=100_000, min_cleanable_dirty_ratio=0.99,
                                       max_compaction_lag_ms=5_000))
    for i in range(30):
        h.append([(b"k%d" % (i % 3), b"v%d" % i)])
    assert h.clean() is None  # only the active segment is dirty, and it is young
    clock.advance(6_000)
    # The active segment is rolled because its records are older than the lag, and cleaning
    # is due although the dirty ratio is far below min.cleanable.dirty.ratio.
    stats = h.clean()
    assert stats is not None and stats.dirty_ratio_before < 0.5
    assert [v for _, k, v in h.read() if k.startswith(b"k")] == [b"v27", b"v28", b"v29"]
    assert h.cleaner.metrics.max_compaction_delay_secs > 0
    check_guarantees(h.writes, h.read())


def test_cleaner_log_groups_small_segments(tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock, segment_bytes=1500)
    for round_ in range(4):
        for i in range(60):
            h.append([(b"k%d" % (i % 5), b"r%d-%d" % (round_, i))])
        h.clean()
    # 12 segments were rolled; cleaning merged them (grouped by their size before cleaning,
    # as Kafka does, so each output fits segment.bytes).
    segments = h.log.segments
    assert len(segments) <= 6
    assert all(s.size <= 1500 for s in segments)
    check_guarantees(h.writes, h.read(), keep_from_offset=h.log.active_segment.base_offset)


def test_cleaner_log_offset_map_overflow_continues_next_pass(tmp_path: Path,
                                                             clock: ManualClock) -> None:
    h = harness(tmp_path, clock, segment_bytes=1200)
    from ads.storage.cleaner import CleanerConfig, LogCleaner

    h.cleaner = LogCleaner(h.manager, CleanerConfig(dedupe_buffer_size=20 * 41), clock=clock)
    for i in range(300):
        h.append([(b"key-%d" % (i % 90), b"v%d" % i)])
    ends = []
    while (stats := h.clean()) is not None:
        assert stats.keys <= 36  # 41 slots (a prime) * 0.9
        ends.append(stats.end_offset)
        check_guarantees(h.writes, h.read(), keep_from_offset=h.log.active_segment.base_offset)
    assert len(ends) > 3 and ends == sorted(ends)
    seen = h.read()
    assert {k for _, k, _ in seen} == {b"key-%d" % i for i in range(90)}
    checkpoint = read_offset_checkpoint(h.directory / CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint[(TOPIC, 0)] == ends[-1]


def test_cleaner_log_keeps_producer_state(tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock)
    for seq in range(10):
        h.append([(b"same", b"v%d" % seq)], producer_id=7, base_sequence=seq)
    last = h.writes[-1][0]
    h.append([(b"same", b"from-someone-else")])  # supersedes all of producer 7's records
    fill(h, 0, 30)
    assert h.clean() is not None
    headers = [hdr for hdr in batch_headers(h) if hdr.producer_id == 7]
    # Kafka's rule: the producer's last batch stays, emptied, so its sequence survives.
    assert [(hdr.last_offset, hdr.records_count, hdr.base_sequence) for hdr in headers] == [
        (last, 0, 9)]
    for f in h.directory.glob(f"{TOPIC}-0/*.snapshot"):
        f.unlink()  # rebuild producer state from the log alone
    h.restart(clean=False)
    entry = h.log.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 9
    h.append([(b"same", b"v10")], producer_id=7, base_sequence=10)  # in sequence: accepted
    check_guarantees(h.writes, h.read())


@pytest.mark.parametrize("codec", [1, 4])
def test_cleaner_log_compressed_batches(tmp_path: Path, clock: ManualClock, codec: int) -> None:
    h = harness(tmp_path, clock)
    for i in range(40):
        h.append([(b"k%d" % ((i + j) % 6), b"value-%d-%d" % (i, j)) for j in range(5)],
                 compression=codec)
    assert h.clean() is not None
    for hdr in batch_headers(h):
        assert hdr.compression in (codec, 0)
    seen = h.read()
    assert len(seen) < len(h.writes)
    check_guarantees(h.writes, seen, keep_from_offset=h.log.active_segment.base_offset)


def test_cleaner_log_drops_keyless_records(tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock)
    h.append([(None, b"no key"), (b"a", b"1")])
    fill(h, 0, 30)
    stats = h.clean()
    assert stats is not None and stats.counts.keyless_removed == 1
    assert all(k is not None for _, k, _ in h.read())


def test_cleaner_log_ignores_delete_policy_logs(tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock, cleanup_policy=("delete",))
    for i in range(60):
        h.append([(b"k", b"v%d" % i)])
    assert h.clean() is None
    assert len(h.read()) == 60


def test_cleaner_log_compact_delete_applies_both(tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock, cleanup_policy=("compact", "delete"), retention_ms=50_000)
    for i in range(50):
        h.append([(b"old-%d" % (i % 4), b"v" * 50)])
    h.log.roll()
    assert h.clean() is not None
    assert {k for _, k, _ in h.read()} == {b"old-%d" % i for i in range(4)}
    clock.advance(60_000)
    for i in range(50):
        h.append([(b"new-%d" % (i % 4), b"v" * 50)])
    h.log.enforce_retention(clock.time_ms())  # the cleaned old segments are past retention
    assert h.log.log_start_offset >= 50
    assert h.clean() is not None
    assert {k for _, k, _ in h.read()} == {b"new-%d" % i for i in range(4)}
    check_guarantees(h.writes, h.read(), log_start=h.log.log_start_offset)


def test_cleaner_log_checkpoint_survives_restart(tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock)
    for i in range(80):
        h.append([(b"k%d" % (i % 4), b"v%d" % i)])
    stats = h.clean()
    assert stats is not None
    h.restart(clean=True)
    plan = h.cleaner.plan(h.log)
    assert plan.first_dirty_offset == stats.end_offset
    assert plan.cleanable_bytes == 0 and not plan.should_clean
    check_guarantees(h.writes, h.read())


def test_cleaner_log_gives_up_when_the_log_changes(tmp_path: Path, clock: ManualClock,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    h = harness(tmp_path, clock)
    for i in range(80):
        h.append([(b"k%d" % (i % 4), b"v%d" % i)])
    before = h.read()
    original = Log.replace_segments

    def truncate_first(log, new, old, sizes):  # type: ignore[no-untyped-def]
        log.truncate_to(old[0].base_offset + 1)
        return original(log, new, old, sizes)

    monkeypatch.setattr(Log, "replace_segments", truncate_first)  # the harness's one log
    assert h.clean() is None
    assert h.cleaner.metrics.aborted_passes == 1
    assert h.read() == before[:1]
    assert not list(h.directory.glob(f"{TOPIC}-0/*.cleaned"))


def test_cleaner_log_corrupt_batch_makes_partition_uncleanable(
        tmp_path: Path, clock: ManualClock) -> None:
    h = harness(tmp_path, clock)
    for i in range(80):
        h.append([(b"k%d" % (i % 4), b"v%d" % i)])
    first = h.log.segments[0]
    data = bytearray(first.log_path.read_bytes())
    header = read_batch_header(data)
    data[header.size - 1] ^= 0xFF  # flip a byte of the first batch's last record
    first.log_path.write_bytes(bytes(data))
    assert h.clean() is None
    assert h.cleaner.metrics.uncleanable_partitions_count == 1
    assert h.clean() is None  # skipped from now on
    assert first.log_path.read_bytes() == bytes(data)


def test_cleaner_log_drops_aborted_records_and_never_maps_them(tmp_path: Path,
                                                               clock: ManualClock) -> None:
    h = harness(tmp_path, clock)
    h.append([(b"account", b"committed-balance")])
    aborted = build_batch([(b"account", b"aborted-balance"), (b"other", b"aborted")],
                          timestamp=clock.time_ms(), producer_id=42, producer_epoch=0,
                          base_sequence=0, is_transactional=True)
    h.log.append(memoryview(aborted), validate_batches(aborted, max_batch_bytes=1 << 20),
                 leader_epoch=0, now_ms=clock.time_ms(), log_append_time=False)
    h.log.append_marker(False, 42, 0, 0, 0, clock.time_ms())
    h.log.high_watermark = h.log.log_end_offset
    fill(h, 0, 30)
    stats = h.clean()
    assert stats is not None and stats.counts.aborted_removed == 2
    values = {k: v for _, k, v in h.read() if k in (b"account", b"other")}
    # The aborted value did not supersede the committed one, and is gone itself.
    assert values == {b"account": b"committed-balance"}
    controls = [hdr for hdr in batch_headers(h) if hdr.is_control]
    assert [hdr.producer_id for hdr in controls] == [42]  # markers are kept
