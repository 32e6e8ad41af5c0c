"""Per-batch cleaning: which records of a batch survive, and the bytes that replace it.

A record survives when it has a key, no later record of the map's range has the same key,
and it is not a tombstone whose delete horizon has passed. What is written for the batch:

- every record survives and nothing else changes: the original bytes, untouched;
- some survive: a new batch with the same base offset, ``lastOffsetDelta`` (so offsets and
  the batch's offset range never change), partition leader epoch, producer id, epoch and base
  sequence, attributes and codec, holding the surviving records' bytes as they were (record
  offsets and timestamps are deltas from the unchanged base, so they stay valid);
- the batch keeps a tombstone and has no delete horizon yet: as above, with attribute bit 6
  set and the horizon (now + ``delete.retention.ms``) stored as base timestamp; the records'
  timestamp deltas are rewritten against it, as Kafka does. A batch whose last tombstone
  goes loses bit 6 the same way (base timestamp back to its first record's);
- nothing survives: the batch goes, unless it must be kept as an empty batch (records count
  0, same offsets and producer fields, base and max timestamp the old max timestamp,
  uncompressed): the last batch and the last data batch of a producer that still has state,
  so its epoch and sequence survive a rebuild of producer state from the log (a marker may
  follow the batch holding the last sequence); and the last batch of a cleaned group, so
  the cleaned segment ends where the group ended (recovery of an interrupted swap deletes the
  old segments inside the swap file's offset range).

Records without a key (written before the topic became compacted) are dropped, as Kafka
does, and so are the records of aborted transactions (their batches go, or stay empty where
a producer's state needs them; the offset map never holds their keys, so they never
supersede a committed value). Control batches (transaction markers) are kept until their
transaction has no data left and ``delete.retention.ms`` has passed since a pass found that
(``txn_markers``): a removable marker gets a delete horizon the way a tombstone's batch
does, and goes after it.

Byte layouts are ``ads.records.batch``'s; the header struct is repeated here because the
cleaner splices record bytes into a new header instead of re-encoding records.

Every batch's CRC is checked before use: rewriting a corrupt batch would give it a valid CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from ads.records import compression
from ads.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    TimestampType,
    control_record_type,
)
from ads.records.crc import crc32c
from ads.records.errors import CorruptRecordError
from ads.records.scan import RecordScan, batch_body, rebase_timestamps, scan_records
from ads.storage.cleaner.offset_map import OffsetMap
from ads.storage.cleaner.txn_markers import CleanedTransactions
from ads.storage.txn_index import TransactionIndex

__all__ = ["BatchFilter", "FilterCounts"]

Buffer = bytes | bytearray | memoryview

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_CRC_OFFSET = 17
_CODEC_MASK = 0x07


@dataclass(slots=True)
class FilterCounts:
    """What one pass did to records, for the cleaner's log line and metrics."""

    messages_read: int = 0
    messages_written: int = 0
    superseded: int = 0
    tombstones_removed: int = 0
    keyless_removed: int = 0
    aborted_removed: int = 0
    markers_removed: int = 0
    batches_emptied: int = 0


