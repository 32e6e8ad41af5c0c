"""Idempotent-producer state of one partition: epochs, sequence numbers, recent batches.

For each producer id the log keeps its epoch, the metadata of its last five batches (first and
last sequence, first and last offset, max timestamp), the timestamp of its last write, the
coordinator epoch of its last transaction marker and the first offset of its open
transaction. A produce request is checked against it before anything is written:

- a batch whose epoch, first and last sequence equal one of the five cached batches is a
  duplicate (a retry); the log answers with the original offsets and writes nothing;
- an epoch older than the producer's current one raises ``InvalidProducerEpochError``;
- a newer epoch must start at sequence 0; in the same epoch a batch must start right after
  the previous one (sequences wrap from int32 max to 0); otherwise
  ``OutOfOrderSequenceError``;
- a producer the log has no state for (a new one, or one whose records retention removed or
  whose entry expired) may start at any sequence, as in Kafka since KIP-360: the broker
  cannot tell a lost state from a gap, and the producer's next batches are checked against
  this first one.

Snapshot files ``<offset, 20 digits>.snapshot`` in the partition directory hold the state as
of that offset (every batch below it applied). Layout, big-endian::

    version            int16   1
    crc                uint32  CRC32C of every byte after this field
    entry_count        int32
    entry_count times:
      producer_id               int64
      producer_epoch            int16
      coordinator_epoch         int32
      last_offset               int64
      last_timestamp            int64
      current_txn_first_offset  int64   -1 when no transaction is open
      batch_count               int8    0..5, oldest first
      batch_count times:
        first_seq int32 | last_seq int32 | first_offset int64 | last_offset int64 |
        max_timestamp int64

Crash rule: a snapshot is written with ``atomic_write`` (temporary file, fsync, rename,
directory fsync), or without the fsyncs where the log manager syncs the whole file system
afterwards (a shutdown, a start after a crash). On start, snapshots above the log end offset
(and, after an unclean shutdown, above the recovery point, since the batches before them may
not have reached the disk) are deleted; the newest remaining one that reads back with a
valid CRC is loaded and the batch headers after its offset are replayed. A snapshot that
fails its CRC (one cut short by a crash) is deleted and the next older one tried. Without
any, the state is rebuilt from the log start. After a clean shutdown nothing is replayed:
the shutdown wrote a snapshot at the log end unless the newest one (or, without any, an
empty state) already held the state, so the newest, or an empty state, is the state at the
end (``take_snapshot(unless_unchanged=True)``, ``rebuild(trust_snapshot=True)``).

Not thread-safe: the owner (the partition's ``Log``) calls it from one thread.
"""

from __future__ import annotations

import bisect
import logging
import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ads.common.files import atomic_write
from ads.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from ads.records.crc import crc32c
from ads.storage.errors import (
    CheckpointError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from ads.storage.files import file_names

__all__ = [
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "DuplicateBatch",
    "InvalidProducerEpochError",
    "OutOfOrderSequenceError",
    "VerificationGuard",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
]

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = 0x7FFFFFFF

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqqqb")
_BATCH = struct.Struct(">iiqqq")


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


# What ``check`` returns for a retried batch: the metadata of the original append.
DuplicateBatch = BatchMetadata


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    last_offset: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.last_offset,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None


class VerificationGuard:
    """KIP-890: left in the producer state when a transactional append is verified with the
    transaction coordinator, and dropped when a marker ends the producer's transaction
    there. The append then checks that its guard is still the producer's: a transaction
    that ended while the verification was out refuses the late write (Kafka's guard)."""

    __slots__ = ("producer_id",)

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def _apply(
    entry: ProducerStateEntry,
    header: BatchHeader,
    first_offset: int,
    last_offset: int,
    timestamp: int,
) -> None:
    if header.producer_epoch != entry.producer_epoch:
        entry.producer_epoch = header.producer_epoch
        entry.batches.clear()
    if not header.is_control and header.base_sequence != NO_SEQUENCE:
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp
            )
        )
    entry.last_offset = last_offset
    entry.last_timestamp = timestamp
    if header.is_control:
        # A transaction marker ends the producer's transaction, commit or abort alike.
        entry.current_txn_first_offset = None
    elif header.is_transactional and entry.current_txn_first_offset is None:
        entry.current_txn_first_offset = first_offset


