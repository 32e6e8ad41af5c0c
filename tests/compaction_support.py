"""Helpers for the log cleaner tests: a compacted log, keyed appends, reads, and a model of
what compaction may and must keep (the four guarantees of the compaction spec)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, decode_records, iter_batches, validate_batches
from ads.storage.cleaner import CleanerConfig, CleanerStats, LogCleaner
from ads.storage.config import LogConfig
from ads.storage.log import Log
from ads.storage.manager import LogManager

T0 = 1_700_000_000_000
TOPIC = "compacted"

Write = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp
Seen = tuple[int, bytes | None, bytes | None]


def compact_config(**overrides: object) -> LogConfig:
    base: dict[str, object] = {
        "segment_bytes": 2048,
        "cleanup_policy": ("compact",),
        "min_cleanable_dirty_ratio": 0.0,
        "delete_retention_ms": 10_000,
        "file_delete_delay_ms": 0,
    }
    base.update(overrides)
    return LogConfig().with_overrides(**base)


@dataclass
class Harness:
    """A log manager with one compacted log and a cleaner run by hand (no threads)."""

    directory: Path
    clock: ManualClock
    config: LogConfig
    manager: LogManager = field(init=False)
    cleaner: LogCleaner = field(init=False)
    log: Log = field(init=False)
    writes: list[Write] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.open(clean=True)

    def open(self, *, clean: bool) -> None:
        self.manager = LogManager([self.directory], clock=self.clock, default_config=self.config)
        if clean:
            self.manager.startup()
        else:
            (self.directory / ".kafka_cleanshutdown").unlink(missing_ok=True)
            self.manager.startup()
        log = self.manager.get_log(TOPIC, 0)
        self.log = log if log is not None else self.manager.create_log(TOPIC, 0)
        self.log.high_watermark = self.log.log_end_offset
        self.cleaner = LogCleaner(self.manager, CleanerConfig(dedupe_buffer_size=1 << 16),
                                  clock=self.clock)

    def restart(self, *, clean: bool) -> None:
        """Close (or abandon, as a crash would) and reopen everything from disk."""
        if clean:
            self.manager.shutdown()
        self.open(clean=clean)

    def append(self, records: list[tuple[bytes | None, bytes | None]], *,
               producer_id: int = -1, base_sequence: int = -1, compression: int = 0) -> int:
        now = self.clock.time_ms()
        data = build_batch(records, timestamp=now, producer_id=producer_id,
                           producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=base_sequence, compression=compression)
        info = self.log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 30),
                               leader_epoch=0, now_ms=now, log_append_time=False)
        self.log.high_watermark = self.log.log_end_offset
        for i, (key, value) in enumerate(records):
            self.writes.append((info.first_offset + i, key, value, now))
        return info.first_offset

    def clean(self) -> CleanerStats | None:
        return self.cleaner.clean_once()

    def read(self, start: int | None = None) -> list[Seen]:
        return read_log(self.log, self.log.log_start_offset if start is None else start)


def read_log(log: Log, start: int) -> list[Seen]:
    """Every record from ``start`` as a consumer sees it (records below ``start`` skipped)."""
    out: list[Seen] = []
    offset = start
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20, max_offset=log.high_watermark, min_one_batch=True)
        data = result.read_bytes()
        if not data:
            break
        for pos, header in iter_batches(data):
            for rec in decode_records(data[pos:pos + header.size], max_uncompressed_bytes=1 << 26):
                if rec.offset >= offset:
                    out.append((rec.offset, rec.key, rec.value))
            offset = max(offset, header.next_offset)
    return out


def check_guarantees(writes: list[Write], seen: list[Seen], *, log_start: int = 0,
                     keep_from_offset: int | None = None,
                     keep_tombstones_after_ms: int | None = None) -> None:
    """The four guarantees, for what a consumer from the log start reads.

    2 and 3: ``seen`` is a subsequence of ``writes`` (same offsets, same keys and values, in
    order): compaction only removes records. 4: for every key the last record seen is its
    last write, unless that write is a tombstone that may have been removed, in which case
    nothing of the key may remain. 1: every write at or above ``keep_from_offset`` (the
    uncleanable head) is seen, and so is every tombstone written at or after
    ``keep_tombstones_after_ms`` (still inside delete.retention.ms).
    """
    by_offset = {w[0]: w for w in writes}
    offsets = [s[0] for s in seen]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for offset, key, value in seen:
        assert offset in by_offset, f"offset {offset} was never written"
        assert by_offset[offset][1:3] == (key, value), f"record at {offset} changed"
    last_write: dict[bytes | None, Write] = {}
    for w in writes:
        if w[0] >= log_start:
            last_write[w[1]] = w
    last_seen: dict[bytes | None, Seen] = {}
    for s in seen:
        last_seen[s[1]] = s
    for key, w in last_write.items():
        got = last_seen.get(key)
        if w[2] is None:
            assert got is None or got[0] == w[0], f"key {key!r}: tombstone lost, {got} remains"
        else:
            assert got is not None and got[0] == w[0], f"key {key!r}: last value {w} lost"
    seen_offsets = set(offsets)
    if keep_from_offset is not None:
        head = [w[0] for w in writes if w[0] >= max(keep_from_offset, log_start)]
        assert all(o in seen_offsets for o in head), "a record of the head was removed"
    if keep_tombstones_after_ms is not None:
        for w in last_write.values():
            if w[2] is None and w[3] >= keep_tombstones_after_ms:
                assert w[0] in seen_offsets, f"tombstone {w} removed inside delete.retention.ms"


def read_partition(bootstrap: str, topic: str, start: int = 0, partition: int = 0,
                   timeout_s: float = 30.0) -> list[Seen]:
    """Everything from ``start`` to the end of the partition, as confluent-kafka delivers it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-check",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, partition, start)])
    got: list[Seen] = []
    deadline = time.time() + timeout_s
    try:
        while time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return got
            got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError("did not reach the end of the partition")
