"""The broker's bound on open segment files (`ads.storage.open_files`): many logs share a
few descriptors, a file closed by the cache is opened again where it now is and without
losing a byte, a file region being sent keeps its descriptor, and flushes reach files the
cache closed since their writes."""

from __future__ import annotations

import os
from pathlib import Path

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, decode_records, iter_batches, validate_batches
from ads.storage.config import LogConfig
from ads.storage.fileio import FaultyFileIO
from ads.storage.files import CLEANED_SUFFIX
from ads.storage.log import Log
from ads.storage.open_files import OpenFiles, default_limit, process_limit
from ads.storage.segment import LogSegment

T0 = 1_700_000_000_000


def _open(path: Path, files: OpenFiles, **overrides: object) -> Log:
    config = LogConfig(index_interval_bytes=100).with_overrides(**overrides)
    return Log.open(path, path.name, 0, config, clock=ManualClock(T0), recovery_point=0,
                    log_start_offset=0, clean_shutdown=True, files=files)


def _append(log: Log, value: bytes) -> None:
    data = build_batch([(None, value)] * 3, timestamp=T0)
    log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
               leader_epoch=0, now_ms=T0, log_append_time=False)
    log.high_watermark = log.log_end_offset


def _values(log: Log) -> list[bytes]:
    read = log.read(0, 1 << 20, max_offset=log.log_end_offset, min_one_batch=True)
    return _batch_values(read.read_bytes())


def _batch_values(data: bytes) -> list[bytes]:
    out = []
    for pos, header in iter_batches(data):
        out += [r.value or b"" for r in decode_records(data[pos:pos + header.size],
                                                        max_uncompressed_bytes=1 << 20)]
    return out


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_open_files_many_logs_share_a_few_descriptors(tmp_path: Path) -> None:
    files = OpenFiles(limit=6)
    before = _open_fds()
    logs = [_open(tmp_path / f"t{n}-0", files, segment_bytes=150) for n in range(40)]
    for rounds in range(3):  # several segments each: every file of every log is used
        for n, log in enumerate(logs):
            _append(log, b"%d-%d" % (n, rounds))
            assert len(files) <= 6
    assert all(log.num_segments >= 2 for log in logs)
    assert _open_fds() - before <= 6
    for n, log in enumerate(logs):
        assert _values(log) == [b"%d-%d" % (n, r) for r in range(3) for _ in range(3)]
    assert len(files) <= 6 and files.evictions > 100
    for log in logs:
        log.close()
    assert len(files) == 0


def test_open_files_reopened_log_keeps_every_byte(tmp_path: Path) -> None:
    files = OpenFiles(limit=2)
    log, other = _open(tmp_path / "a-0", files), _open(tmp_path / "b-0", files)
    for i in range(20):  # each append to one closes the other's files
        _append(log, b"a%d" % i)
        _append(other, b"b%d" % i)
    assert _values(log) == [b"a%d" % i for i in range(20) for _ in range(3)]
    assert _values(other) == [b"b%d" % i for i in range(20) for _ in range(3)]
    log.close()
    other.close()
    # Reopened from disk (a clean start): the indexes written through reopened files hold.
    again = _open(tmp_path / "a-0", OpenFiles(limit=2))
    assert _values(again) == [b"a%d" % i for i in range(20) for _ in range(3)]
    assert again.fetch_offset_by_timestamp(T0) is not None
    again.close()


def test_open_files_region_in_flight_keeps_its_descriptor(tmp_path: Path) -> None:
    files = OpenFiles(limit=1)
    log, other = _open(tmp_path / "a-0", files), _open(tmp_path / "b-0", files)
    _append(log, b"kept")
    region = log.read(0, 1 << 20, max_offset=log.log_end_offset, min_one_batch=True).regions[0]
    _append(other, b"evicts")  # the cache closes a-0's log: the region still holds it
    assert os.fstat(region.fd).st_size > 0
    assert _batch_values(region.read_bytes()) == [b"kept"] * 3
    log.close()
    other.close()


def test_open_files_reopen_follows_renames(tmp_path: Path) -> None:
    files = OpenFiles(limit=1)
    directory = tmp_path / "c-0"
    directory.mkdir()
    segment = LogSegment.create(directory, 0, LogConfig(), ManualClock(T0), files=files,
                                file_suffix=CLEANED_SUFFIX)
    data = build_batch([(None, b"x")], timestamp=T0)
    segment.append(data, 0, 0, T0, 0)
    files.file(tmp_path / "elsewhere", os.O_RDONLY | os.O_CREAT).handle()  # evicts it
    segment.change_file_suffix(CLEANED_SUFFIX, "")
    data = build_batch([(None, b"y")], base_offset=1, timestamp=T0)
    segment.append(data, 1, 1, T0, 1)  # opened again under its new name
    assert sorted(p.name for p in directory.iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log",
        "00000000000000000000.timeindex"]
    assert [b.base_offset for _, b in iter_batches(segment.read(0, 1 << 20).read_bytes())] == [
        0, 1]
    segment.close()


def test_open_files_flush_reaches_a_file_closed_since_its_write(tmp_path: Path) -> None:
    io = FaultyFileIO()
    files = OpenFiles(io, limit=1)
    log, other = _open(tmp_path / "a-0", files), _open(tmp_path / "b-0", files)
    _append(log, b"dirty")
    _append(other, b"evicts")
    synced = io.fsyncs
    log.flush()
    assert io.fsyncs > synced  # reopened to be synced
    synced = io.fsyncs
    log.flush()
    assert io.fsyncs == synced  # nothing written since
    log.close()
    other.close()


def test_open_files_default_is_half_the_process_limit() -> None:
    assert default_limit() == max(16, min(process_limit() // 2, process_limit() - 64))