class ProducerAppendInfo:
    """The checks and staged updates of one append, committed only once it is written.

    Batches of one request are checked in order, each against the state left by the
    previous ones.
    """

    __slots__ = ("_manager", "_updated")

    def __init__(self, manager: ProducerStateManager) -> None:
        self._manager = manager
        self._updated: dict[int, ProducerStateEntry] = {}

    def _current(self, producer_id: int) -> ProducerStateEntry | None:
        entry = self._updated.get(producer_id)
        return entry if entry is not None else self._manager.last_entry(producer_id)

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """Return the original batch if ``header`` is a retry, raise if it is out of order."""
        producer_id, epoch, seq = header.producer_id, header.producer_epoch, header.base_sequence
        current = self._current(producer_id)
        if current is None:
            return None
        if epoch < current.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} epoch {epoch} is older than {current.producer_epoch}"
            )
        if header.is_control or seq == NO_SEQUENCE:
            # Markers and a coordinator's transactional writes (TxnOffsetCommit) carry no
            # sequence; only their epoch is checked. Clients' batches always have one (the
            # partition refuses a producer id without a sequence).
            return None
        duplicate = current.find_duplicate(header)
        if duplicate is not None:
            return duplicate
        if epoch != current.producer_epoch:
            if seq != 0 and current.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} started epoch {epoch} at sequence {seq}, not 0"
                )
        elif not _in_sequence(current.last_seq, seq):
            raise OutOfOrderSequenceError(
                f"producer {producer_id} epoch {epoch}: sequence {seq} does not follow "
                f"{current.last_seq}"
            )
        return None

    def append(
        self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int
    ) -> None:
        """Stage the effect of a batch written at ``first_offset..last_offset``."""
        producer_id = header.producer_id
        entry = self._updated.get(producer_id)
        if entry is None:
            current = self._manager.last_entry(producer_id)
            entry = current.copy() if current is not None else ProducerStateEntry(producer_id)
            self._updated[producer_id] = entry
        _apply(entry, header, first_offset, last_offset, timestamp)

    @property
    def updated(self) -> Mapping[int, ProducerStateEntry]:
        return self._updated


