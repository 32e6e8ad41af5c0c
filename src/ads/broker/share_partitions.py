"""The share-partitions this broker leads (KIP-932): acquisition reads and acknowledgements.

One `SharePartition` (`ads.replication.share_partition`, where the record states and their
rules are) per share group and partition led here, made on the group's first ShareFetch of
the partition at `share.auto.offset.reset` (the broker's `group.share.auto.offset.reset`:
`latest`, the high watermark, or `earliest`, the log start offset) and dropped when the
leadership moves away.

A share fetch reads through the replica manager's one read path, from each share-
partition's next fetch offset, without waiting; it then reads the headers of the batches
returned (`FileRegion.batches`: one small read per batch, the records stay on disk),
acquires their available records and answers with the batches that hold acquired records
as one file region, sent as they are on disk, and the acquired offset ranges. With nothing
acquired it waits in the replica manager's fetch purgatory, woken by appends to its
partitions, by acknowledgements that release records, or at the next lock deadline, and
tries again until `max_wait_ms`.

State is in memory only (no share coordinator yet): a restart or a move of the leadership
loses the in-flight records and the acknowledged progress. Used from the broker's event
loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from ads.common.clock import Clock
from ads.common.partitions import TopicPartition
from ads.protocol.errors import ErrorCode
from ads.replication.partition import PartitionError
from ads.replication.purgatory import DelayedFetch
from ads.replication.replica_manager import FetchParams, FetchPartition, ReplicaManager
from ads.replication.share_partition import AcquiredRecords, ShareConfig, SharePartition
from ads.storage.files import FileRegion


@dataclass(slots=True)
class ShareRead:
    """One partition's part of a share fetch."""

    error: ErrorCode = ErrorCode.NONE
    records: FileRegion | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)


# One acknowledgement batch: first offset, last offset, acknowledge types.
AckBatch = tuple[int, int, Sequence[int]]


class SharePartitionManager:
    def __init__(self, replicas: ReplicaManager, config: ShareConfig, auto_offset_reset: str,
                 clock: Clock) -> None:
        self.replicas = replicas
        self.config = config
        self.auto_offset_reset = auto_offset_reset
        self.clock = clock
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}

    def _share_partition(self, group_id: str, tp: TopicPartition
                         ) -> SharePartition | ErrorCode:
        try:
            part = self.replicas.partition(tp.topic, tp.partition)
        except PartitionError as exc:
            return exc.code
        sp = self.partitions.get((group_id, tp))
        if sp is None:
            start = (part.log_start_offset if self.auto_offset_reset == "earliest"
                     else part.high_watermark)
            sp = SharePartition(start, self.config)
            self.partitions[(group_id, tp)] = sp
        else:
            sp.move_start(part.log_start_offset)
        return sp

    def leadership_changed(self, topic: str, index: int, leader: bool) -> None:
        """A partition no longer led here takes its share-partitions with it."""
        if leader:
            return
        tp = TopicPartition(topic, index)
        for key in [k for k in self.partitions if k[1] == tp]:
            del self.partitions[key]

    # -- acknowledgements ------------------------------------------------------------
    def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                    batches: Iterable[AckBatch]) -> ErrorCode:
        """The partition's acknowledgement batches; the last error of any of them."""
        sp = self._share_partition(group_id, tp)
        if isinstance(sp, ErrorCode):
            return sp
        now = self.clock.time_ms()
        error = ErrorCode.NONE
        for first, last, types in batches:
            result = sp.acknowledge(member_id, first, last, types, now)
            if result is not ErrorCode.NONE:
                error = result
        # Released records may be what another member's waiting fetch wants.
        self.replicas.fetch_purgatory.check_and_complete(tp)
        return error

    def release(self, group_id: str, member_id: str, tps: Iterable[TopicPartition]) -> None:
        """A closed share session: the member's acquired records go back."""
        for tp in tps:
            sp = self.partitions.get((group_id, tp))
            if sp is not None and sp.release_member(member_id):
                self.replicas.fetch_purgatory.check_and_complete(tp)

    # -- acquisition -----------------------------------------------------------------
    def fetch(self, group_id: str, member_id: str, tps: list[TopicPartition],
              max_wait_ms: int, max_bytes: int, max_records: int
              ) -> dict[TopicPartition, ShareRead] | Awaitable[dict[TopicPartition, ShareRead]]:
        """Acquires records of the partitions; waits up to `max_wait_ms` for some."""
        reads = self._acquire(group_id, member_id, tps, max_bytes, max_records)
        if max_wait_ms <= 0 or not tps or _answered(reads):
            return reads
        # Parked in this same step, so that no append between the read and the wait is
        # missed (as `ReplicaManager.fetch` does).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000.0
        op = self._park(group_id, tps, deadline - loop.time())
        return self._fetch_later(group_id, member_id, tps, max_bytes, max_records, op,
                                 deadline)

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
                           max_bytes: int, max_records: int, op: DelayedFetch,
                           deadline: float) -> dict[TopicPartition, ShareRead]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await op.future
            finally:
                op.complete()  # a cancelled request leaves no timer or watcher behind
            reads = self._acquire(group_id, member_id, tps, max_bytes, max_records)
            remaining = deadline - loop.time()
            if _answered(reads) or remaining <= 0:
                return reads
            op = self._park(group_id, tps, remaining)

    def _acquire(self, group_id: str, member_id: str, tps: list[TopicPartition],
                 max_bytes: int, max_records: int) -> dict[TopicPartition, ShareRead]:
        now = self.clock.time_ms()
        reads: dict[TopicPartition, ShareRead] = {}
        targets: list[tuple[TopicPartition, SharePartition]] = []
        fetches: list[FetchPartition] = []
        for tp in tps:
            sp = self._share_partition(group_id, tp)
            if isinstance(sp, ErrorCode):
                reads[tp] = ShareRead(sp)
                continue
            sp.expire(now)
            offset = sp.next_fetch_offset()
            reads[tp] = ShareRead()
            if offset is not None:
                targets.append((tp, sp))
                fetches.append(FetchPartition(tp.topic, tp.partition, offset, max_bytes, -1))
        if not fetches:
            return reads
        result = self.replicas.fetch(fetches, FetchParams(max_bytes, 0, 0, False, False))
        assert not isinstance(result, Awaitable)  # noqa: S101 - max_wait_ms 0 never waits
        budget = max_records
        for (tp, sp), read in zip(targets, result.reads, strict=True):
            if read.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                sp.move_start(read.log_start_offset)
                continue
            if read.error is not ErrorCode.NONE:
                reads[tp] = ShareRead(read.error)
                continue
            if read.records is None or budget <= 0:
                continue
            batches = read.records.batches()
            acquired, lo, hi = sp.acquire(member_id, [(b, last) for _, b, last in batches],
                                          budget, now)
            if acquired:
                budget -= sum(a[1] - a[0] + 1 for a in acquired)
                first, last_region = batches[lo][0], batches[hi - 1][0]
                region = replace(first, length=last_region.offset + last_region.length
                                 - first.offset)
                reads[tp] = ShareRead(ErrorCode.NONE, region, acquired)
        return reads


def _answered(reads: dict[TopicPartition, ShareRead]) -> bool:
    return any(r.acquired or r.error is not ErrorCode.NONE for r in reads.values())
