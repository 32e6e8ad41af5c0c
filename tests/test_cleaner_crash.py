"""A crash at any point of a cleaning pass recovers to the old or the new log, never a mix
that loses a key's last value: while the cleaned file is written, at each swap step, and
between any two of the swap's renames."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ads.storage.cleaner import OffsetMap, clean_log
from ads.storage.clock import ManualClock
from compaction_support import T0, TOPIC, Harness, Seen, check_guarantees, compact_config


@pytest.fixture(autouse=True)
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # A killed process loses nothing the kernel has; only the order of renames matters here.
    monkeypatch.setattr(os, "fsync", lambda fd: None)


class Crash(BaseException):
    """Stands for kill -9: nothing after it runs (not even ``except Exception``)."""


def build(directory: Path, *, segment_bytes: int) -> Harness:
    h = Harness(directory, ManualClock(T0), compact_config(segment_bytes=segment_bytes))
    for i in range(120):
        h.append([(b"key-%d" % (i % 9), b"value-%d" % i)])
        if i % 10 == 9:
            h.append([(b"key-%d" % (i % 9), None)])
    return h


def run_pass(h: Harness, **kwargs: object) -> None:
    plan = h.cleaner.plan(h.log)
    clean_log(plan, OffsetMap(1 << 16), clock=h.clock, run_on_owner=lambda f: f(),
              io_buffer_size=256, **kwargs)  # type: ignore[arg-type]


def expected_after_clean(tmp_path: Path, source: Path) -> list[Seen]:
    copy = tmp_path / "reference"
    shutil.copytree(source, copy)
    h = Harness(copy, ManualClock(T0), compact_config(segment_bytes=SEGMENT_BYTES_ONE_GROUP))
    run_pass(h)
    return h.read()


SEGMENT_BYTES_ONE_GROUP = 100_000  # the whole sealed log fits one cleaned segment


def crash_and_recover(h: Harness) -> list[Seen]:
    """Drop every in-memory object as a killed process would, and open the files again."""
    assert not list(h.directory.glob(f"{TOPIC}-0/*.tmp"))
    h.open(clean=False)
    leftovers = [p.name for p in (h.directory / f"{TOPIC}-0").iterdir()
                 if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    return h.read()


def one_group_log(tmp_path: Path) -> tuple[Harness, list[Seen], list[Seen]]:
    h = build(tmp_path / "data", segment_bytes=SEGMENT_BYTES_ONE_GROUP)
    h.log.roll()
    h.append([(b"head", b"stays in the active segment")])
    old = h.read()
    new = expected_after_clean(tmp_path, h.directory)
    assert len(new) < len(old)
    return h, old, new


@pytest.mark.parametrize("step", ["cleaned", "swapped", "finished"])
def test_cleaner_crash_at_each_swap_step(tmp_path: Path, step: str) -> None:
    h, old, new = one_group_log(tmp_path)

    def crash(at: str) -> None:
        if at == step:
            raise Crash

    with pytest.raises(Crash):
        run_pass(h, on_swap=crash)
    got = crash_and_recover(h)
    assert got == (old if step == "cleaned" else new)
    check_guarantees(h.writes, got)


@pytest.mark.parametrize("chunks", [1, 3, 10])
def test_cleaner_crash_while_writing_the_cleaned_segment(tmp_path: Path, chunks: int) -> None:
    h, old, _ = one_group_log(tmp_path)
    reads = 0

    def crash_after_chunks() -> None:
        nonlocal reads
        reads += 1
        if reads > chunks:
            raise Crash

    with pytest.raises(Crash):
        run_pass(h, check_abort=crash_after_chunks)
    assert crash_and_recover(h) == old


def test_cleaner_crash_between_any_two_renames(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    h, old, new = one_group_log(tmp_path)
    pristine = tmp_path / "pristine"
    shutil.copytree(h.directory, pristine)
    renames = 0
    real_rename = Path.rename

    def counting_rename(self: Path, target: Path) -> Path:  # type: ignore[override]
        nonlocal renames, limit
        if renames >= limit:
            raise Crash
        renames += 1
        return real_rename(self, target)

    limit = 1 << 30
    monkeypatch.setattr(Path, "rename", counting_rename)
    run_pass(h)
    total = renames
    assert total >= 9  # .cleaned -> .swap, old -> .deleted, .swap -> live: 3 files each
    outcomes = []
    for crash_at in range(total):
        limit = crash_at
        shutil.rmtree(h.directory)
        shutil.copytree(pristine, h.directory)
        h.open(clean=True)
        renames = 0
        with pytest.raises(Crash):
            run_pass(h)
        crashed_at, limit = limit, 1 << 30
        got = crash_and_recover(h)
        assert got in (old, new), f"crash after {crashed_at} renames"
        check_guarantees(h.writes, got)
        outcomes.append(got == new)
    # Before the first .swap rename the old log survives; once it is done, the new one.
    assert outcomes == sorted(outcomes) and outcomes[0] is False and outcomes[-1] is True


def test_cleaner_crash_with_many_groups_keeps_every_last_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = build(tmp_path / "data", segment_bytes=600)
    pristine = tmp_path / "pristine"
    shutil.copytree(h.directory, pristine)
    active_base = h.log.active_segment.base_offset
    renames = 0
    real_rename = Path.rename
    limit = 1 << 30

    def counting_rename(self: Path, target: Path) -> Path:  # type: ignore[override]
        nonlocal renames, limit
        if renames >= limit:
            raise Crash
        renames += 1
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", counting_rename)
    run_pass(h)
    total = renames
    assert total > 20
    for crash_at in range(0, total, max(total // 12, 1)):
        limit = crash_at
        shutil.rmtree(h.directory)
        shutil.copytree(pristine, h.directory)
        h.open(clean=True)
        renames = 0
        with pytest.raises(Crash):
            run_pass(h)
        limit = 1 << 30
        got = crash_and_recover(h)
        check_guarantees(h.writes, got, keep_from_offset=active_base)
        # The recovered log is consistent enough to be cleaned to the end.
        run_pass(h)
        check_guarantees(h.writes, h.read(), keep_from_offset=active_base)
