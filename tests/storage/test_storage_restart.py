"""Restarts of the log manager: what a clean shutdown records, what the next start trusts,
and what it recovers when it cannot trust it.

A clean shutdown makes every log durable with one sync per directory and records each log's
end in the recovery-point checkpoint; the next start reads no segment file. A crash, a torn
tail, or a checkpoint that is unreadable or misses a log, sends the start back to recovery.
Tests run in phases: write, stop (cleanly or by "crashing": the directories are unlocked and
nothing is closed, as after a SIGKILL), damage, start again, verify.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, iter_batches, validate_batches
from ads.storage.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from ads.storage.config import LogConfig
from ads.storage.fileio import FaultyFileIO
from ads.storage.log import Log
from ads.storage.manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LogManager,
)
from ads.storage.producer_state import SNAPSHOT_SUFFIX

T0 = 1_700_000_000_000
PID = 7000
TOPIC = "restart"
PARTITIONS = 4


def start(dirs: list[Path], io: FaultyFileIO | None = None) -> LogManager:
    m = LogManager(dirs, clock=ManualClock(T0),
                   default_config=LogConfig(segment_bytes=1000, index_interval_bytes=100),
                   file_io=io or FaultyFileIO())
    m.lock_dirs()
    m.startup()
    return m


def crash(m: LogManager) -> None:
    """The process dies: nothing is flushed, closed or checkpointed by the shutdown; what
    was written stays in the page cache."""
    m.unlock_dirs()


def write(log: Log, batches: int, *, producer: bool = False) -> None:
    for _ in range(batches):
        end = log.log_end_offset
        data = build_batch([(b"k%d" % end, b"v" * 60)] * 2, timestamp=T0 + end,
                           **({"producer_id": PID, "producer_epoch": 0, "base_sequence": end}
                              if producer else {}))
        log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                   leader_epoch=0, now_ms=T0, log_append_time=False)
    log.high_watermark = log.log_end_offset


def batch_offsets(log: Log) -> list[int]:
    data = log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset,
                    min_one_batch=True).read_bytes()
    return [h.base_offset for _, h in iter_batches(data)]


def logs_of(m: LogManager) -> dict[int, Log]:
    return {lg.partition: lg for lg in m.logs() if lg.topic == TOPIC}


def filled(dirs: list[Path], io: FaultyFileIO | None = None) -> tuple[LogManager, dict[int, int]]:
    """A manager whose partitions hold 3, 8, 13, ... batches (several segments each)."""
    m = start(dirs, io)
    ends = {}
    for p in range(PARTITIONS):
        log = m.create_log(TOPIC, p)
        write(log, 3 + 5 * p)
        ends[p] = log.log_end_offset
    return m, ends


def tear(log_dir: Path, partition: int, end: int) -> int:
    """Appends the first half of a batch at offset ``end`` to the partition's newest segment
    file, as a write cut short by a crash leaves it; returns the file's size before."""
    segment = sorted((log_dir / f"{TOPIC}-{partition}").glob("*.log"))[-1]
    size = segment.stat().st_size
    batch = build_batch([(b"torn", b"t" * 200)], base_offset=end, timestamp=T0)
    with segment.open("ab") as f:
        f.write(batch[: len(batch) // 2])
    return size


def test_restart_clean_start_reads_no_segment_file(tmp_path: Path) -> None:
    m, ends = filled([tmp_path])
    logs_of(m)[1].delete_records(4)
    before = {p: (lg.log_start_offset, lg.high_watermark, batch_offsets(lg), lg.num_segments)
              for p, lg in logs_of(m).items()}
    m.shutdown()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        (TOPIC, p): end for p, end in ends.items()}

    again = start([tmp_path])
    assert again.recovered_logs == 0
    # Nothing went through the open-file cache: no .log was read to find where it ends.
    assert again.open_files.opens == 0
    logs = logs_of(again)
    assert {p: lg.log_end_offset for p, lg in logs.items()} == ends
    assert {p: lg.recovery_point for p, lg in logs.items()} == ends
    assert {p: (lg.log_start_offset, lg.high_watermark, batch_offsets(lg), lg.num_segments)
            for p, lg in logs.items()} == before
    # The indexes, loaded on first use, find every batch; appends go on at the end.
    last = logs[3]
    for offset in range(0, ends[3], 2):
        assert last.read(offset, 1, max_offset=ends[3], min_one_batch=True).first_offset == offset
    write(last, 1)
    assert batch_offsets(last)[-1] == ends[3]
    again.shutdown()


def test_restart_clean_shutdown_syncs_each_directory_once(tmp_path: Path) -> None:
    io = FaultyFileIO()
    dirs = [tmp_path / "a", tmp_path / "b"]
    m, ends = filled(dirs, io)
    io.fsyncs = 0  # count those of the shutdown alone
    m.shutdown()
    assert io.fsyncs == 0 and io.syncfs_calls == 2
    points: dict[tuple[str, int], int] = {}
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        points |= read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
    assert points == {(TOPIC, p): end for p, end in ends.items()}
    again = start(dirs)
    assert again.recovered_logs == 0
    assert {p: lg.log_end_offset for p, lg in logs_of(again).items()} == ends
    again.shutdown()


def test_restart_without_syncfs_fsyncs_only_changed_logs(tmp_path: Path) -> None:
    io = FaultyFileIO()
    io.has_syncfs = False
    m, ends = filled([tmp_path], io)
    for log in m.logs():
        log.flush()
    write(logs_of(m)[2], 1)
    ends[2] += 2
    io.fsyncs = 0
    m.shutdown()
    # The one log with unflushed data: its segment's files (.log, .index, .timeindex).
    assert 1 <= io.fsyncs <= 3 and io.syncfs_calls == 0
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    again = start([tmp_path])
    assert again.recovered_logs == 0 and again.open_files.opens == 0
    assert {p: lg.log_end_offset for p, lg in logs_of(again).items()} == ends
    again.shutdown()


def test_restart_failed_sync_at_shutdown_means_recovery(tmp_path: Path) -> None:
    io = FaultyFileIO()
    m, ends = filled([tmp_path], io)
    points = {(lg.topic, lg.partition): lg.recovery_point for lg in m.logs()}
    assert all(points[(TOPIC, p)] < end for p, end in ends.items())  # rolls flushed some
    io.fail_next_fsync(errno.EIO)  # the shutdown's syncfs
    m.shutdown()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    # Nothing more was known to be on disk: the recovery points stayed where they were.
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == points
    again = start([tmp_path])
    assert again.recovered_logs == PARTITIONS
    assert {p: lg.log_end_offset for p, lg in logs_of(again).items()} == ends
    again.shutdown()


def test_restart_crash_after_clean_start_truncates_torn_tail(tmp_path: Path) -> None:
    m, ends = filled([tmp_path])
    m.shutdown()
    m = start([tmp_path])
    assert m.recovered_logs == 0
    logs = logs_of(m)
    write(logs[0], 2)
    logs[0].flush()  # acknowledged and flushed: must survive whatever follows
    write(logs[0], 1)  # acknowledged, not flushed (the page cache keeps it)
    ends[0] += 6
    m.checkpoint()
    crash(m)
    good_size = tear(tmp_path, 0, ends[0])

    again = start([tmp_path])
    assert again.recovered_logs == PARTITIONS  # the directory had no clean-shutdown marker
    logs = logs_of(again)
    assert {p: lg.log_end_offset for p, lg in logs.items()} == ends
    assert batch_offsets(logs[0])[-4:] == [ends[0] - 8, ends[0] - 6, ends[0] - 4, ends[0] - 2]
    assert sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))[-1].stat().st_size == good_size
    # Recovered logs were synced together and checkpointed at once: a second crash now
    # starts from their ends.
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        (TOPIC, p): end for p, end in ends.items()}
    write(logs[0], 1)
    assert batch_offsets(logs[0])[-1] == ends[0]
    again.shutdown()