class BatchFilter:
    """Cleans batches against one pass's offset map. Not thread-safe (one per pass)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        now_ms: int,
        delete_retention_ms: int,
        producer_last_offsets: Mapping[int, tuple[int, int]],
        max_uncompressed_bytes: int,
        txns: CleanedTransactions | None = None,
    ) -> None:
        self.offset_map = offset_map
        self.txns = txns or CleanedTransactions(())
        # Where the ``.txnindex`` entries of the ABORT markers kept go (the cleaned segment's).
        self.txn_index: TransactionIndex | None = None
        self.now_ms = now_ms
        self.new_horizon_ms = now_ms + delete_retention_ms
        self.producer_last_offsets = producer_last_offsets
        self.max_uncompressed_bytes = max_uncompressed_bytes
        self.counts = FilterCounts()
        # Earliest delete horizon among written batches that still hold tombstones: the log
        # must be cleaned again then, even if nothing new was written to it.
        self.earliest_horizon_ms: int | None = None

    def filter(
        self, buf: Buffer, pos: int, header: BatchHeader, *, retain_empty: bool
    ) -> Buffer | None:
        """The bytes to write in place of the batch at ``buf[pos:]``, or ``None`` to drop it."""
        size = header.size
        with memoryview(buf) as view:
            if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != header.crc:
                raise CorruptRecordError(f"CRC mismatch in batch at offset {header.base_offset}")
        counts = self.counts
        counts.messages_read += header.records_count
        if header.is_control:
            return self._marker(buf, pos, header, retain_empty)
        if self.txns.on_data(header):
            counts.aborted_removed += header.records_count
            return self._emptied(header, retain_empty)
        body, start, end = batch_body(buf, pos, header, self.max_uncompressed_bytes)
        scan = scan_records(body, start, end, header.records_count)
        latest = self.offset_map.get_many(scan.keys)
        horizon = header.delete_horizon_ms
        tombstones_expire = horizon is not None and self.now_ms >= horizon
        base = header.base_offset
        kept: list[int] = []
        keeps_tombstone = False
        for i, (key, delta, newest, tombstone) in enumerate(
            zip(scan.keys, scan.offset_deltas, latest, scan.tombstones, strict=True)
        ):
            if key is None:
                counts.keyless_removed += 1
            elif base + delta < newest:
                counts.superseded += 1
            elif tombstone and tombstones_expire:
                counts.tombstones_removed += 1
            else:
                kept.append(i)
                keeps_tombstone = keeps_tombstone or tombstone
        counts.messages_written += len(kept)
        set_horizon = keeps_tombstone and horizon is None
        # Once its tombstones are gone a batch drops its horizon, so a log with no tombstones
        # left never looks due for another pass.
        clear_horizon = horizon is not None and not keeps_tombstone
        if keeps_tombstone:
            self._pending_horizon(self.new_horizon_ms if horizon is None else horizon)
        if not kept:
            return self._emptied(header, retain_empty)
        if len(kept) == header.records_count and not set_horizon and not clear_horizon:
            return memoryview(buf)[pos : pos + size]
        return self._rebuild(header, body, scan, kept, set_horizon, clear_horizon)

    def _pending_horizon(self, horizon_ms: int) -> None:
        if self.earliest_horizon_ms is None or horizon_ms < self.earliest_horizon_ms:
            self.earliest_horizon_ms = horizon_ms

    def _marker(self, buf: Buffer, pos: int, header: BatchHeader,
                retain_empty: bool) -> Buffer | None:
        """A control batch: kept, given its delete horizon, or removed (``txn_markers``)."""
        counts = self.counts
        kind: int | None = None
        scan: RecordScan | None = None
        body: Buffer = buf
        if header.records_count:
            body, start, end = batch_body(buf, pos, header, self.max_uncompressed_bytes)
            scan = scan_records(body, start, end, header.records_count)
            kind = control_record_type(scan.keys[0])
        removable, entry = self.txns.on_marker(header, kind)
        if entry is not None and self.txn_index is not None:
            self.txn_index.append(entry)
        horizon = header.delete_horizon_ms
        if scan is None or (removable and horizon is not None and self.now_ms >= horizon):
            counts.markers_removed += header.records_count
            return self._emptied(header, retain_empty)
        counts.messages_written += header.records_count
        if not removable:
            return memoryview(buf)[pos : pos + header.size]
        if horizon is not None:
            self._pending_horizon(horizon)
            return memoryview(buf)[pos : pos + header.size]
        self._pending_horizon(self.new_horizon_ms)
        return self._rebuild(header, body, scan, list(range(header.records_count)), True, False)

    def _emptied(self, header: BatchHeader, retain_empty: bool) -> Buffer | None:
        if header.records_count:
            self.counts.batches_emptied += 1
        keep_producer = header.has_producer_id and header.last_offset in (
            self.producer_last_offsets.get(header.producer_id, ()))
        return _empty_batch(header) if retain_empty or keep_producer else None

    def _rebuild(
        self,
        header: BatchHeader,
        body: Buffer,
        scan: RecordScan,
        kept: list[int],
        set_horizon: bool,
        clear_horizon: bool,
    ) -> bytearray:
        log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
        stamps = scan.timestamp_deltas
        if log_append_time:
            max_timestamp = header.max_timestamp
        else:
            max_timestamp = header.base_timestamp + max(stamps[i] for i in kept)
        records = bytearray()
        attributes = header.attributes
        base_timestamp = header.base_timestamp
        if set_horizon or clear_horizon:
            if set_horizon:
                attributes |= DELETE_HORIZON_FLAG_MASK
                base_timestamp = self.new_horizon_ms
            else:
                attributes &= ~DELETE_HORIZON_FLAG_MASK
                base_timestamp += stamps[kept[0]]  # back to the first record's timestamp
            rebase_timestamps(body, scan, kept, base_timestamp - header.base_timestamp, records)
        else:
            ends = scan.ends
            with memoryview(body) as view:
                for i in kept:
                    records += view[ends[i - 1] if i else scan.start : ends[i]]
        codec = header.attributes & _CODEC_MASK
        payload = compression.compress(codec, records) if codec else records
        return _pack(
            header,
            payload,
            attributes=attributes,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            count=len(kept),
        )


def _pack(
    header: BatchHeader,
    payload: Buffer,
    *,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
) -> bytearray:
    out = bytearray(BATCH_OVERHEAD)
    out += payload
    _HEADER.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    with memoryview(out) as view:
        _CRC.pack_into(out, _CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:]))
    return out


def _empty_batch(header: BatchHeader) -> bytearray:
    return _pack(
        header,
        b"",
        attributes=header.attributes & ~(_CODEC_MASK | DELETE_HORIZON_FLAG_MASK),
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        count=0,
    )
