"""The share-partitions this broker leads (KIP-932): acquisition reads and acknowledgements.

One `SharePartition` (`ads.replication.share_partition`, where the record states and their
rules are) per share group and partition led here, loaded on the group's first ShareFetch
of the partition here (after this broker became its leader) from the share coordinator
(`share_state.ShareStatePersister`), and dropped when the leadership moves away. A
share-partition without state starts at `share.auto.offset.reset` (the broker's
`group.share.auto.offset.reset`: `latest`, the high watermark, or `earliest`, the log start
offset), and that start is written (InitializeShareGroupState) before any record is handed
out, so that a later leader starts there too. While it loads, fetches of it get nothing
(a waiting fetch is woken when the load ends) and acknowledgements INVALID_RECORD_STATE.

Durable progress, as Kafka's leaders: an acknowledgement (ACCEPT, RELEASE, REJECT) is
answered only once its state batches are written (WriteShareGroupState, committed
acks=all by the coordinator); if the write fails its records stay ACQUIRED and the member
gets the error. Records released by a lock's expiry or a closed session are written in the
background. Writes of one share-partition go one at a time, in order. Acquisition is not
written: after a move of the leadership, records that were ACQUIRED come back AVAILABLE
with the delivery count last written for them.

A share fetch reads through the replica manager's one read path, from each share-
partition's next fetch offset, without waiting; it then reads the headers of the batches
returned (`FileRegion.batches`: one small read per batch, the records stay on disk),
acquires their available records and answers with the batches that hold acquired records
as one file region, sent as they are on disk, and the acquired offset ranges. With nothing
acquired it waits in the replica manager's fetch purgatory, woken by appends to its
partitions, by acknowledgements that release records, or at the next lock deadline, and
tries again until `max_wait_ms`.

Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

from ads.broker.group_configs import GroupSettings
from ads.common.clock import Clock
from ads.common.later import Later
from ads.common.partitions import TopicPartition
from ads.common.tasks import TaskSet
from ads.protocol.errors import ErrorCode
from ads.records.batch import BATCH_OVERHEAD, read_batch_header
from ads.replication.partition import PartitionError
from ads.replication.purgatory import DelayedFetch
from ads.replication.replica_manager import FetchParams, FetchPartition, ReplicaManager
from ads.replication.share_partition import (
    AcknowledgeType,
    AcquiredRecords,
    ShareConfig,
    SharePartition,
    StateBatch,
)
from ads.storage.files import FileRegion
from ads.storage.txn_index import AbortedTxn

log = logging.getLogger("ads.broker.share")

# A load that cannot read the state (no coordinator yet) is tried again, this many times.
_LOAD_ATTEMPTS = 30
_LOAD_BACKOFF_S = 0.5


@dataclass(slots=True)
class ShareRead:
    """One partition's part of a share fetch."""

    error: ErrorCode = ErrorCode.NONE
    records: FileRegion | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)


# One acknowledgement batch: first offset, last offset, acknowledge types.
AckBatch = tuple[int, int, Sequence[int]]


class RecordLimit(NamedTuple):
    """How many records one share fetch acquires: `max_records` at a batch's end (Kafka's
    batch_optimized acquire mode), or never more than `max_records` when `strict`
    (record_limit, KIP-1206)."""

    max_records: int
    strict: bool = False


ShareKey = tuple[str, TopicPartition]


@dataclass(frozen=True, slots=True)
class PersistedState:
    """What the share coordinator has of a share-partition."""

    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


class StatePersister(Protocol):
    """The share coordinator as a share-partition leader reaches it (`share_state.py`)."""

    async def read(self, group_id: str, tp: TopicPartition, leader_epoch: int
                   ) -> PersistedState | None | ErrorCode:
        """The state (None: none written yet), or the error."""
        ...

    async def initialize(self, group_id: str, tp: TopicPartition, state_epoch: int,
                         start_offset: int) -> ErrorCode:
        ...

    async def write(self, group_id: str, tp: TopicPartition, state_epoch: int,
                    leader_epoch: int, start_offset: int, batches: list[StateBatch]
                    ) -> ErrorCode:
        ...


