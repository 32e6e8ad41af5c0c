"""The cleaner removes transaction markers as Kafka does: once no data of their transaction
is left, and ``delete.retention.ms`` after a pass found that."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import BatchHeader, build_batch, iter_batches, validate_batches
from compaction_support import T0, Harness, compact_config

RETENTION_MS = 10_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def txn(h: Harness, producer_id: int, sequence: int,
        records: list[tuple[bytes, bytes | None]], *, commit: bool) -> int:
    """One transaction of ``records`` and its marker; the marker's offset."""
    now = h.clock.time_ms()
    data = build_batch(records, timestamp=now, producer_id=producer_id, producer_epoch=0,
                       base_sequence=sequence, is_transactional=True)
    h.log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                 leader_epoch=0, now_ms=now, log_append_time=False)
    marker = h.log.append_marker(commit, producer_id, 0, 0, 0, now).first_offset
    h.log.high_watermark = h.log.log_end_offset
    return marker


def fill(h: Harness, start: int, count: int) -> None:
    for i in range(start, start + count):
        h.append([(b"filler-%d" % i, b"f" * 100)])


def headers(h: Harness) -> list[BatchHeader]:
    out: list[BatchHeader] = []
    for segment in h.log.segments:
        out += [hdr for _, hdr in iter_batches(segment.log_path.read_bytes())]
    return out


def markers(h: Harness) -> dict[int, BatchHeader]:
    return {hdr.base_offset: hdr for hdr in headers(h) if hdr.is_control and hdr.records_count}


def index_entries(h: Harness) -> list[tuple[int, int, int]]:
    return [(a.producer_id, a.first_offset, a.last_offset)
            for s in h.log.segments for a in s.txn_index.entries]


def producer_state(h: Harness) -> dict[int, tuple[int, int, int, int | None]]:
    return {pid: (e.producer_epoch, e.last_seq, e.last_offset, e.current_txn_first_offset)
            for pid, e in h.log.producer_state.producers.items()}


def test_cleaner_txn_markers_go_after_their_data_and_delete_retention(
        tmp_path: Path, clock: ManualClock) -> None:
    h = Harness(tmp_path / "data", clock, compact_config(delete_retention_ms=RETENTION_MS))
    commit_a = txn(h, 42, 0, [(b"k1", b"a1"), (b"k2", b"a2")], commit=True)
    abort_b = txn(h, 43, 0, [(b"k1", b"b1")], commit=False)
    commit_c = txn(h, 42, 2, [(b"k3", b"c3")], commit=True)  # 42's last data: kept
    commit_d = txn(h, 43, 1, [(b"k4", b"d4")], commit=True)  # 43's last data: kept
    h.append([(b"k1", b"new1")])
    h.append([(b"k2", None)])  # supersedes the rest of transaction A
    fill(h, 0, 30)
    assert index_entries(h) == [(43, abort_b - 1, abort_b)]

    # Pass 1 removes the aborted record and the superseded ones: their markers stay (a
    # consumer may be reading the data), and so does the aborted transaction's entry.
    stats = h.clean()
    assert stats is not None and stats.counts.aborted_removed == 1
    assert stats.counts.markers_removed == 0
    kept = markers(h)
    assert {commit_a, abort_b, commit_c, commit_d} <= set(kept)
    assert all(kept[o].delete_horizon_ms is None for o in (commit_a, abort_b))
    assert index_entries(h) == [(43, abort_b - 1, abort_b)]

    # Pass 2 finds transactions A and B empty: their markers get a delete horizon, the
    # aborted transaction has nothing left to hide, so its entry goes.
    clock.advance(1000)
    fill(h, 30, 30)
    stats = h.clean()
    assert stats is not None and stats.counts.markers_removed == 0
    kept = markers(h)
    assert kept[commit_a].delete_horizon_ms == clock.time_ms() + RETENTION_MS
    assert kept[abort_b].delete_horizon_ms == clock.time_ms() + RETENTION_MS
    assert kept[commit_c].delete_horizon_ms is None
    assert kept[commit_d].delete_horizon_ms is None
    assert index_entries(h) == []
    assert stats.earliest_horizon_ms is not None

    # Not yet: a pass before the horizon keeps them.
    clock.advance(RETENTION_MS - 1)
    fill(h, 60, 10)
    h.clean()
    assert {commit_a, abort_b} <= set(markers(h))

    # The horizon passed: the log is due with nothing new written, and they go.
    clock.advance(2)
    state_before = producer_state(h)
    stats = h.clean()
    assert stats is not None and stats.counts.markers_removed == 2
    assert set(markers(h)) == {commit_c, commit_d}
    values = {k: v for o, k, v in h.read()
              if o not in (commit_c, commit_d) and not k.startswith(b"filler")}
    assert values == {b"k1": b"new1", b"k3": b"c3", b"k4": b"d4"}

    # The producer state rebuilt from the log alone is the same, and both producers go on.
    h.manager.shutdown()
    for snapshot in h.directory.glob("*/*.snapshot"):
        snapshot.unlink()
    h.open(clean=False)
    assert producer_state(h) == state_before
    assert state_before[42][1] == 2 and state_before[43][1] == 1
    txn(h, 42, 3, [(b"k5", b"e5")], commit=True)
    txn(h, 43, 2, [(b"k6", b"f6")], commit=False)
    assert h.log.producer_state.first_unstable_offset() is None


def test_cleaner_txn_markers_last_batch_of_a_producer_stays_empty(
        tmp_path: Path, clock: ManualClock) -> None:
    h = Harness(tmp_path / "data", clock, compact_config(delete_retention_ms=RETENTION_MS))
    abort = txn(h, 7, 0, [(b"k", b"aborted")], commit=False)
    fill(h, 0, 30)
    for _ in range(3):
        clock.advance(RETENTION_MS + 1)
        fill(h, 100 + _ * 30, 30)
        h.clean()
    # The aborted batch is the producer's last data batch: it stays, empty, so its
    # sequence survives a rebuild; so its transaction is never empty and the marker stays.
    kept = {hdr.base_offset: hdr for hdr in headers(h) if hdr.producer_id == 7}
    assert kept[abort - 1].records_count == 0
    assert kept[abort].records_count == 1
    assert all(k != b"k" for _, k, _ in h.read())
    assert index_entries(h) == [(7, abort - 1, abort)]