def test_restart_crash_recovery_leaves_intact_indexes_alone(tmp_path: Path) -> None:
    m, _ = filled([tmp_path])
    m.shutdown()
    m = start([tmp_path])
    m.checkpoint()
    crash(m)
    directory = tmp_path / f"{TOPIC}-3"
    indexes = sorted(directory.glob("*.index")) + sorted(directory.glob("*.timeindex"))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in indexes}
    os.utime(directory / sorted(p.name for p in directory.glob("*.log"))[-1])
    again = start([tmp_path])
    assert again.recovered_logs == PARTITIONS
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in indexes} == before
    again.shutdown()


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_restart_unreadable_checkpoint_after_clean_shutdown_recovers_all(
        tmp_path: Path, damage: str) -> None:
    m, ends = filled([tmp_path])
    m.shutdown()
    checkpoint = tmp_path / RECOVERY_POINT_CHECKPOINT
    if damage == "garbage":
        checkpoint.write_text("0\n4\nnot a checkpoint\n")
    else:
        checkpoint.unlink()
    good_size = tear(tmp_path, 2, ends[2])  # written after the marker: only recovery sees it
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    again = start([tmp_path])
    assert again.recovered_logs == PARTITIONS
    assert {p: lg.log_end_offset for p, lg in logs_of(again).items()} == ends
    assert sorted((tmp_path / f"{TOPIC}-2").glob("*.log"))[-1].stat().st_size == good_size
    assert batch_offsets(logs_of(again)[2]) == list(range(0, ends[2], 2))
    again.shutdown()