# What a member is told of an acknowledgement whose state could not be written (Kafka's
# mapping of its persister's errors).
_WRITE_ERRORS = {
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_STATE_EPOCH: ErrorCode.FENCED_STATE_EPOCH,
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


class _GroupShare(NamedTuple):
    config: ShareConfig
    auto_offset_reset: str
    read_committed: bool


class SharePartitionManager:
    def __init__(self, replicas: ReplicaManager, config: ShareConfig, auto_offset_reset: str,
                 clock: Clock, persister: StatePersister,
                 own_settings: Callable[[str], GroupSettings | None] = lambda _g: None
                 ) -> None:
        self.replicas = replicas
        self.config = config
        self.auto_offset_reset = auto_offset_reset
        # A group's own configs (share.record.lock.duration.ms, ...) over these.
        self.own_settings = own_settings
        self.clock = clock
        self.persister = persister
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._loading: dict[ShareKey, asyncio.Task[None]] = {}
        # Writes of one share-partition go one at a time, in the order they were asked for.
        self._write_locks: dict[ShareKey, asyncio.Lock] = {}
        self._tasks = TaskSet(log)

    def _share_partition(self, group_id: str, tp: TopicPartition
                         ) -> SharePartition | ErrorCode | None:
        """The share-partition if loaded; None while it loads (the load is started)."""
        try:
            part = self.replicas.partition(tp.topic, tp.partition)
        except PartitionError as exc:
            return exc.code
        key = (group_id, tp)
        sp = self.partitions.get(key)
        if sp is None:
            if key not in self._loading:
                task = asyncio.ensure_future(self._load(key, part.leader_epoch))
                self._loading[key] = task
                task.add_done_callback(lambda _t: self._loaded(key, task))
            return None
        sp.move_start(part.log_start_offset)
        sp.config = self._settings(group_id).config  # a group config changed counts here
        return sp

    def lock_duration_ms(self, group_id: str) -> int:
        """How long the group's members hold what they acquire (ShareFetch tells them)."""
        return self._settings(group_id).config.record_lock_duration_ms

    def _settings(self, group_id: str) -> _GroupShare:
        """The group's share-partition settings, where it starts on a partition and
        whether it reads committed records only."""
        own = self.own_settings(group_id)
        if own is None:
            return _GroupShare(self.config, self.auto_offset_reset, False)
        return _GroupShare(
            ShareConfig(own.share_record_lock_duration_ms, own.share_delivery_count_limit,
                        own.share_partition_max_record_locks),
            own.share_auto_offset_reset, own.share_isolation_level == "read_committed")

    def _loaded(self, key: ShareKey, task: asyncio.Task[None]) -> None:
        if self._loading.get(key) is task:
            del self._loading[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("loading share-partition %s of %s failed", key[1], key[0],
                      exc_info=task.exception())
        # A fetch waiting for the share-partition tries again.
        self.replicas.fetch_purgatory.check_and_complete(key[1])

    async def _load(self, key: ShareKey, leader_epoch: int) -> None:
        group_id, tp = key
        for _ in range(_LOAD_ATTEMPTS):
            sp = await self._read(group_id, tp, leader_epoch)
            if sp is not None:
                break
            await asyncio.sleep(_LOAD_BACKOFF_S)
        else:
            return
        try:
            part = self.replicas.partition(tp.topic, tp.partition)
        except PartitionError:
            return
        if part.leader_epoch != leader_epoch or self.partitions.get(key) is not None:
            return  # led under another epoch since: that load decides
        sp.leader_epoch = leader_epoch
        self.partitions[key] = sp

    async def _read(self, group_id: str, tp: TopicPartition, leader_epoch: int
                    ) -> SharePartition | None:
        """The share-partition from its durable state, made at the reset offset and
        initialized when it has none; None when the coordinator cannot be asked now."""
        state = await self.persister.read(group_id, tp, leader_epoch)
        if isinstance(state, ErrorCode):
            log.info("reading the state of share-partition %s of %s: %s", tp, group_id,
                     state.name)
            return None
        config, auto_offset_reset, _ = self._settings(group_id)
        if state is not None:
            sp = SharePartition.from_state(state.start_offset, state.batches, config)
            sp.state_epoch = state.state_epoch
            return sp
        try:
            part = self.replicas.partition(tp.topic, tp.partition)
        except PartitionError:
            return None
        start = (part.log_start_offset if auto_offset_reset == "earliest"
                 else part.high_watermark)
        error = await self.persister.initialize(group_id, tp, 0, start)
        if error is not ErrorCode.NONE:
            log.info("initializing the state of share-partition %s of %s: %s", tp, group_id,
                     error.name)
            return None
        return SharePartition(start, config)

    def leadership_changed(self, topic: str, index: int, leader: bool,
                           leader_epoch: int | None) -> None:
        """A partition no longer led here, or led under a new epoch: its share-partitions
        go (a new leadership reads them again from the share coordinator)."""
        tp = TopicPartition(topic, index)
        for key in [k for k, sp in self.partitions.items()
                    if k[1] == tp and (not leader or sp.leader_epoch != leader_epoch)]:
            del self.partitions[key]
        if not leader:  # a load under way for a new epoch checks the epoch at its end
            for key in [k for k in self._loading if k[1] == tp]:
                self._loading.pop(key).cancel()
            for key in [k for k in self._write_locks
                        if k[1] == tp and not self._write_locks[k].locked()]:
                del self._write_locks[key]

    async def close(self) -> None:
        for task in self._loading.values():
            task.cancel()
        self._loading.clear()
        await self._tasks.close()

    # -- writing the state -----------------------------------------------------------
    async def _write(self, key: ShareKey, sp: SharePartition, batches: list[StateBatch]
                     ) -> ErrorCode:
        async with self._write_locks.setdefault(key, asyncio.Lock()):
            if self.partitions.get(key) is not sp:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER  # the leadership moved meanwhile
            # The start as it is once these batches apply, so the coordinator's start
            # offset (ReadShareGroupStateSummary) follows the acknowledgements.
            error = await self.persister.write(key[0], key[1], sp.state_epoch, sp.leader_epoch,
                                               sp.start_after(batches), batches)
        if error is not ErrorCode.NONE:
            log.info("writing the state of share-partition %s of %s: %s", key[1], key[0],
                     error.name)
        if error is ErrorCode.FENCED_STATE_EPOCH and self.partitions.get(key) is sp:
            # Its offsets were altered or deleted (a new state epoch) since it was read:
            # the next fetch reads the new state.
            del self.partitions[key]
        return error

    def member_left(self, group_id: str, member_id: str, last: bool) -> None:
        """A member's share session here went (closed, or dropped idle: the member is gone
        from the group by then): its acquired records go back. When it was the group's
        last session here, as when the group empties, the group's share-partitions leave
        memory once the writes asked for before are done, so that the next fetch reads
        their state again and offsets altered or deleted meanwhile (AlterShareGroupOffsets
        and DeleteShareGroupOffsets need an empty group) count; one that holds acquired
        records again by then (a member came back) stays."""
        keys = [k for k in self.partitions if k[0] == group_id]
        self.release(group_id, member_id, [tp for _, tp in keys])
        if last and keys:
            self._tasks.spawn(self._forget(keys), "forgetting an empty group's share-partitions")

    async def _forget(self, keys: list[ShareKey]) -> None:
        # Writes spawned in the same step as this (the releases above) start first and
        # take their partition's write lock: waiting for the lock below waits for them.
        await asyncio.sleep(0)
        for key in keys:
            sp = self.partitions.get(key)
            # Writes of a share-partition go in order: past its lock, those before are done.
            async with self._write_locks.setdefault(key, asyncio.Lock()):
                if (sp is not None and self.partitions.get(key) is sp and not sp.unsaved
                        and sp.next_deadline_ms() is None):
                    del self.partitions[key]

    def _save_released(self, key: ShareKey, sp: SharePartition) -> None:
        """Writes in the background what lock expiry or a closed session released."""
        if not sp.unsaved:
            return
        batches, sp.unsaved = sp.unsaved, []

        async def save() -> None:
            await self._write(key, sp, batches)

        self._tasks.spawn(save(), "writing released share records")

    # -- acknowledgements ------------------------------------------------------------
    async def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                          batches: Iterable[AckBatch]) -> ErrorCode:
        """The partition's acknowledgement batches, answered once their state is written;
        the last error of any of them."""
        sp = self._share_partition(group_id, tp)
        if sp is None:  # loading: nothing is acquired here yet
            return ErrorCode.INVALID_RECORD_STATE
        if isinstance(sp, ErrorCode):
            return sp
        key = (group_id, tp)
        now = self.clock.time_ms()
        error = ErrorCode.NONE
        prepared: list[AckBatch] = []
        written: list[StateBatch] = []
        for first, last, types in batches:
            result = sp.prepare_acknowledge(member_id, first, last, types, now)
            if isinstance(result, ErrorCode):
                error = result
            else:
                prepared.append((first, last, types))
                written.extend(result)
        self._save_released(key, sp)
        if prepared:
            # RENEW alone writes nothing (`prepare_acknowledge` renewed the locks).
            failed = await self._write(key, sp, written) if written else ErrorCode.NONE
            for first, last, types in prepared:
                sp.complete_acknowledge(member_id, first, last, types,
                                        failed is ErrorCode.NONE)
            if failed is not ErrorCode.NONE:
                error = _WRITE_ERRORS.get(failed, ErrorCode.UNKNOWN_SERVER_ERROR)
        # Released records may be what another member's waiting fetch wants.
        self.replicas.fetch_purgatory.check_and_complete(tp)
        return error

    def release(self, group_id: str, member_id: str, tps: Iterable[TopicPartition]) -> None:
        """A closed share session: the member's acquired records go back."""
        for tp in tps:
            sp = self.partitions.get((group_id, tp))
            if sp is not None and sp.release_member(member_id):
                self._save_released((group_id, tp), sp)
                self.replicas.fetch_purgatory.check_and_complete(tp)

    # -- acquisition -----------------------------------------------------------------
    def fetch(self, group_id: str, member_id: str, tps: list[TopicPartition],
              max_wait_ms: int, max_bytes: int, limit: RecordLimit
              ) -> dict[TopicPartition, ShareRead] | Awaitable[dict[TopicPartition, ShareRead]]:
        """Acquires records of the partitions; waits up to `max_wait_ms` for some."""
        reads = self._acquire(group_id, member_id, tps, max_bytes, limit)
        if max_wait_ms <= 0 or not tps or _answered(reads):
            return reads
        # Parked in this same step, so that no append between the read and the wait is
        # missed (as `ReplicaManager.fetch` does).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000.0
        op = self._park(group_id, tps, deadline - loop.time())
        return self._fetch_later(group_id, member_id, tps, max_bytes, limit, op, deadline)

    def _park(self, group_id: str, tps: list[TopicPartition], remaining_s: float
              ) -> DelayedFetch:
        now = self.clock.time_ms()
        deadlines = [d for tp in tps
                     if (sp := self.partitions.get((group_id, tp))) is not None
                     and (d := sp.next_deadline_ms()) is not None]
        wait = remaining_s
        if deadlines:  # a lock that expires makes records available again
            wait = min(wait, max(min(deadlines) - now, 0) / 1000.0 + 0.001)
        op = DelayedFetch(list(tps))
        self.replicas.fetch_purgatory.watch(op, wait)
        return op

    async def _fetch_later(self, group_id: str, member_id: str, tps: list[TopicPartition],
                           max_bytes: int, limit: RecordLimit, op: DelayedFetch,
                           deadline: float) -> dict[TopicPartition, ShareRead]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await op.future
            finally:
                op.complete()  # a cancelled request leaves no timer or watcher behind
            reads = self._acquire(group_id, member_id, tps, max_bytes, limit)
            remaining = deadline - loop.time()
            if _answered(reads) or remaining <= 0:
                return reads
            op = self._park(group_id, tps, remaining)

    def _acquire(self, group_id: str, member_id: str, tps: list[TopicPartition],
                 max_bytes: int, limit: RecordLimit) -> dict[TopicPartition, ShareRead]:
        now = self.clock.time_ms()
        reads: dict[TopicPartition, ShareRead] = {}
        targets: list[tuple[TopicPartition, SharePartition]] = []
        fetches: list[FetchPartition] = []
        for tp in tps:
            sp = self._share_partition(group_id, tp)
            if isinstance(sp, ErrorCode):
                reads[tp] = ShareRead(sp)
                continue
            reads[tp] = ShareRead()
            if sp is None:
                continue  # loading
            sp.expire(now)
            self._save_released((group_id, tp), sp)
            offset = sp.next_fetch_offset()
            if offset is not None:
                targets.append((tp, sp))
                fetches.append(FetchPartition(tp.topic, tp.partition, offset, max_bytes, -1))
        if not fetches:
            return reads
        read_committed = self._settings(group_id).read_committed
        result = self.replicas.fetch(fetches, FetchParams(max_bytes, 0, 0, read_committed,
                                                          False, inline_bytes=0))
        assert not isinstance(result, Later)  # noqa: S101 - max_wait_ms 0 never waits
        budget = limit.max_records
        for (tp, sp), read in zip(targets, result.reads, strict=True):
            if read.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                sp.move_start(read.log_start_offset)
                continue
            if read.error is not ErrorCode.NONE:
                reads[tp] = ShareRead(read.error)
                continue
            if read.records is None or budget <= 0:
                continue
            assert not isinstance(read.records, bytes)  # noqa: S101 - inline_bytes=0
            batches = read.records.batches()
            acquired, lo, hi = sp.acquire(member_id, [(b, last) for _, b, last in batches],
                                          budget, now, limit.strict)
            if acquired and read_committed:
                acquired = _archive_skipped(sp, member_id, acquired, batches,
                                            read.aborted or [], now)
            if acquired:
                budget -= sum(a[1] - a[0] + 1 for a in acquired)
                first, last_region = batches[lo][0], batches[hi - 1][0]
                region = replace(first, length=last_region.offset + last_region.length
                                 - first.offset)
                reads[tp] = ShareRead(ErrorCode.NONE, region, acquired)
        return reads


def _skipped(batches: list[tuple[FileRegion, int, int]], aborted: list[AbortedTxn]
             ) -> list[tuple[int, int]]:
    """(base, last offset) of the batches a read_committed reader skips: control batches,
    and the batches of transactions the log's aborted-transaction index names, from their
    first offset to their ABORT marker (the rule of Kafka's consumer)."""
    starts = sorted(aborted, key=lambda a: a.first_offset)
    aborting: set[int] = set()
    out: list[tuple[int, int]] = []
    i = 0
    for region, base, last in batches:
        while i < len(starts) and starts[i].first_offset <= last:
            aborting.add(starts[i].producer_id)
            i += 1
        header = read_batch_header(region.header_bytes(BATCH_OVERHEAD))
        if header.is_control:
            out.append((base, last))
            aborting.discard(header.producer_id)  # its marker ends the transaction
        elif header.is_transactional and header.producer_id in aborting:
            out.append((base, last))
    return out


def _archive_skipped(sp: SharePartition, member_id: str, acquired: list[AcquiredRecords],
                     batches: list[tuple[FileRegion, int, int]], aborted: list[AbortedTxn],
                     now: int) -> list[AcquiredRecords]:
    """share.isolation.level=read_committed: the acquired records of aborted transactions
    and of markers are archived at once (never delivered, as Kafka's share-partitions
    archive them) and left out of what the member is told it acquired."""
    skipped = _skipped(batches, aborted)
    kept: list[AcquiredRecords] = []
    for first, last, count in acquired:
        cuts = [(max(b, first), min(e, last)) for b, e in skipped if b <= last and e >= first]
        at = first
        for lo, hi in cuts:
            if lo > at:
                kept.append(AcquiredRecords((at, lo - 1, count)))
            sp.acknowledge(member_id, lo, hi, [AcknowledgeType.REJECT], now)
            at = hi + 1
        if at <= last:
            kept.append(AcquiredRecords((at, last, count)))
    return kept


def _answered(reads: dict[TopicPartition, ShareRead]) -> bool:
    return any(r.acquired or r.error is not ErrorCode.NONE for r in reads.values())
