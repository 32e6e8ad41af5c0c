"""Log manager: startup, checkpoints, clean-shutdown marker, deletion, periodic work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, validate_batches
from ads.storage.checkpoint import read_offset_checkpoint
from ads.storage.config import LogConfig
from ads.storage.log import Log
from ads.storage.manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LogManager,
    parse_partition_dir,
)
from ads.storage.segment import LogSegment

T0 = 1_700_000_000_000


def manager(dirs: list[Path], clock: ManualClock | None = None,
            scheduler: Callable[[int, Callable[[], None]], None] | None = None,
            **overrides: object) -> LogManager:
    m = LogManager(dirs, clock=clock or ManualClock(T0), scheduler=scheduler,
                   default_config=LogConfig(segment_bytes=1000).with_overrides(**overrides))
    m.startup()
    return m


def write(log: Log, batches: int = 1) -> None:
    for _ in range(batches):
        data = build_batch([(None, b"m" * 50)] * 2, timestamp=T0)
        log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                   leader_epoch=0, now_ms=T0, log_append_time=False)
    log.high_watermark = log.log_end_offset


def test_manager_parse_partition_dir() -> None:
    assert parse_partition_dir("orders-0") == ("orders", 0)
    assert parse_partition_dir("my.topic-with-dashes-12") == ("my.topic-with-dashes", 12)
    assert parse_partition_dir("__consumer_offsets-49") == ("__consumer_offsets", 49)
    for bad in ("orders", "orders-", "-3", "orders-x", "lost+found"):
        assert parse_partition_dir(bad) is None


def test_manager_clean_shutdown_and_restart(tmp_path: Path) -> None:
    m = manager([tmp_path])
    a = m.create_log("a.b-c", 0)
    b = m.create_log("a.b-c", 1)
    write(a, 10)
    write(b, 1)
    a.delete_records(4)
    m.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("a.b-c", 0): 20, ("a.b-c", 1): 2}
    assert read_offset_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT)[("a.b-c", 0)] == 20

    again = manager([tmp_path])
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert again.recovered_logs == 0
    log = again.get_log("a.b-c", 0)
    assert log is not None
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (4, 20, 20)
    assert {(lg.topic, lg.partition) for lg in again.logs()} == {("a.b-c", 0), ("a.b-c", 1)}
    again.shutdown()


def test_manager_unclean_restart_recovers(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    m = manager([tmp_path])
    log = m.create_log("t", 0)
    write(log, 12)
    m.checkpoint()
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: object, **kwargs: object) -> int:
        recovered.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    # No shutdown: the process died. The directory has no marker.
    again = manager([tmp_path])
    assert again.recovered_logs == 1 and recovered
    assert again.get_log("t", 0).log_end_offset == 24  # type: ignore[union-attr]
    again.shutdown()


def test_manager_delete_log(tmp_path: Path) -> None:
    pending: list[tuple[int, Callable[[], None]]] = []
    m = manager([tmp_path], scheduler=lambda d, task: pending.append((d, task)),
                file_delete_delay_ms=1000)
    log = m.create_log("gone", 0)
    write(log, 3)
    m.delete_log("gone", 0)
    assert m.get_log("gone", 0) is None
    renamed = [p.name for p in tmp_path.iterdir() if p.is_dir()]
    assert len(renamed) == 1 and renamed[0].startswith("gone-0.")
    assert renamed[0].endswith("-delete")
    delay, task = pending[-1]
    assert delay == 1000
    task()
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


def test_manager_startup_removes_delete_dirs_and_ignores_junk(tmp_path: Path) -> None:
    (tmp_path / "old-0.0123abcd-delete").mkdir()
    (tmp_path / "old-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "meta.properties").write_text("node.id=1\n")
    m = manager([tmp_path])
    assert not (tmp_path / "old-0.0123abcd-delete").exists()
    assert (tmp_path / "lost+found").exists()
    assert m.logs() == []
    m.shutdown()


def test_manager_spreads_logs_over_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    m = manager(dirs)
    for p in range(4):
        m.create_log("t", p)
    assert len(list(dirs[0].iterdir())) == 2 and len(list(dirs[1].iterdir())) == 2
    assert m.create_log("t", 0) is m.get_log("t", 0)
    m.shutdown()
    again = manager(dirs)
    assert len(again.logs()) == 4
    again.shutdown()


def test_manager_flush_dirty_by_flush_ms(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    m = manager([tmp_path], clock=clock, flush_ms=1000)
    log = m.create_log("t", 0)
    write(log, 2)
    assert m.flush_dirty(clock.time_ms()) == 0
    clock.advance(1000)
    assert m.flush_dirty(clock.time_ms()) == 1
    assert log.recovery_point == 4
    m.shutdown()


def test_manager_cleanup_and_update_config(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    m = manager([tmp_path], clock=clock)
    log = m.create_log("t", 0)
    write(log, 30)
    assert m.cleanup(T0 + 10**6) == 0
    m.update_config("t", LogConfig(segment_bytes=1000, retention_ms=1000))
    assert log.config.retention_ms == 1000
    assert m.cleanup(T0 + 10**6) > 0
    assert log.num_segments == 1
    m.shutdown()


def test_manager_corrupt_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    m = manager([tmp_path])
    write(m.create_log("t", 0), 5)
    m.shutdown()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("garbage")
    again = manager([tmp_path])
    assert again.get_log("t", 0).log_end_offset == 10  # type: ignore[union-attr]
    again.shutdown()
