"""Per-record checks of a produced batch against its topic's rules (KIP-467).

A batch that passed ``validate_batches`` (header, CRC, counts) may still hold records its
topic refuses: a record without a key on a compacted topic, or a CreateTime timestamp
outside ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]``.
Kafka refuses the whole batch and names every such record by its index in the batch, so a
client fails exactly those records and the others with "a different record in the same
batch failed". ``bad_records`` finds them all; it never stops at the first.

Per batch first. Keys are not in the header, so a compacted topic always scans its batches
(it did before this module existed). Timestamps are decided from the header whenever it
can be: ``maxTimestamp`` bounds every record from above, so no record is too new when it is
within ``after``; the first record's timestamp (``baseTimestamp``) stands for the oldest
one, so the records are scanned only when the first one is already too old or the maximum
too new. With Kafka's defaults (both bounds ``Long.MAX_VALUE``) nothing is ever scanned. A
record older than the batch's first one while that first one is in range passes: the
producers we know write records in the order they were created, and checking that case
would put a per-record scan on every batch of a topic with a finite bound.

A batch that claims LogAppendTime gives every record its ``maxTimestamp``, so it is decided
from the header alone, as Kafka decides it: checked against the bounds on a CreateTime
topic, refused (INVALID_TIMESTAMP) on a LogAppendTime topic or without a timestamp. Its
records are still scanned before they are listed as refused: the header's record count is
believed only once the records back it.

Sans-io, and nothing here is stored, so there is no layout or crash rule of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ads.records.batch import NO_TIMESTAMP, BatchHeader, TimestampType
from ads.records.scan import batch_body, scan_records

__all__ = ["BadRecord", "RecordRules", "bad_records", "summary"]

Buffer = bytes | bytearray | memoryview

LONG_MAX = 9223372036854775807


@dataclass(frozen=True, slots=True)
class RecordRules:
    """What a topic requires of each record; built once per topic configuration."""

    topic_partition: str  # "topic-partition", as Kafka names it in messages
    require_key: bool = False  # cleanup.policy includes compact
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    before_max_ms: int = LONG_MAX
    after_max_ms: int = LONG_MAX

    def must_scan(self, header: BatchHeader, now_ms: int) -> bool:
        """Whether a record of this batch could break a rule; False in the common case."""
        if self.require_key:
            return True
        max_ts = header.max_timestamp
        if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            # Every record has maxTimestamp: decided from the header, nothing is decoded.
            return (self.log_append_time or max_ts == NO_TIMESTAMP
                    or not -self.after_max_ms <= now_ms - max_ts <= self.before_max_ms)
        if self.log_append_time:
            return False
        return (max_ts != NO_TIMESTAMP and max_ts - now_ms > self.after_max_ms) or (
            now_ms - header.base_timestamp > self.before_max_ms)


@dataclass(frozen=True, slots=True)
class BadRecord:
    """One refused record: its index in the batch and Kafka's message for it."""

    batch_index: int
    message: str
    timestamp: bool  # an INVALID_TIMESTAMP error (else INVALID_RECORD)


def bad_records(buf: Buffer, pos: int, header: BatchHeader, rules: RecordRules,
                now_ms: int, max_uncompressed_bytes: int) -> list[BadRecord]:
    """Every record of the batch at ``pos`` that breaks ``rules``, in batch order.

    Raises ``CorruptRecordError`` when the records do not parse (or inflate beyond
    ``max_uncompressed_bytes``).
    """
    claims_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    # Scanned even when the header decides every record's fate: the header's record count
    # is not backed by anything until the records are parsed, and a hostile batch claims
    # 2^31-1 records over a few bytes, which a loop over the count would never finish.
    body, start, end = batch_body(buf, pos, header, max_uncompressed_bytes)
    scan = scan_records(body, start, end, header.records_count)
    keys, deltas, stamps = scan.keys, scan.offset_deltas, scan.timestamp_deltas
    out: list[BadRecord] = []
    for i, key in enumerate(keys):
        if rules.require_key and key is None:
            out.append(BadRecord(i, "Compacted topic cannot accept message without key in "
                                    f"topic partition {rules.topic_partition}.", False))
            continue
        offset = header.base_offset + deltas[i]
        timestamp = (header.max_timestamp if claims_append_time
                     else header.base_timestamp + stamps[i])
        problem = _timestamp_problem(rules, claims_append_time, timestamp, offset, now_ms)
        if problem is not None:
            out.append(BadRecord(i, problem, True))
    return out


def _timestamp_problem(rules: RecordRules, claims_append_time: bool, timestamp: int,
                       offset: int, now_ms: int) -> str | None:
    # Kafka's order: a CreateTime topic checks any real timestamp against its bounds; a
    # batch claiming LogAppendTime is refused otherwise.
    if not rules.log_append_time and timestamp != NO_TIMESTAMP:
        diff = now_ms - timestamp
        if diff > rules.before_max_ms or -diff > rules.after_max_ms:
            return (f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                    f"The timestamp should be within [{now_ms - rules.before_max_ms}, "
                    f"{now_ms + rules.after_max_ms}]")
        return None
    if claims_append_time:
        return (f"Invalid timestamp type in message with offset {offset}. Producer should "
                "not set timestamp type to LogAppendTime.")
    return None


def summary(bad: list[BadRecord]) -> tuple[bool, str]:
    """(whether the batch fails with INVALID_TIMESTAMP, the partition's error message), as
    Kafka words them."""
    if any(b.timestamp for b in bad):
        return True, "One or more records have been rejected due to invalid timestamp"
    shown = ", ".join(f"RecordError(batchIndex={b.batch_index}, message='{b.message}')"
                      for b in bad[:3])
    return False, (f"One or more records have been rejected due to {len(bad)} record errors "
                   f"in total, and only showing the first three errors at most: [{shown}]")
