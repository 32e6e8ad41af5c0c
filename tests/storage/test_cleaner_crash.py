"""A crash at any point of a cleaning pass recovers to the old or the new log, never a mix
that loses a key's last value: while the cleaned file is written, at each swap step, and
between any two of the swap's renames."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.storage.cleaner import OffsetMap, clean_log
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


class RenameCrasher:
    """Counts the renames of a cleaning pass and crashes after a chosen number of them."""

    def __init__(self, h: Harness, pristine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.h, self.pristine = h, pristine
        self.renames, self.limit = 0, 1 << 30
        real_rename = Path.rename

        def counting_rename(path: Path, target: Path) -> Path:
            if self.renames >= self.limit:
                raise Crash
            self.renames += 1
            return real_rename(path, target)

        monkeypatch.setattr(Path, "rename", counting_rename)

    def count(self) -> int:
        """Renames of a whole pass (the pass runs to its end)."""
        shutil.copytree(self.h.directory, self.pristine)
        run_pass(self.h)
        return self.renames

    def crash_after(self, renames: int) -> list[Seen]:
        """From the original files, a pass killed after `renames` renames, then recovery."""
        self.limit, self.renames = renames, 0
        shutil.rmtree(self.h.directory)
        shutil.copytree(self.pristine, self.h.directory)
        self.h.open(clean=True)
        with pytest.raises(Crash):
            run_pass(self.h)
        self.limit = 1 << 30
        return crash_and_recover(self.h)


def test_cleaner_crash_between_any_two_renames(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    h, old, new = one_group_log(tmp_path)
    crasher = RenameCrasher(h, tmp_path / "pristine", monkeypatch)
    total = crasher.count()
    assert total >= 9  # .cleaned -> .swap, old -> .deleted, .swap -> live: 3 files each
    outcomes = []
    for crash_at in range(total):
        got = crasher.crash_after(crash_at)
        assert got in (old, new), f"crash after {crash_at} renames"
        check_guarantees(h.writes, got)
        outcomes.append(got == new)
    # Before the first .swap rename the old log survives; once it is done, the new one.
    assert outcomes == sorted(outcomes) and outcomes[0] is False and outcomes[-1] is True


def test_cleaner_crash_with_many_groups_keeps_every_last_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = build(tmp_path / "data", segment_bytes=600)
    active_base = h.log.active_segment.base_offset
    crasher = RenameCrasher(h, tmp_path / "pristine", monkeypatch)
    total = crasher.count()
    assert total > 20
    for crash_at in range(0, total, max(total // 12, 1)):
        got = crasher.crash_after(crash_at)
        check_guarantees(h.writes, got, keep_from_offset=active_base)
        # The recovered log is consistent enough to be cleaned to the end.
        run_pass(h)
        check_guarantees(h.writes, h.read(), keep_from_offset=active_base)
