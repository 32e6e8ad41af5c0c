"""Transactions in a partition's log: markers, the last stable offset, aborted transactions.

A transactional producer's batches are ordinary batches with the transactional bit; the
producer state (``ads.storage.producer_state``) remembers the first offset of each
producer's open transaction. A transaction ends with a marker, a control batch written by
the transaction coordinator (COMMIT or ABORT, ``records.batch.build_control_batch``).

- The last stable offset (LSO) is the first offset of the oldest transaction that is open
  or whose marker is not yet below the high watermark, or the high watermark when there is
  none (and never above it): read_committed consumers read below it only. A marker the
  leader has written but its followers not yet copied may be lost with the leader, so a
  transaction counts as ended only once its marker is committed.
- Each ABORT marker adds an entry (producer id, first offset, marker offset, LSO) to the
  ``.txnindex`` of the segment the marker lands in (``ads.storage.txn_index``); a
  read_committed fetch sends the entries overlapping what it returns.

Crash rule: after an unclean start the log replays batch headers from its producer-state
snapshot (``Log._rebuild_producer_state``); ``on_marker`` re-adds the index entry of every
ABORT marker replayed, reading the marker's control record (markers are rare, so the one
place a record is read here costs nothing on the produce and fetch paths).

Used from the log's owner thread only.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from ads.records.batch import (
    BATCH_OVERHEAD,
    BatchHeader,
    ControlRecordType,
    build_control_batch,
    decode_records,
    parse_control_record,
    read_batch_header,
)
from ads.records.errors import InvalidRecordError, RecordError
from ads.storage.errors import TransactionCoordinatorFencedError
from ads.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from ads.storage.producer_state import ProducerStateManager
    from ads.storage.segment import LogSegment

__all__ = ["AbortedRanges", "append_marker", "append_marker_batch", "collect_aborted",
           "last_stable_offset", "marker_replayer"]

# A marker batch holds one control record of a few bytes.
_MAX_MARKER_BYTES = BATCH_OVERHEAD + 64


class AppendInfo(Protocol):
    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def log_append_time_ms(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...


class Log(Protocol):
    """What this module uses of ``ads.storage.log.Log`` (which imports it)."""

    @property
    def producer_state(self) -> ProducerStateManager: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def segments(self) -> Sequence[LogSegment]: ...

    def append(self, records: bytes | bytearray | memoryview,
               headers: Sequence[tuple[int, BatchHeader]], *, leader_epoch: int, now_ms: int,
               log_append_time: bool) -> AppendInfo: ...


def last_stable_offset(log: Log) -> int:
    hw = log.high_watermark
    first_unstable = log.producer_state.first_unstable_below(hw)
    return hw if first_unstable is None else min(first_unstable, hw)


def _segment_of(log: Log, offset: int) -> LogSegment:
    segments = log.segments
    bases = [s.base_offset for s in segments]
    return segments[max(bisect.bisect_right(bases, offset) - 1, 0)]


def _add_aborted(log: Log, producer_id: int, first_offset: int, marker_offset: int) -> None:
    # The entry's LSO: where the partition is stable once this transaction is gone (the
    # producer state no longer counts it), whatever the high watermark is yet.
    first_unstable = log.producer_state.first_unstable_offset(excluding=producer_id)
    lso = marker_offset + 1 if first_unstable is None else min(first_unstable, marker_offset + 1)
    _segment_of(log, marker_offset).txn_index.append(
        AbortedTxn(producer_id, first_offset, marker_offset, lso))


def append_marker(log: Log, commit: bool, producer_id: int, producer_epoch: int,
                  coordinator_epoch: int, leader_epoch: int, now_ms: int) -> AppendInfo:
    """Writes a COMMIT or ABORT marker for the producer's transaction (`append_marker_batch`)."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch,
                                timestamp=now_ms)
    return append_marker_batch(log, batch, leader_epoch, now_ms)