def test_restart_log_missing_from_checkpoint_is_recovered(tmp_path: Path) -> None:
    m, ends = filled([tmp_path])
    m.shutdown()
    checkpoint = tmp_path / RECOVERY_POINT_CHECKPOINT
    points = read_offset_checkpoint(checkpoint)
    del points[(TOPIC, 1)]
    write_offset_checkpoint(checkpoint, points)
    good_size = tear(tmp_path, 1, ends[1])

    again = start([tmp_path])
    assert again.recovered_logs == 1
    assert {p: lg.log_end_offset for p, lg in logs_of(again).items()} == ends
    assert sorted((tmp_path / f"{TOPIC}-1").glob("*.log"))[-1].stat().st_size == good_size
    again.shutdown()


def test_restart_recorded_end_the_segment_contradicts_is_read_from_it(tmp_path: Path) -> None:
    m, ends = filled([tmp_path])
    m.shutdown()
    checkpoint = tmp_path / RECOVERY_POINT_CHECKPOINT
    points = read_offset_checkpoint(checkpoint)
    active_base = int(sorted((tmp_path / f"{TOPIC}-3").glob("*.log"))[-1].stem)
    points[(TOPIC, 3)] = active_base  # an empty active segment, but it holds batches
    write_offset_checkpoint(checkpoint, points)

    again = start([tmp_path])
    assert {p: lg.log_end_offset for p, lg in logs_of(again).items()} == ends
    again.shutdown()


def test_restart_producer_state_survives_without_new_snapshots(tmp_path: Path) -> None:
    m = start([tmp_path])
    idempotent = m.create_log(TOPIC, 0)
    plain = m.create_log(TOPIC, 1)
    write(idempotent, 3, producer=True)
    write(plain, 3)
    m.shutdown()

    def snapshots(p: int) -> dict[str, int]:
        return {s.name: s.stat().st_ino
                for s in (tmp_path / f"{TOPIC}-{p}").glob(f"*{SNAPSHOT_SUFFIX}")}

    written = snapshots(0)
    assert written and not snapshots(1)  # no producers, no snapshot
    for _ in range(2):  # twice: a start after a shutdown that wrote no snapshot
        m = start([tmp_path])
        entry = m.get_log(TOPIC, 0).producer_state.last_entry(PID)  # type: ignore[union-attr]
        assert entry is not None and entry.last_seq == 5  # 3 batches of 2 from sequence 0
        assert not m.get_log(TOPIC, 1).producer_state.producers  # type: ignore[union-attr]
        m.shutdown()
        assert snapshots(0) == written and not snapshots(1)
    m = start([tmp_path])
    retried = build_batch([(b"k4", b"v" * 60)] * 2, timestamp=T0 + 4, producer_id=PID,
                          producer_epoch=0, base_sequence=4)
    log = m.get_log(TOPIC, 0)
    assert log is not None
    info = log.append(memoryview(retried), validate_batches(retried, max_batch_bytes=1 << 20),
                      leader_epoch=0, now_ms=T0, log_append_time=False)
    assert info.duplicate and info.first_offset == 4
    m.shutdown()


def test_restart_other_checkpoints_kept_across_clean_restart(tmp_path: Path) -> None:
    m, ends = filled([tmp_path])
    logs_of(m)[2].high_watermark = ends[2] - 2
    logs_of(m)[3].delete_records(6)
    m.shutdown()
    starts = read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT)
    watermarks = read_offset_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT)
    again = start([tmp_path])
    logs = logs_of(again)
    assert {(TOPIC, p): lg.log_start_offset for p, lg in logs.items()} == starts
    assert {(TOPIC, p): lg.high_watermark for p, lg in logs.items()} == watermarks
    assert logs[3].log_start_offset == 6 and logs[2].high_watermark == ends[2] - 2
    again.shutdown()
