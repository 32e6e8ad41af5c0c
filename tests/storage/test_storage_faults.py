"""Disk faults on the append path, injected through the file layer (``FaultyFileIO``).

Each test appends acknowledged batches, makes the disk fail in one way (ENOSPC part-way
through a write, a short write, a failing index write, a failing fsync, a failing roll),
checks that the failed append raised ``KafkaStorageError`` and left the log as it was, and
reopens the directory to show every acknowledged batch and nothing of the failed one.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, iter_batches, validate_batches
from ads.storage.config import LogConfig
from ads.storage.errors import KafkaStorageError
from ads.storage.fileio import FaultyFileIO
from ads.storage.log import Log, LogAppendInfo
from ads.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from ads.storage.open_files import OpenFiles

T0 = 1_700_000_000_000
PID = 4000


@pytest.fixture
def io() -> FaultyFileIO:
    return FaultyFileIO()


def open_log(path: Path, io: FaultyFileIO, *, clean: bool = True, recovery_point: int = 0,
             **overrides: object) -> Log:
    config = LogConfig(index_interval_bytes=100).with_overrides(**overrides)
    return Log.open(path / "topic-0", "topic", 0, config, clock=ManualClock(T0),
                    recovery_point=recovery_point, log_start_offset=0, clean_shutdown=clean,
                    files=OpenFiles(io))


def append(log: Log, seq: int, *, records: int = 2, size: int = 300) -> LogAppendInfo:
    """An idempotent producer's batch with sequence ``seq`` (values carry the sequence)."""
    data = build_batch([(None, f"{seq}:".encode() + b"v" * size)] * records, timestamp=T0 + seq,
                       producer_id=PID, producer_epoch=0, base_sequence=seq)
    headers = validate_batches(data, max_batch_bytes=1 << 30)
    info = log.append(memoryview(data), headers, leader_epoch=0, now_ms=T0 + seq,
                      log_append_time=False)
    log.high_watermark = log.log_end_offset
    return info


def sequences_on_disk(log: Log) -> list[tuple[int, int]]:
    """(base offset, base sequence) of every batch readable from the log."""
    result = log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset,
                      min_one_batch=True)
    return [(h.base_offset, h.base_sequence) for _, h in iter_batches(result.read_bytes())]


def state(log: Log) -> tuple[object, ...]:
    segment = log.active_segment
    entry = log.producer_state.last_entry(PID)
    return (log.log_end_offset, log.num_segments, segment.size,
            os.path.getsize(segment.log_path), segment.offset_index.entries,
            os.path.getsize(segment.offset_index.path), segment.time_index.entries,
            os.path.getsize(segment.time_index.path), segment.max_timestamp,
            None if entry is None else (entry.last_seq, entry.last_offset),
            log.epoch_cache.entries())


def reopened(log: Log, io: FaultyFileIO, tmp_path: Path, **overrides: object) -> Log:
    """Close and open again as after a crash: everything past 0 is recovered."""
    log.close()
    return open_log(tmp_path, io, clean=False, **overrides)


def test_storage_enospc_mid_append_leaves_log_unchanged(tmp_path: Path,
                                                        io: FaultyFileIO) -> None:
    log = open_log(tmp_path, io)
    acked = [append(log, seq * 2) for seq in range(5)]
    before = state(log)
    io.space_left(200)  # part of the next batch fits, then the disk is full
    with pytest.raises(KafkaStorageError) as failed:
        append(log, 10)
    assert failed.value.kafka_error == "KAFKA_STORAGE_ERROR"
    assert "No space left" in str(failed.value)
    assert state(log) == before
    with pytest.raises(KafkaStorageError):  # still full: still refused, still unchanged
        append(log, 10)
    assert state(log) == before
    io.space_left(None)
    # The producer retries the same sequence: accepted as new, at the next offset.
    retried = append(log, 10)
    assert (retried.first_offset, retried.duplicate) == (10, False)
    expected = [(i.first_offset, i.first_offset) for i in [*acked, retried]]
    assert sequences_on_disk(log) == expected
    log = reopened(log, io, tmp_path)
    assert sequences_on_disk(log) == expected
    assert log.producer_state.last_entry(PID).last_seq == 11  # type: ignore[union-attr]
    log.close()


def test_storage_short_writes_are_completed(tmp_path: Path, io: FaultyFileIO) -> None:
    log = open_log(tmp_path, io)
    append(log, 0)
    io.short_writes(3)
    info = append(log, 2)
    assert info.first_offset == 2
    assert io.writes > 3
    log = reopened(log, io, tmp_path)
    assert sequences_on_disk(log) == [(0, 0), (2, 2)]
    log.close()


