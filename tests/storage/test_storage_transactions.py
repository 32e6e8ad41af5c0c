"""Transactions in the log: markers, the last stable offset, the `.txnindex` of aborted
transactions (Kafka's 34-byte entries, a torn tail cut, entries rebuilt by recovery across
segment rolls, truncation)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, validate_batches
from ads.storage.config import LogConfig
from ads.storage.errors import TransactionCoordinatorFencedError
from ads.storage.log import Log
from ads.storage.open_files import OpenFiles
from ads.storage.txn_index import AbortedTxn, TransactionIndex

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600)


def open_log(path: Path, *, clean: bool) -> Log:
    log = Log.open(path, "t", 0, CONFIG, clock=ManualClock(T0), recovery_point=0,
                   log_start_offset=0, clean_shutdown=clean)
    log.high_watermark = log.log_end_offset
    return log


def txn_write(log: Log, pid: int, seq: int, n: int = 2) -> None:
    data = build_batch([(b"k", b"v" * 30)] * n, timestamp=T0, producer_id=pid,
                       producer_epoch=0, base_sequence=seq, is_transactional=True)
    log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
               leader_epoch=0, now_ms=T0, log_append_time=False)
    log.high_watermark = log.log_end_offset


def end(log: Log, pid: int, commit: bool) -> None:
    log.append_marker(commit, pid, 0, 0, 0, T0)
    log.high_watermark = log.log_end_offset


def test_storage_txn_index_layout_and_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, OpenFiles())
    index.append(AbortedTxn(7, 10, 20, 21))
    index.append(AbortedTxn(8, 15, 30, 31))
    index.append(AbortedTxn(8, 15, 30, 31))  # replayed: ignored
    index.close()
    assert path.read_bytes() == (struct.pack(">hqqqq", 0, 7, 10, 20, 21)
                                 + struct.pack(">hqqqq", 0, 8, 15, 30, 31))
    with path.open("ab") as f:
        f.write(b"\x00\x00\x00")  # a torn third entry
    reopened = TransactionIndex(path, OpenFiles())
    assert reopened.collect(21, 100) == [AbortedTxn(8, 15, 30, 31)]
    assert reopened.collect(0, 15) == [AbortedTxn(7, 10, 20, 21)]
    assert path.stat().st_size == 68
    reopened.truncate_to(30)
    assert reopened.entries == [AbortedTxn(7, 10, 20, 21)]
    assert path.stat().st_size == 34


def test_storage_txn_lso_and_aborted_index_rebuilt_after_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", clean=False)
    txn_write(log, 1, 0)          # 0-1, producer 1
    txn_write(log, 2, 0)          # 2-3, producer 2
    assert log.last_stable_offset == 0
    end(log, 1, commit=False)     # 4: abort of producer 1
    assert log.last_stable_offset == 2
    for i in range(6):            # enough to roll segments (segment.bytes 600)
        txn_write(log, 2, 2 + 2 * i)
    end(log, 2, commit=False)     # producer 2 aborted: first offset 2, marker in a later one
    txn_write(log, 3, 0)
    end(log, 3, commit=True)
    assert log.last_stable_offset == log.log_end_offset
    assert log.num_segments > 1
    expected = [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 17, 18)]
    assert log.aborted_transactions(0, log.log_end_offset) == expected
    # A fetch from past the first abort still learns of producer 2's, begun before it.
    assert log.aborted_transactions(5, 10) == expected[1:]
    directory = log.dir
    for segment in log.segments:  # a kill -9: no snapshot, no clean-shutdown marker
        segment.close()
    for index in directory.glob("*.txnindex"):
        index.unlink()
    reopened = open_log(directory, clean=False)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == expected
    assert reopened.last_stable_offset == reopened.log_end_offset
    # Truncation below the second abort drops its entry and reopens the transaction.
    reopened.truncate_to(17)
    assert reopened.aborted_transactions(0, 17) == expected[:1]
    assert reopened.producer_state.first_unstable_offset() == 2
    reopened.close()


def test_storage_txn_marker_of_an_older_coordinator_is_fenced(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", clean=False)
    txn_write(log, 9, 0)
    log.append_marker(True, 9, 0, 5, 0, T0)  # coordinator epoch 5
    txn_write(log, 9, 2)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(False, 9, 0, 4, 0, T0)
    end_before = log.log_end_offset
    directory = log.dir
    for segment in log.segments:  # a kill -9: the epoch comes back from the marker
        segment.close()
    reopened = open_log(directory, clean=False)
    assert reopened.log_end_offset == end_before
    with pytest.raises(TransactionCoordinatorFencedError):
        reopened.append_marker(False, 9, 0, 4, 0, T0)
    reopened.append_marker(False, 9, 0, 6, 0, T0)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [
        AbortedTxn(9, 3, 5, 6)]
    reopened.close()


def test_storage_lso_held_until_marker_replicated(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", clean=True)
    txn_write(log, 5, 0)  # offsets 0-1
    log.high_watermark = 2
    log.append_marker(True, 5, 0, 0, 0, T0)  # offset 2, not yet below the high watermark
    # The transaction has ended in this log, but a new leader without the marker would
    # have it open: read_committed consumers must not read past its start yet.
    assert log.last_stable_offset == 0
    log.high_watermark = 3
    assert log.last_stable_offset == 3
    # Forgotten once replicated, whether or not anyone asked for the LSO meanwhile (a
    # follower never is asked), so a lower high watermark does not bring it back.
    txn_write(log, 6, 0)  # offsets 3-4
    log.high_watermark = 5
    log.append_marker(False, 6, 0, 0, 0, T0)  # offset 5
    log.high_watermark = 6
    assert log.producer_state.first_unstable_below(0) is None
    log.close()
