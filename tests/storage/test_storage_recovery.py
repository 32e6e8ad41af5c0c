"""Crash recovery: torn and corrupt tails are cut, indexes rebuilt, clean starts not scanned.

Restart tests run in phases: write, "crash" (close files without the clean-shutdown path,
then damage them), reopen, verify.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, iter_batches, validate_batches
from ads.storage.config import LogConfig
from ads.storage.log import Log
from ads.storage.segment import LogSegment

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=150)


def open_log(path: Path, *, clean: bool, recovery_point: int = 0,
             config: LogConfig = CONFIG) -> Log:
    return Log.open(path, "t", 0, config, clock=ManualClock(T0), recovery_point=recovery_point,
                    log_start_offset=0, clean_shutdown=clean)


def write(log: Log, batches: int, records: int = 3) -> None:
    for i in range(batches):
        data = build_batch([(b"k%d" % i, b"v" * 40)] * records, timestamp=T0 + i)
        log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                   leader_epoch=i // 10, now_ms=T0, log_append_time=False)


def crash(log: Log) -> None:
    """Close the files the way a killed process would leave them: no snapshot, no marker."""
    for segment in log.segments:
        segment.close()


def offsets(log: Log) -> list[int]:
    data = log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset,
                    min_one_batch=True).read_bytes()
    return [h.base_offset for _, h in iter_batches(data)]


def last_segment_file(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


@pytest.fixture
def crashed(tmp_path: Path) -> Path:
    path = tmp_path / "t-0"
    log = open_log(path, clean=True)
    write(log, 40)
    assert log.num_segments > 3
    crash(log)
    return path


def _check_recovered(path: Path, expected_end: int) -> Log:
    log = open_log(path, clean=False)
    assert log.log_end_offset == expected_end
    assert offsets(log) == list(range(0, expected_end, 3))
    for offset in range(0, expected_end):
        found = log.read(offset, 1, max_offset=expected_end, min_one_batch=True)
        assert found.first_offset is not None and found.first_offset <= offset
    # Appends continue right after the surviving data.
    write(log, 1)
    assert log.log_end_offset == expected_end + 3
    return log


def test_recovery_truncates_appended_garbage(crashed: Path) -> None:
    last = last_segment_file(crashed)
    size = last.stat().st_size
    with last.open("ab") as f:
        f.write(os.urandom(500))
    log = _check_recovered(crashed, 120)
    log.close()
    data = last.read_bytes()
    assert len(data) > size  # the garbage went, a new batch came
    assert sum(h.size for _, h in iter_batches(data)) == len(data)


def test_recovery_truncates_torn_last_batch(crashed: Path) -> None:
    last = last_segment_file(crashed)
    os.truncate(last, last.stat().st_size - 20)
    _check_recovered(crashed, 117).close()


def test_recovery_truncates_batch_with_bad_crc(crashed: Path) -> None:
    last = last_segment_file(crashed)
    data = bytearray(last.read_bytes())
    positions = [pos for pos, _ in iter_batches(data)]
    data[positions[-1] + 17] ^= 0xFF  # first byte of the CRC field
    last.write_bytes(bytes(data))
    _check_recovered(crashed, 117).close()


def test_recovery_truncates_torn_header_only(crashed: Path) -> None:
    last = last_segment_file(crashed)
    with last.open("ab") as f:
        f.write(b"\x00" * 7)
    _check_recovered(crashed, 120).close()


def test_recovery_of_middle_segment_drops_later_segments(crashed: Path) -> None:
    files = sorted(crashed.glob("*.log"))
    victim = files[1]
    data = bytearray(victim.read_bytes())
    last_pos = [pos for pos, _ in iter_batches(data)][-1]
    data[last_pos + 30] ^= 0x01
    victim.write_bytes(bytes(data))
    next_base = int(files[2].name[:20])
    log = _check_recovered(crashed, next_base - 3)
    assert log.num_segments == 2
    log.close()


def test_recovery_rebuilds_missing_and_corrupt_indexes(crashed: Path) -> None:
    indexes = sorted(crashed.glob("*.index"))
    indexes[0].unlink()
    indexes[1].write_bytes(b"\x00\x00\x00")
    (sorted(crashed.glob("*.timeindex"))[2]).write_bytes(b"\xff" * 24)
    # Clean start: the damaged indexes are found on first use and rebuilt from the log.
    log = open_log(crashed, clean=True)
    assert offsets(log) == list(range(0, 120, 3))
    assert log.fetch_offset_by_timestamp(T0 + 25) == (75, T0 + 25, 2)
    assert indexes[0].exists() and indexes[1].stat().st_size % 8 == 0
    log.close()


def test_recovery_rebuilds_indexes_identically(crashed: Path) -> None:
    before = {p.name: p.read_bytes() for p in crashed.glob("*index")}
    log = open_log(crashed, clean=False)
    log.close()
    after = {p.name: p.read_bytes() for p in crashed.glob("*index")}
    assert before.keys() == after.keys()
    for name in sorted(before)[:-2]:  # sealed segments: byte-identical indexes
        assert before[name] == after[name], name


def test_recovery_writes_over_wrong_indexes(crashed: Path) -> None:
    """Recovery writes an index over in place (no truncation to zero first): whatever the
    file held, longer or as long, it ends up exactly the rebuilt entries."""
    before = {p.name: p.read_bytes() for p in crashed.glob("*index")}
    longer, shuffled = sorted(crashed.glob("*.index"))[1:3]
    time_index = sorted(crashed.glob("*.timeindex"))[1]
    assert len(before[shuffled.name]) >= 16 and before[time_index.name]
    longer.write_bytes(before[longer.name] + bytes(range(16)))
    entries = before[shuffled.name]
    shuffled.write_bytes(b"".join(reversed([entries[i:i + 8]
                                            for i in range(0, len(entries), 8)])))
    time_index.write_bytes(b"\x01" * len(before[time_index.name]))
    log = open_log(crashed, clean=False)
    log.close()
    after = {p.name: p.read_bytes() for p in crashed.glob("*index")}
    for name in sorted(before)[:-2]:
        assert before[name] == after[name], name


def test_recovery_skipped_after_clean_shutdown(crashed: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> int:
        raise AssertionError("a clean start must not scan segments")

    monkeypatch.setattr(LogSegment, "recover", forbidden)
    log = open_log(crashed, clean=True)
    assert log.log_end_offset == 120
    log.close()


def test_recovery_starts_at_recovery_point(crashed: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    scanned: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: object, **kwargs: object) -> int:
        scanned.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    bases = sorted(int(p.name[:20]) for p in crashed.glob("*.log"))
    log = open_log(crashed, clean=False, recovery_point=bases[-2] + 1)
    assert scanned == bases[-2:]
    assert log.recovery_point == log.log_end_offset == 120
    log.close()


def test_recovery_restores_leader_epochs(crashed: Path) -> None:
    (crashed / "leader-epoch-checkpoint").unlink()
    log = open_log(crashed, clean=False)
    assert log.epoch_cache.entries() == [(0, 0), (1, 30), (2, 60), (3, 90)]
    log.close()


def test_recovery_removes_leftover_files(crashed: Path) -> None:
    (crashed / "00000000000000000000.log.deleted").write_bytes(b"old")
    (crashed / "00000000000000000099.log.cleaned").write_bytes(b"half")
    (crashed / "00000000000000000500.index").write_bytes(b"")
    (crashed / "leader-epoch-checkpoint.tmp").write_bytes(b"junk")
    log = open_log(crashed, clean=False)
    names = {p.name for p in crashed.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned", ".tmp")) for n in names)
    assert "00000000000000000500.index" not in names
    log.close()


def test_recovery_completes_interrupted_swap(crashed: Path) -> None:
    files = sorted(crashed.glob("*.log"))
    first, second = int(files[0].name[:20]), int(files[1].name[:20])
    # A cleaner wrote one segment replacing the first two, then crashed mid-swap.
    merged = files[0].read_bytes() + files[1].read_bytes()
    (crashed / f"{first:020d}.log.swap").write_bytes(merged)
    (crashed / f"{first:020d}.index.swap").write_bytes(b"")
    log = open_log(crashed, clean=False)
    assert not (crashed / f"{second:020d}.log").exists()
    assert offsets(log) == list(range(0, 120, 3))
    log.close()


def test_recovery_of_empty_and_missing_directory(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", clean=False)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    log.close()
    log = Log.open(tmp_path / "u-0", "u", 0, CONFIG, clock=ManualClock(T0), recovery_point=0,
                   log_start_offset=42, clean_shutdown=False)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (42, 42, 1)
    assert (tmp_path / "u-0" / "00000000000000000042.log").exists()
    log.close()
