"""Idempotent producers: duplicates, sequence and epoch checks, snapshots, rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, read_batch_header, validate_batches
from ads.storage.config import LogConfig
from ads.storage.errors import (
    CheckpointError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from ads.storage.log import Log, LogAppendInfo
from ads.storage.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)

T0 = 1_700_000_000_000
INT32_MAX = 2**31 - 1


def open_log(path: Path, *, clean: bool = True, config: LogConfig | None = None,
             recovery_point: int = 0) -> Log:
    return Log.open(path, "t", 0, config or LogConfig(segment_bytes=1000), clock=ManualClock(T0),
                    recovery_point=recovery_point, log_start_offset=0, clean_shutdown=clean)


def produce(log: Log, seq: int, records: int = 2, *, pid: int = 7, epoch: int = 0) -> LogAppendInfo:
    data = build_batch([(None, b"v" * 30)] * records, timestamp=T0, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)
    info = log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                      leader_epoch=0, now_ms=T0, log_append_time=False)
    log.high_watermark = log.log_end_offset
    return info


def test_producer_state_duplicate_returns_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = produce(log, 0)
    produce(log, 2)
    size = log.size_bytes
    retry = produce(log, 0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.size_bytes == size and log.log_end_offset == 4
    assert produce(log, 4).first_offset == 4
    log.close()


def test_producer_state_only_last_five_batches_are_deduplicated(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(0, 14, 2):
        produce(log, seq)
    assert produce(log, 4).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 2)  # evicted from the last five: no longer recognised
    log.close()


def test_producer_state_out_of_order_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 5)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 1)  # overlaps the previous batch without being a retry of it
    assert log.log_end_offset == 2
    # A producer unknown here may start anywhere (Kafka since KIP-360); then in order.
    assert produce(log, 3, pid=8).first_offset == 2
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 3, pid=8, records=1)
    log.close()


def test_producer_state_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=0)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 2, epoch=2)  # a new epoch restarts at sequence 0
    assert produce(log, 0, epoch=2).first_offset == 2
    assert not produce(log, 2, epoch=2).duplicate
    assert log.producer_state.last_entry(7).producer_epoch == 2  # type: ignore[union-attr]
    log.close()


def test_producer_state_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    state = log.producer_state
    header = read_batch_header(build_batch([(None, b"x")] * 4, producer_id=7, producer_epoch=0,
                                           base_sequence=INT32_MAX - 1))
    state.update(header, 0, 3)
    assert state.last_entry(7).last_seq == 1  # type: ignore[union-attr]
    follow = read_batch_header(build_batch([(None, b"x")], producer_id=7, producer_epoch=0,
                                           base_sequence=2))
    assert state.check(follow) is None
    header = read_batch_header(build_batch([(None, b"x")], producer_id=9, producer_epoch=0,
                                           base_sequence=0))
    state.update(header, 4, 4)
    state.last_entry(9).batches[-1] = BatchMetadata(INT32_MAX, INT32_MAX, 4, 4, T0)  # type: ignore[union-attr]
    wrapped = read_batch_header(build_batch([(None, b"x")], producer_id=9, producer_epoch=0,
                                            base_sequence=0))
    assert state.check(wrapped) is None
    log.close()


def test_producer_state_batches_of_one_request_checked_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    data = b"".join(build_batch([(None, b"x")] * 2, producer_id=7, producer_epoch=0,
                                base_sequence=seq, timestamp=T0) for seq in (0, 2, 4))
    info = log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                      leader_epoch=0, now_ms=T0, log_append_time=False)
    assert (info.first_offset, info.last_offset) == (0, 5)
    gap = b"".join(build_batch([(None, b"x")], producer_id=7, producer_epoch=0,
                               base_sequence=seq, timestamp=T0) for seq in (6, 8))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(memoryview(gap), validate_batches(gap, max_batch_bytes=1 << 20),
                   leader_epoch=0, now_ms=T0, log_append_time=False)
    assert log.log_end_offset == 6  # nothing of the rejected request was written
    log.close()


def test_producer_state_unknown_producer_after_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0, pid=1)
    for seq in range(0, 20, 2):
        produce(log, seq, pid=2)
    log.delete_records(log.log_end_offset - 2)
    assert log.producer_state.last_entry(1) is None
    # Its state is gone, so its next sequence is taken as it comes (Kafka since KIP-360),
    # and the batches after it are checked against it.
    assert produce(log, 2, pid=1).first_offset == 22
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 6, pid=1)
    assert produce(log, 20, pid=2).first_offset == 24
    log.close()


def test_producer_state_survives_clean_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(0, 10, 2):
        produce(log, seq)
    log.flush()
    log.close()
    snapshots = sorted((tmp_path / "t-0").glob("*.snapshot"))
    assert snapshots[-1].name == f"{10:020d}.snapshot"
    reopened = open_log(tmp_path / "t-0")
    retry = produce(reopened, 8)
    assert retry.duplicate and retry.first_offset == 8
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, 12)
    reopened.close()


def test_producer_state_rebuilt_after_unclean_stop(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(0, 40, 2):  # several rolls, each leaving a snapshot
        produce(log, seq)
    assert log.num_segments > 2
    for segment in log.segments:
        segment.close()
    # Crash: no final snapshot. The recovery point (as checkpointed) is behind the log end.
    reopened = open_log(tmp_path / "t-0", clean=False, recovery_point=5)
    assert reopened.log_end_offset == 40
    assert produce(reopened, 38).duplicate
    assert produce(reopened, 40).first_offset == 40
    reopened.close()
    # No snapshot at all: rebuilt from the log start.
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    again = open_log(tmp_path / "t-0", clean=True)
    assert produce(again, 40).duplicate
    again.close()


def test_producer_state_corrupt_snapshot_falls_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(0, 40, 2):
        produce(log, seq)
    log.close()
    newest = sorted((tmp_path / "t-0").glob("*.snapshot"))[-1]
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF
    newest.write_bytes(bytes(data))
    reopened = open_log(tmp_path / "t-0")
    assert produce(reopened, 38).duplicate
    reopened.close()


def test_producer_state_snapshot_round_trip_and_crc() -> None:
    entry = ProducerStateEntry(5, 3, coordinator_epoch=2, last_offset=90, last_timestamp=T0,
                               current_txn_first_offset=80)
    entry.batches.extend(BatchMetadata(s, s + 1, 70 + s, 71 + s, T0) for s in range(0, 10, 2))
    plain = ProducerStateEntry(6, 0, last_offset=3)
    data = encode_snapshot([entry, plain])
    decoded = decode_snapshot(data)
    assert [(e.producer_id, e.producer_epoch, list(e.batches), e.current_txn_first_offset,
             e.coordinator_epoch) for e in decoded] == [
        (5, 3, list(entry.batches), 80, 2), (6, 0, [], None, -1)]
    for broken in (data[:-1], data + b"\x00", data[:5], b"\x00\x07" + data[2:]):
        with pytest.raises(CheckpointError):
            decode_snapshot(broken)
    flipped = bytearray(data)
    flipped[20] ^= 1
    with pytest.raises(CheckpointError, match="CRC"):
        decode_snapshot(bytes(flipped))


def test_producer_state_remove_expired(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for pid, ts in ((1, T0), (2, T0 + 500)):
        header = read_batch_header(build_batch([(None, b"x")], producer_id=pid,
                                               producer_epoch=0, base_sequence=0, timestamp=ts))
        state.update(header, pid, pid)
    assert state.remove_expired(T0 + 1000, 800) == 1
    assert state.last_entry(1) is None and state.last_entry(2) is not None
    late = read_batch_header(build_batch([(None, b"x")], producer_id=1, producer_epoch=0,
                                         base_sequence=5))
    assert state.check(late) is None  # taken as the first batch of a producer unknown here


def test_producer_state_transactions_track_first_unstable_offset(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    txn = read_batch_header(build_batch([(None, b"x")], producer_id=3, producer_epoch=0,
                                        base_sequence=0, is_transactional=True))
    state.update(txn, 10, 10)
    assert state.first_unstable_offset() == 10
    marker = read_batch_header(build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
                                           producer_id=3, producer_epoch=0,
                                           is_transactional=True, is_control=True))
    assert state.check(marker) is None
    state.update(marker, 11, 11)
    assert state.first_unstable_offset() is None
