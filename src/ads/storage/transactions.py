"""Transaction markers and aborted transactions read from their bytes.

What a partition's log does with transactions (the last stable offset, a marker's
``.txnindex`` entry, the aborted transactions of a read, the crash rule) is ``Log``'s, in
``ads.storage.log``. This module holds what needs no log: checking that a batch is one
transaction marker (``read_marker``), reading a marker's control record back from its
segment (``control_record``, for recovery), and the aborted ranges the log cleaner asks
about (``AbortedRanges``).

Markers are rare, so decoding their one control record here costs nothing on the produce
and fetch paths.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ads.records.batch import (
    BATCH_OVERHEAD,
    BatchHeader,
    ControlRecordType,
    decode_records,
    parse_control_record,
    read_batch_header,
)
from ads.records.errors import InvalidRecordError, RecordError
from ads.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from ads.storage.segment import LogSegment

__all__ = ["AbortedRanges", "control_record", "read_marker"]

# A marker batch holds one control record of a few bytes.
_MAX_MARKER_BYTES = BATCH_OVERHEAD + 64


def read_marker(batch: bytes | bytearray | memoryview) -> tuple[BatchHeader, int, int]:
    """(header, control record type, coordinator epoch) of a COMMIT or ABORT marker batch
    (``records.batch.build_control_batch``); ``InvalidRecordError`` for a batch that is not
    one transaction marker."""
    header = read_batch_header(batch)
    if not header.is_control or not header.is_transactional or header.records_count != 1:
        raise InvalidRecordError("a transaction marker is one transactional control record")
    records = decode_records(batch, max_uncompressed_bytes=_MAX_MARKER_BYTES)
    kind, coordinator_epoch = parse_control_record(records[0].key, records[0].value)
    if kind not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise InvalidRecordError(f"control record type {kind} is not a transaction marker")
    return header, kind, coordinator_epoch


def control_record(segment: LogSegment, header: BatchHeader) -> tuple[int, int]:
    """(type, coordinator epoch) of a marker in ``segment``; (-1, -1) if it cannot be read."""
    found = segment.locate(header.base_offset)
    if found is None:
        return -1, -1
    data = segment.pread(min(header.size, _MAX_MARKER_BYTES), found[0])
    try:
        records = decode_records(data, max_uncompressed_bytes=_MAX_MARKER_BYTES)
        return parse_control_record(records[0].key, records[0].value) if records else (-1, -1)
    except (RecordError, IndexError):
        return -1, -1


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
