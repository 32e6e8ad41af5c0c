"""`ads log dump --segment FILE` and `ads log describe --data-dir DIR`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads.cli.main import main
from ads.common.clock import ManualClock
from compaction_support import T0, TOPIC, Harness, compact_config


def build(tmp_path: Path) -> Harness:
    h = Harness(tmp_path / "data", ManualClock(T0), compact_config(delete_retention_ms=5_000))
    h.append([(b"123", b"bill@microsoft.com")])
    h.append([(b"123", b"bill@gmail.com"), (b"7", None)])
    for i in range(40):
        h.append([(b"filler-%d" % i, b"x" * 60)])
    return h


def test_cleaner_logdump_prints_batches_and_records(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    h = build(tmp_path)
    h.clean()
    first = h.log.segments[0]
    assert main(["log", "dump", "--segment", str(first.log_path), "--print-data"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Dumping {first.log_path}\nLog starting offset: 0\n")
    assert "baseOffset: 1 lastOffset: 2 count: 2" in out
    assert f"deleteHorizonMs: {T0 + 5_000}" in out  # the batch that keeps a tombstone
    assert "crcValid: true" in out and "crcValid: false" not in out
    assert "| offset: 1 CreateTime: " in out and "key: 123 payload: bill@gmail.com" in out
    assert "key: 7 payload: null" in out
    assert "bill@microsoft.com" not in out  # compacted away
    assert main(["log", "dump", "--files",
                 f"{first.offset_index.path},{first.time_index.path}"]) == 0
    out = capsys.readouterr().out
    assert f"Dumping {first.time_index.path}\ntimestamp: {T0} offset: " in out


def test_cleaner_logdump_reports_a_torn_tail(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    h = build(tmp_path)
    path = h.log.segments[0].log_path
    torn = tmp_path / "00000000000000000000.log"
    torn.write_bytes(path.read_bytes()[:-10])
    assert main(["log", "dump", "--segment", str(torn)]) == 0
    out = capsys.readouterr().out
    assert "baseOffset: 0 lastOffset: 0 count: 1" in out
    assert "invalid bytes at position" in out


def test_cleaner_logdump_describe_shows_cleanable_ratio(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = build(tmp_path)
    assert main(["log", "describe", "--data-dir", str(h.directory)]) == 0
    before = capsys.readouterr().out
    assert f"Topic: {TOPIC}\tPartition: 0\t" in before
    assert "FirstDirtyOffset: none\tCleanableRatio: 1.000" in before
    h.clean()
    assert main(["log", "describe", "--data-dir", str(h.directory), "--topic", TOPIC]) == 0
    after = capsys.readouterr().out
    assert "CleanableRatio: 0.000" in after and "FirstDirtyOffset: none" not in after
    assert main(["log", "describe", "--data-dir", str(tmp_path / "missing")]) == 2
