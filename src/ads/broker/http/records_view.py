"""Records of a partition for the console: the latest N, or N from an offset or a time.

Records are shown as a consumer of the chosen isolation level would see them, read through
`Partition.read` like a fetch and decoded batch by batch (the one place the console looks
inside batches; it never runs on the produce or fetch paths):

- `read_committed` (the default): below the last stable offset, without the records of
  aborted transactions and without control batches (transaction markers);
- `read_uncommitted`: everything below the high watermark, each record of an aborted
  transaction marked `aborted`, each of a transaction not ended yet `open transaction`, and
  the markers themselves shown as `COMMIT marker` / `ABORT marker` rows.

Reads are bounded: at most `MAX_RECORDS` records and `MAX_READ_BYTES` bytes per page, and
values are cut at `MAX_SHOWN_BYTES` for display.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ads.broker.context import BrokerContext
from ads.records import batch as rb
from ads.records.errors import RecordError
from ads.records.record import Record
from ads.replication.partition import Partition, PartitionError
from ads.storage.errors import StorageError
from ads.storage.txn_index import AbortedTxn

MAX_RECORDS = 500
MAX_READ_BYTES = 8 << 20
MAX_SHOWN_BYTES = 4096
_READ_STEP = 1 << 20
FORMATS = ("text", "json", "hex")
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_COMMITTED, "read_uncommitted")


class RecordsUnavailableError(Exception):
    """The partition is not led here, or its records cannot be read now."""


@dataclass(frozen=True, slots=True)
class ShownRecord:
    record: Record
    mark: str  # "" for an ordinary record; see the module's header
    control: bool  # a transaction marker: its key and value are the protocol's, not data


@dataclass(frozen=True, slots=True)
class RecordPage:
    records: list[ShownRecord]
    start: int  # offset the page was asked to start from
    log_start_offset: int
    end: int  # the offset reads stop at: the last stable offset or the high watermark
    high_watermark: int
    isolation: str


@dataclass(frozen=True, slots=True)
class _Reading:
    """What decides, per batch, whether and how its records are shown."""

    start: int
    count: int
    committed: bool
    last_stable_offset: int
    aborted: list[AbortedTxn]

    def aborted_batch(self, header: rb.BatchHeader) -> bool:
        return header.is_transactional and any(
            a.producer_id == header.producer_id
            and a.first_offset <= header.base_offset <= a.last_offset for a in self.aborted)


def read_records(broker: BrokerContext, topic: str, partition: int, count: int,
                 offset: int | None = None, timestamp: int | None = None,
                 isolation: str = READ_COMMITTED) -> RecordPage:
    """`count` records from `offset`, from the first at or after `timestamp`, or else the
    last `count` the isolation level reads."""
    part = broker.replica_manager.get(topic, partition)
    if part is None or not part.is_leader:
        raise RecordsUnavailableError(f"{topic}-{partition} is not led by this broker")
    count = max(1, min(count, MAX_RECORDS))
    hw, log_start = part.high_watermark, part.log_start_offset
    lso = min(part.last_stable_offset, hw)
    committed = isolation == READ_COMMITTED
    end = lso if committed else hw
    if offset is not None:
        start = offset
    elif timestamp is not None:
        start = _offset_at(part, f"{topic}-{partition}", timestamp, end)
    else:
        start = end - count
    start = min(max(start, log_start), end)
    reading = _Reading(start, count, committed, lso, part.aborted_transactions(start, end))
    records: list[ShownRecord] = []
    position, read = start, 0
    while position < end and len(records) < count and read < MAX_READ_BYTES:
        try:
            region, size = part.read(position, _READ_STEP, True, end)
        except PartitionError as exc:
            raise RecordsUnavailableError(f"{topic}-{partition}: {exc.code.name}") from exc
        if region is None or size == 0:
            break
        try:
            data = region.read_bytes()
            read += len(data)
            next_position = _take_records(data, position, reading, records)
        except (RecordError, StorageError) as exc:
            raise RecordsUnavailableError(f"{topic}-{partition}: {exc}") from exc
        if next_position <= position:
            break
        position = next_position
    return RecordPage(records, start, log_start, end, hw,
                      READ_COMMITTED if committed else "read_uncommitted")


def _take_records(data: bytes, position: int, reading: _Reading,
                  records: list[ShownRecord]) -> int:
    """Adds the records of `data`'s batches from `reading.start` on to `records`, up to
    `reading.count` in all, as the isolation level shows them; returns the offset after the
    last batch (`position` when `data` holds none)."""
    next_position = position
    for pos, header in rb.iter_batches(data):
        next_position = header.next_offset
        aborted = reading.aborted_batch(header)
        if reading.committed and (header.is_control or aborted):
            continue
        for record in rb.decode_records(data[pos:pos + header.size],
                                        max_uncompressed_bytes=MAX_READ_BYTES):
            if record.offset >= reading.start and len(records) < reading.count:
                records.append(ShownRecord(record, _mark(header, record, aborted, reading),
                                           header.is_control))
    return next_position


def _mark(header: rb.BatchHeader, record: Record, aborted: bool, reading: _Reading) -> str:
    if header.is_control:
        kind = rb.parse_control_record(record.key, record.value)[0]
        if kind == rb.ControlRecordType.COMMIT:
            return "COMMIT marker"
        return "ABORT marker" if kind == rb.ControlRecordType.ABORT else "control record"
    if aborted:
        return "aborted"
    if header.is_transactional and header.base_offset >= reading.last_stable_offset:
        return "open transaction"
    return ""


def _offset_at(part: Partition, name: str, timestamp: int, hw: int) -> int:
    """The offset of the first record at or after `timestamp`; the high watermark when none
    is."""
    try:
        found = part.offset_for_timestamp(timestamp)
    except PartitionError as exc:
        raise RecordsUnavailableError(f"{name}: {exc.code.name}") from exc
    return found[0] if found is not None else hw


def show(data: bytes | None, fmt: str) -> str:
    """The bytes as text (UTF-8, undecodable bytes replaced), indented JSON when they parse
    as JSON (text otherwise), or hex; cut at `MAX_SHOWN_BYTES`. Not escaped: the page
    escapes it."""
    if data is None:
        return "null"
    cut = data[:MAX_SHOWN_BYTES]
    more = f" … ({len(data)} bytes)" if len(data) > MAX_SHOWN_BYTES else ""
    if fmt == "hex":
        return cut.hex(" ") + more
    text = cut.decode("utf-8", errors="replace")
    if fmt == "json" and not more:
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return text + more
