"""Records of a partition for the console: the latest N, or N from an offset or a time.

Only committed records are shown (below the high watermark), as a consumer would see them,
read through `Partition.read` like a fetch and decoded batch by batch (the one place the
console looks inside batches; it never runs on the produce or fetch paths). Reads are
bounded: at most `MAX_RECORDS` records and `MAX_READ_BYTES` bytes per page, and values are
cut at `MAX_SHOWN_BYTES` for display. Control records are left out.
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

MAX_RECORDS = 500
MAX_READ_BYTES = 8 << 20
MAX_SHOWN_BYTES = 4096
_READ_STEP = 1 << 20
FORMATS = ("text", "json", "hex")


class RecordsUnavailableError(Exception):
    """The partition is not led here, or its records cannot be read now."""


@dataclass(frozen=True, slots=True)
class RecordPage:
    records: list[Record]
    start: int  # offset the page was asked to start from
    log_start_offset: int
    high_watermark: int


def read_records(broker: BrokerContext, topic: str, partition: int, count: int,
                 offset: int | None = None, timestamp: int | None = None) -> RecordPage:
    """`count` records from `offset`, from the first at or after `timestamp`, or else the
    last `count` committed ones."""
    part = broker.replica_manager.get(topic, partition)
    if part is None or not part.is_leader:
        raise RecordsUnavailableError(f"{topic}-{partition} is not led by this broker")
    count = max(1, min(count, MAX_RECORDS))
    hw, log_start = part.high_watermark, part.log_start_offset
    if offset is not None:
        start = offset
    elif timestamp is not None:
        start = _offset_at(part, f"{topic}-{partition}", timestamp, hw)
    else:
        start = hw - count
    start = min(max(start, log_start), hw)
    records: list[Record] = []
    position, read = start, 0
    while position < hw and len(records) < count and read < MAX_READ_BYTES:
        try:
            region, size = part.read(position, _READ_STEP, True, hw)
        except PartitionError as exc:
            raise RecordsUnavailableError(f"{topic}-{partition}: {exc.code.name}") from exc
        if region is None or size == 0:
            break
        try:
            data = region.read_bytes()
            read += len(data)
            next_position = _take_records(data, position, start, count, records)
        except (RecordError, StorageError) as exc:
            raise RecordsUnavailableError(f"{topic}-{partition}: {exc}") from exc
        if next_position <= position:
            break
        position = next_position
    return RecordPage(records, start, log_start, hw)


def _take_records(data: bytes, position: int, start: int, count: int,
                  records: list[Record]) -> int:
    """Adds the records of `data`'s batches from offset `start` on to `records`, up to
    `count` in all (control records left out); returns the offset after the last batch
    (`position` when `data` holds none)."""
    next_position = position
    for pos, header in rb.iter_batches(data):
        next_position = header.next_offset
        if header.is_control:
            continue
        for record in rb.decode_records(data[pos:pos + header.size],
                                        max_uncompressed_bytes=MAX_READ_BYTES):
            if record.offset >= start and len(records) < count:
                records.append(record)
    return next_position


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
