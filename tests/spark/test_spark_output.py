"""The commit protocol of a pipeline output directory (ads.spark.output), in phases: stage,
crash at each point, recover, verify that every file is published exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads.spark.output import OutputError, OutputLog


def stage(log: OutputLog, batch: int, names: list[str]) -> Path:
    staging = log.new_staging(batch)
    for name in names:
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    (staging / "_SUCCESS").write_text("")
    (staging / "topic=t" / ".part-0.parquet.crc").write_text("")
    return staging


def published(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.parquet")
                  if not p.relative_to(root).parts[0].startswith("_"))


FILES = ["topic=t/date=2026-01-01/part-0.parquet", "topic=t/date=2026-01-02/part-1.parquet"]


def test_spark_output_commit_publishes(tmp_path: Path) -> None:
    log = OutputLog(tmp_path)
    with log.lock():
        log.recover()
        staging = stage(log, 0, FILES)
        commit = log.commit(0, staging, {"t": {"0": 10}}, {"t": {"0": 10}}, 10, "h:1")
    assert commit.files == tuple(FILES)
    assert published(tmp_path) == FILES
    assert not staging.exists()
    latest = log.latest()
    assert latest is not None and latest.offsets == {"t": {"0": 10}} and latest.batch == 0


def test_spark_output_recover_rolls_forward_after_commit(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    log = OutputLog(tmp_path)
    with log.lock():
        staging = stage(log, 0, FILES)
        monkeypatch.setattr(OutputLog, "_publish", lambda self, commit: None)
        log.commit(0, staging, {"t": {"0": 10}}, {"t": {"0": 10}}, 10, "h:1")  # crash here
        monkeypatch.undo()
    assert published(tmp_path) == []
    # A crash in the middle of publishing: one file moved, one not.
    moved = tmp_path / FILES[0]
    moved.parent.mkdir(parents=True)
    (staging / FILES[0]).rename(moved)
    with log.lock():
        log.recover()
    assert published(tmp_path) == FILES
    assert list(log.staging.iterdir()) == []


def test_spark_output_recover_rolls_back_uncommitted(tmp_path: Path) -> None:
    log = OutputLog(tmp_path)
    with log.lock():
        first = stage(log, 0, FILES[:1])
        log.commit(0, first, {"t": {"0": 5}}, {"t": {"0": 5}}, 5, "h:1")
        stage(log, 1, FILES[1:])  # written, never committed: the loader died here
        (log.commits / "00000000000000000001.tmp").write_text("{")
    with log.lock():
        log.recover()
    assert published(tmp_path) == FILES[:1]
    assert list(log.staging.iterdir()) == []
    assert [p.name for p in log.commits.iterdir()] == ["00000000000000000000.json"]
    latest = log.latest()
    assert latest is not None and latest.offsets == {"t": {"0": 5}}


def test_spark_output_lock_is_exclusive(tmp_path: Path) -> None:
    log = OutputLog(tmp_path)
    with log.lock(), pytest.raises(OutputError, match="in use"), OutputLog(tmp_path).lock():
        pass


def test_spark_output_unreadable_commit(tmp_path: Path) -> None:
    log = OutputLog(tmp_path)
    log.commits.mkdir(parents=True)
    (log.commits / "00000000000000000000.json").write_text('{"version": 9}')
    with pytest.raises(OutputError, match="unknown commit version"):
        log.latest()