@pytest.mark.parametrize("skip", [1, 2], ids=["offset-index", "time-index"])
def test_storage_failed_index_write_undoes_the_append(tmp_path: Path, io: FaultyFileIO,
                                                      skip: int) -> None:
    log = open_log(tmp_path, io)
    for seq in range(0, 6, 2):
        append(log, seq)
    before = state(log)
    assert before[4] > 0  # batches of 600+ bytes add an index entry each (interval 100)
    # The log write succeeds, then the offset index's or the time index's write fails.
    io.fail_next_write(errno.EIO, skip=skip)
    with pytest.raises(KafkaStorageError):
        append(log, 6)
    assert state(log) == before
    append(log, 6)
    log = reopened(log, io, tmp_path)
    assert sequences_on_disk(log) == [(0, 0), (2, 2), (4, 4), (6, 6)]
    log.close()


def test_storage_enospc_on_a_short_write_is_cut_off(tmp_path: Path, io: FaultyFileIO) -> None:
    log = open_log(tmp_path, io)
    append(log, 0)
    before = state(log)
    io.short_writes(1)
    io.fail_next_write(errno.ENOSPC, skip=1)  # half the batch is written, then ENOSPC
    with pytest.raises(KafkaStorageError):
        append(log, 2)
    assert state(log) == before
    log = reopened(log, io, tmp_path)
    assert sequences_on_disk(log) == [(0, 0)]
    log.close()


def test_storage_failed_fsync_takes_the_log_offline(tmp_path: Path, io: FaultyFileIO) -> None:
    log = open_log(tmp_path, io, flush_messages=1)
    append(log, 0)
    append(log, 2)
    assert log.recovery_point == 4
    io.fail_next_fsync(errno.EIO)
    with pytest.raises(KafkaStorageError, match="fsync failed"):
        append(log, 4)
    assert log.offline
    assert (log.log_end_offset, log.recovery_point) == (4, 4)
    assert os.path.getsize(log.active_segment.log_path) == log.active_segment.size
    with pytest.raises(KafkaStorageError, match="offline"):
        append(log, 4)  # refused even though fsync would work now
    assert sequences_on_disk(log) == [(0, 0), (2, 2)]  # reads go on
    log = reopened(log, io, tmp_path, flush_messages=1)
    assert not log.offline
    assert sequences_on_disk(log) == [(0, 0), (2, 2)]
    assert append(log, 4).first_offset == 4
    log.close()


def test_storage_failed_roll_keeps_the_active_segment(tmp_path: Path, io: FaultyFileIO) -> None:
    log = open_log(tmp_path, io, segment_bytes=2000)
    append(log, 0)
    append(log, 2)
    before = state(log)
    io.fail_next_open(errno.ENOSPC)  # the new segment's .log cannot be created
    with pytest.raises(KafkaStorageError, match="cannot roll"):
        append(log, 4)
    assert state(log) == before
    assert not (log.dir / f"{4:020d}.log").exists()
    io.fail_next_write(errno.ENOSPC)  # the new segment's first write fails
    with pytest.raises(KafkaStorageError):
        append(log, 4)
    assert log.num_segments == 2 and log.active_segment.size == 0
    assert log.log_end_offset == 4
    append(log, 4)
    log = reopened(log, io, tmp_path, segment_bytes=2000)
    assert sequences_on_disk(log) == [(0, 0), (2, 2), (4, 4)]
    log.close()


def test_storage_manager_withholds_clean_marker_after_fsync_failure(tmp_path: Path,
                                                                   io: FaultyFileIO) -> None:
    manager = LogManager([tmp_path], clock=ManualClock(T0), default_config=LogConfig(flush_ms=1000),
                         file_io=io)
    manager.startup()
    log = manager.create_log("topic", 0)
    append(log, 0)
    io.fail_next_fsync(errno.EIO)
    assert manager.flush_dirty(T0 + 10**9) == 0
    assert log.offline and log.recovery_point == 0
    assert manager.cleanup(T0) == 0  # retention skips the offline log instead of failing
    manager.shutdown()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    again = LogManager([tmp_path], clock=ManualClock(T0), default_config=LogConfig())
    again.startup()
    assert again.recovered_logs == 1
    reloaded = again.get_log("topic", 0)
    assert reloaded is not None and sequences_on_disk(reloaded) == [(0, 0)]
    assert append(reloaded, 2).first_offset == 2
    again.shutdown()