def append_marker_batch(log: Log, batch: bytes | bytearray | memoryview, leader_epoch: int,
                        now_ms: int) -> AppendInfo:
    """Writes a marker batch (`records.batch.build_control_batch`) that ends its producer's
    transaction; an ABORT closing an open transaction gets its ``.txnindex`` entry. Raises
    ``InvalidRecordError`` for a batch that is not one marker, the log's errors (an older
    producer epoch: ``InvalidProducerEpochError``) and, for a coordinator epoch older than
    the producer's last marker's, ``TransactionCoordinatorFencedError``."""
    header = read_batch_header(batch)
    if not header.is_control or not header.is_transactional or header.records_count != 1:
        raise InvalidRecordError("a transaction marker is one transactional control record")
    records = decode_records(batch, max_uncompressed_bytes=_MAX_MARKER_BYTES)
    kind, coordinator_epoch = parse_control_record(records[0].key, records[0].value)
    if kind not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise InvalidRecordError(f"control record type {kind} is not a transaction marker")
    producer_id = header.producer_id
    entry = log.producer_state.last_entry(producer_id)
    if entry is not None and coordinator_epoch < entry.coordinator_epoch:
        # A deposed coordinator still sending: the newer one decides this transaction.
        raise TransactionCoordinatorFencedError(
            f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
            f"older than {entry.coordinator_epoch}")
    first = None if entry is None else entry.current_txn_first_offset
    info = log.append(batch, [(0, header)], leader_epoch=leader_epoch, now_ms=now_ms,
                      log_append_time=False)
    updated = log.producer_state.last_entry(producer_id)
    if updated is not None:  # kept in the producer-state snapshots
        updated.coordinator_epoch = coordinator_epoch
    if kind == ControlRecordType.ABORT and first is not None:
        _add_aborted(log, producer_id, first, info.first_offset)
    return info


def collect_aborted(log: Log, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_offset), oldest first.

    A transaction begun below ``upper_offset`` may end in a later segment, so the indexes
    are read on until an entry's LSO reaches ``upper_offset`` (every transaction begun
    below it had ended by then), as Kafka does."""
    segments = log.segments
    bases = [s.base_offset for s in segments]
    first = max(bisect.bisect_right(bases, fetch_offset) - 1, 0)
    out: list[AbortedTxn] = []
    for segment in segments[first:]:
        entries = segment.txn_index.collect(fetch_offset, upper_offset)
        out.extend(entries)
        if segment.txn_index.stable_past(upper_offset):
            break
    return out


class AbortedRanges:
    """The aborted transactions of a set of segments, to ask whether a batch belongs to one
    (the log cleaner drops their records). Immutable once built; any thread."""

    __slots__ = ("_by_producer",)

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for a in aborted:
            self._by_producer.setdefault(a.producer_id, []).append(
                (a.first_offset, a.last_offset))

    def __bool__(self) -> bool:
        return bool(self._by_producer)

    def holds(self, header: BatchHeader) -> bool:
        """Whether the batch is data of an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        ranges = self._by_producer.get(header.producer_id)
        return ranges is not None and any(
            first <= header.base_offset < last for first, last in ranges)


def _control_record(segment: LogSegment, header: BatchHeader) -> tuple[int, int]:
    """(type, coordinator epoch) of a marker; (-1, -1) if it cannot be read."""
    found = segment.locate(header.base_offset)
    if found is None:
        return -1, -1
    data = os.pread(segment.fd, min(header.size, _MAX_MARKER_BYTES), found[0])
    try:
        records = decode_records(data, max_uncompressed_bytes=_MAX_MARKER_BYTES)
        return parse_control_record(records[0].key, records[0].value) if records else (-1, -1)
    except (RecordError, IndexError):
        return -1, -1


def marker_replayer(log: Log) -> Callable[[BatchHeader, int | None], None]:
    """What the producer-state rebuild calls for each replayed marker with the first offset
    of the transaction it closes: re-adds the ``.txnindex`` entry of an ABORT and restores
    the producer's coordinator epoch."""

    def on_marker(header: BatchHeader, first_offset: int | None) -> None:
        kind, coordinator_epoch = _control_record(_segment_of(log, header.base_offset), header)
        entry = log.producer_state.last_entry(header.producer_id)
        if entry is not None and coordinator_epoch > entry.coordinator_epoch:
            entry.coordinator_epoch = coordinator_epoch
        if first_offset is not None and kind == ControlRecordType.ABORT:
            _add_aborted(log, header.producer_id, first_offset, header.base_offset)

    return on_marker