class ProducerStateManager:
    """Producer state of one partition, with its snapshot files in ``directory``."""

    __slots__ = ("_ongoing_txns", "_producers", "_unreplicated_txns", "_verification_guards",
                 "directory", "log_start_offset", "map_end_offset")

    def __init__(self, directory: Path | str) -> None:
        # A string: one per partition (see LocalLog).
        self.directory = str(directory)
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing_txns: dict[int, int] = {}
        # (first offset, marker offset) of each transaction ended by a marker that may not
        # be replicated yet, in marker order: the last stable offset stays below them until
        # the high watermark passes their marker (`first_unstable_below`).
        # A list (an empty deque is 624 bytes, for every partition): it stays short.
        self._unreplicated_txns: list[tuple[int, int]] = []
        self._verification_guards: dict[int, VerificationGuard] = {}
        self.log_start_offset = 0
        self.map_end_offset = 0

    # ------------------------------------------------------------------------------ queries

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return self._producers

    def first_unstable_offset(self, excluding: int | None = None) -> int | None:
        """First offset of the oldest open transaction (the last stable offset bound),
        leaving out the one of producer ``excluding`` (a marker about to close it)."""
        ongoing = self._ongoing_txns
        if not ongoing:  # the common case, on every fetch: no transaction open
            return None
        return min((first for pid, first in ongoing.items() if pid != excluding), default=None)

    def first_unstable_below(self, high_watermark: int) -> int | None:
        """The last stable offset's bound: the first offset of the oldest transaction that
        is open or whose marker is not yet below ``high_watermark`` (replicated). Before a
        marker is committed, a new leader may not have it, and the transaction would be
        open again there; read_committed consumers must not have seen it end."""
        pending = self._unreplicated_txns
        if not pending and not self._ongoing_txns:  # the common case, on every fetch
            return None
        self.forget_replicated(high_watermark)
        first = self.first_unstable_offset()
        if pending:
            oldest = min(start for start, _ in pending)
            first = oldest if first is None else min(first, oldest)
        return first

    def forget_replicated(self, high_watermark: int) -> None:
        """Drops the ended transactions whose markers are below ``high_watermark``."""
        pending = self._unreplicated_txns
        done = 0
        while done < len(pending) and pending[done][1] < high_watermark:
            done += 1
        del pending[:done]

    def start_verification(self, producer_id: int) -> VerificationGuard:
        """The producer's guard, made if it has none (`VerificationGuard`)."""
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            guard = self._verification_guards[producer_id] = VerificationGuard(producer_id)
        return guard

    def verified(self, guard: VerificationGuard) -> bool:
        """Whether the guard is still its producer's (no marker came in between)."""
        return self._verification_guards.get(guard.producer_id) is guard

    # ------------------------------------------------------------------------------ updates

    def begin_append(self) -> ProducerAppendInfo:
        return ProducerAppendInfo(self)

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        return ProducerAppendInfo(self).check(header)

    def update(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        timestamp: int | None = None,
    ) -> None:
        """Apply one written batch (the log uses ``begin_append``/``commit`` for requests)."""
        info = ProducerAppendInfo(self)
        ts = header.max_timestamp if timestamp is None else timestamp
        info.append(header, first_offset, last_offset, ts)
        self.commit(info, last_offset + 1)

    def commit(self, info: ProducerAppendInfo, next_offset: int) -> None:
        for entry in info.updated.values():
            self._store(entry)
        self.map_end_offset = max(self.map_end_offset, next_offset)

    def replay(self, header: BatchHeader) -> None:
        """Apply a batch read back from the log, without checks (recovery, replication)."""
        producer_id = header.producer_id
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id)
        _apply(entry, header, header.base_offset, header.last_offset, header.max_timestamp)
        self._store(entry)
        self.map_end_offset = max(self.map_end_offset, header.next_offset)

    def replay_all(self, headers: Iterable[BatchHeader],
                   on_marker: Callable[[BatchHeader, int | None], None] | None = None) -> None:
        """``replay`` for each batch of a producer; ``on_marker`` sees each transaction
        marker with the first offset of the transaction it ends (None: none was open),
        before the marker closes it."""
        for header in headers:
            if header.has_producer_id:
                if on_marker is not None and header.is_control:
                    entry = self._producers.get(header.producer_id)
                    on_marker(header, None if entry is None else entry.current_txn_first_offset)
                self.replay(header)

    def _store(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is None:
            self._verification_guards.pop(entry.producer_id, None)
            first = self._ongoing_txns.pop(entry.producer_id, None)
            if first is not None:  # a marker at `last_offset` ended the transaction
                self._unreplicated_txns.append((first, entry.last_offset))
        else:
            self._ongoing_txns[entry.producer_id] = entry.current_txn_first_offset

    def _forget(self, producer_id: int) -> None:
        self._producers.pop(producer_id, None)
        self._ongoing_txns.pop(producer_id, None)

    def remove_expired(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Drop producers idle for ``producer.id.expiration.ms`` with no open transaction."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for pid in expired:
            self._forget(pid)
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start moved: forget producers whose last write is now gone."""
        self.log_start_offset = max(self.log_start_offset, log_start_offset)
        gone = [
            pid
            for pid, entry in self._producers.items()
            if entry.last_offset < self.log_start_offset and entry.current_txn_first_offset is None
        ]
        for pid in gone:
            self._forget(pid)
        self.map_end_offset = max(self.map_end_offset, self.log_start_offset)

    def clear(self, offset: int) -> None:
        """Forget everything; the state now describes an empty log ending at ``offset``."""
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        self._verification_guards.clear()
        self.map_end_offset = offset

    # ---------------------------------------------------------------------------- snapshots

    def snapshot_path(self, offset: int) -> Path:
        return Path(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in file_names(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if stem.isdigit():
                    offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self, *, durable: bool = True, unless_unchanged: bool = False
                      ) -> Path | None:
        """Write the state as of ``map_end_offset``, unless that snapshot exists.

        ``durable=False``: without fsyncs, for a caller that syncs the file system.
        ``unless_unchanged``: nor when the newest snapshot in [log start offset, map end
        offset) holds the same bytes (without one: when there are no producers), which
        then stands for the state at ``map_end_offset`` as well
        (``rebuild(trust_snapshot=True)``): a shutdown of many partitions whose producers
        did not change (most have none) creates no file for them, and creating a file is
        the dearest thing it would do."""
        path = self.snapshot_path(self.map_end_offset)
        if path.exists():
            return None
        data = encode_snapshot(self._producers.values())
        if unless_unchanged and self._newest_snapshot() == data:
            return None
        atomic_write(path, data, durable=durable)
        return path

    def _newest_snapshot(self) -> bytes:
        """The bytes of the newest snapshot in [log start offset, map end offset); those of
        an empty state if there is none."""
        offsets = self.snapshot_offsets()
        i = bisect.bisect_left(offsets, self.map_end_offset) - 1
        if i >= 0 and offsets[i] >= self.log_start_offset:
            try:
                return self.snapshot_path(offsets[i]).read_bytes()
            except FileNotFoundError:
                pass
        return _EMPTY_SNAPSHOT

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot < offset:
                self.snapshot_path(snapshot).unlink(missing_ok=True)

    def delete_snapshots_after(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot > offset:
                self.snapshot_path(snapshot).unlink(missing_ok=True)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int | None:
        """Reload from the newest valid snapshot in [log start, log end].

        Returns the snapshot's offset, from which the caller must replay the log; None
        without one (the state is empty as of the log start offset, replayed from there).
        """
        offsets = self.snapshot_offsets()  # listed once, for both loops
        kept = bisect.bisect_right(offsets, log_end_offset)
        for offset in offsets[kept:]:
            self.snapshot_path(offset).unlink(missing_ok=True)
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        self._verification_guards.clear()
        self.log_start_offset = log_start_offset
        for offset in reversed(offsets[:kept]):
            if offset < log_start_offset:
                break
            path = self.snapshot_path(offset)
            try:
                entries = decode_snapshot(path.read_bytes())
            except CheckpointError as exc:
                logger.warning("deleting corrupt producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if entry.last_offset >= log_start_offset:
                    self._store(entry)
            self.map_end_offset = offset
            return offset
        self.map_end_offset = log_start_offset
        return None

    def rebuild(
        self,
        log_start_offset: int,
        log_end_offset: int,
        headers_from: Callable[[int], Iterable[BatchHeader]],
        on_marker: Callable[[BatchHeader, int | None], None] | None = None,
        *,
        durable: bool = True,
        trust_snapshot: bool = False,
    ) -> None:
        """Reload the newest snapshot, replay the batch headers after it (``headers_from``:
        the log's headers from an offset on) and snapshot the result unless the newest
        snapshot holds it already (``take_snapshot``; ``durable``: the same).
        ``on_marker`` sees each transaction marker replayed with the first offset of the
        transaction it ends (None: none was open), before the marker closes it.

        ``trust_snapshot``, after a clean shutdown: the newest snapshot holds the state at
        the log end, and without one the state is empty (the shutdown wrote a snapshot
        there unless the newest, or the empty state, held it already), so nothing is
        replayed."""
        snapshot = self.truncate_and_reload(log_start_offset, log_end_offset)
        replay_from = log_start_offset if snapshot is None else snapshot
        if replay_from >= log_end_offset:
            return
        if trust_snapshot:
            self.map_end_offset = log_end_offset
            return
        self.replay_all(headers_from(replay_from), on_marker)
        self.map_end_offset = log_end_offset
        self.truncate_head(log_start_offset)
        self.take_snapshot(durable=durable, unless_unchanged=True)


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for e in entries:
        count += 1
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.coordinator_epoch,
            e.last_offset,
            e.last_timestamp,
            txn,
            len(e.batches),
        )
        for b in e.batches:
            body += _BATCH.pack(
                b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.max_timestamp
            )
    tail = struct.pack(">i", count) + body
    return _HEAD.pack(SNAPSHOT_VERSION, crc32c(tail), count) + bytes(body)


_EMPTY_SNAPSHOT = encode_snapshot(())


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot, raising ``CheckpointError`` unless it is complete and intact."""
    if len(data) < _HEAD.size:
        raise CheckpointError("snapshot shorter than its header")
    version, crc, count = _HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CheckpointError(f"unsupported snapshot version {version}")
    if crc32c(memoryview(data)[6:]) != crc:
        raise CheckpointError("snapshot CRC mismatch")
    entries = []
    pos = _HEAD.size
    try:
        for _ in range(count):
            pid, epoch, coordinator_epoch, last_offset, last_ts, txn, n = _ENTRY.unpack_from(
                data, pos
            )
            pos += _ENTRY.size
            if not 0 <= n <= NUM_BATCHES_TO_RETAIN:
                raise CheckpointError(f"snapshot entry with {n} batches")
            batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
            for _ in range(n):
                batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                pos += _BATCH.size
            entries.append(
                ProducerStateEntry(
                    pid,
                    epoch,
                    batches,
                    coordinator_epoch,
                    last_offset,
                    last_ts,
                    None if txn < 0 else txn,
                )
            )
    except struct.error as exc:
        raise CheckpointError(f"snapshot truncated: {exc}") from exc
    if pos != len(data):
        raise CheckpointError(f"{len(data) - pos} trailing bytes in snapshot")
    return entries
