"""The transaction coordinator: the one object the broker's transaction handlers call.

It routes a transactional id to its `__transaction_state` partition (`abs(java hash(id)) %
transaction.state.log.num.partitions`, as FindCoordinator with key type 1 computes it) and
that partition's shard (`shard.py`) through the coordinator runtime, which answers
COORDINATOR_LOAD_IN_PROGRESS while the partition loads and NOT_COORDINATOR when this broker
does not lead it. The state machine and its answers are in `state.py`.

What it is handed (it never sees the broker): the internal topic, the topic metadata, the
clock, `new_producer_id` (the broker's producer id blocks) and a `MarkerWriter` that writes
COMMIT/ABORT markers to the partitions of a transaction wherever they are led. Markers are
written by a task per transaction once its PREPARE_* record is committed; when they all are,
the shard writes COMPLETE_*. A marker that cannot be written yet (its partition has no
leader) is retried with a backoff until it is, or until this broker stops coordinating the
id (the next coordinator sends them again from the PREPARE_* state it loads).

Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from ads.common.clock import Clock
from ads.common.partitions import TopicPartition
from ads.common.tasks import TaskSet
from ads.coordinator.runtime import CoordinatorRuntime, RuntimeCoordinator, Write
from ads.coordinator.timer import Timers
from ads.coordinator.topic import InternalTopic, TopicMetadata
from ads.coordinator.transaction.shard import Answer, TxnConfig, TxnCounts, TxnShard
from ads.coordinator.transaction.state import (
    STATE_NAMES,
    TransactionMetadata,
    TxnState,
)
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")

_MARKER_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)
# A partition refusing a marker for these has seen a newer producer epoch or coordinator:
# whoever wrote that decides the transaction, so no marker is retried and the completion is
# not written (Kafka's rule).
_MOOT = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: set[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        """Writes the marker to each partition; returns the error of each one that failed
        (UNKNOWN_TOPIC_OR_PARTITION for a deleted partition counts as done)."""
        ...

    async def close(self) -> None:
        """Closes its connections to other brokers."""
        ...


@dataclass(frozen=True, slots=True)
class TxnDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[TopicPartition, ...] = ()


class TransactionCoordinator(RuntimeCoordinator[TxnShard]):
    def __init__(self, topic: InternalTopic, topics: TopicMetadata, clock: Clock,
                 new_producer_id: Callable[[], Awaitable[int]], markers: MarkerWriter,
                 config: TxnConfig | None = None) -> None:
        self.config = config or TxnConfig()
        self.topics = topics
        self.clock = clock
        self._new_producer_id = new_producer_id
        self.markers = markers
        self.runtime: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            topic, clock, self._new_shard)
        self._marker_tasks = TaskSet(log)
        # Completed transactions, counted by the shards (for /metrics)
        self.counts = TxnCounts()

    def _new_shard(self, partition: int, timers: Timers[Write]) -> TxnShard:
        return TxnShard(partition, timers, self.config, self._send_markers, self.counts)

    def partition_of(self, txn_id: str) -> int:
        return self.runtime.partition_for(txn_id)

    def _route(self, txn_id: str | None) -> tuple[int, TxnShard] | ErrorCode:
        if not txn_id:
            return ErrorCode.INVALID_REQUEST
        partition = self.partition_of(txn_id)
        shard = self.runtime.shard(partition)
        return (partition, shard) if shard is not None else self.runtime.error(partition)

    async def _perform(self, partition: int, write: Write | None, answer: Answer) -> Answer:
        """The write's continuation fills in the answer (its error, or what the re-check
        of the committed state found)."""
        if write is not None:
            await self.runtime.write(partition, write)
        return answer

    # -- the APIs ------------------------------------------------------------------------
    async def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> Answer:
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return Answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        routed = self._route(txn_id)
        if isinstance(routed, ErrorCode):
            return Answer(routed)
        fresh = None
        if routed[1].needs_producer_id(txn_id):
            fresh = await self._new_producer_id()
            routed = self._route(txn_id)  # the partition may have moved meanwhile
            if isinstance(routed, ErrorCode):
                return Answer(routed)
        partition, shard = routed
        write, answer = shard.init_producer_id(txn_id, timeout_ms, producer_id, producer_epoch,
                                               fresh)
        return await self._perform(partition, write, answer)

    def _check_partitions(self, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        unknown = {}
        for tp in partitions:
            topic, index = tp
            count = self.topics.topic_partitions(topic)
            if count is None or not 0 <= index < count:
                unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return unknown

    async def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition]
                             ) -> dict[TopicPartition, ErrorCode]:
        """The error of each partition: UNKNOWN_TOPIC_OR_PARTITION for unknown ones and
        OPERATION_NOT_ATTEMPTED for the others then, as in Kafka; else the transaction's."""
        routed = self._route(txn_id)
        if isinstance(routed, ErrorCode):
            return dict.fromkeys(partitions, routed)
        unknown = self._check_partitions(partitions)
        if unknown:
            return {p: unknown.get(p, ErrorCode.OPERATION_NOT_ATTEMPTED) for p in partitions}
        partition, shard = routed
        write, answer = shard.add_partitions(txn_id, producer_id, producer_epoch, partitions)
        answer = await self._perform(partition, write, answer)
        return dict.fromkeys(partitions, answer.error)

    def verify_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ verify_only and the produce check (KIP-890 part 1)."""
        routed = self._route(txn_id)
        if isinstance(routed, ErrorCode):
            return dict.fromkeys(partitions, routed)
        shard = routed[1]
        return {p: shard.verify(txn_id, producer_id, producer_epoch, p) for p in partitions}

    async def add_offsets(self, txn_id: str, producer_id: int, producer_epoch: int,
                          offsets_partition: TopicPartition) -> ErrorCode:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the
        transaction, so its offsets get the transaction's marker."""
        routed = self._route(txn_id)
        if isinstance(routed, ErrorCode):
            return routed
        partition, shard = routed
        write, answer = shard.add_partitions(txn_id, producer_id, producer_epoch,
                                             [offsets_partition])
        return (await self._perform(partition, write, answer)).error

    async def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> Answer:
        routed = self._route(txn_id)
        if isinstance(routed, ErrorCode):
            return Answer(routed)
        partition, shard = routed
        write, answer = shard.end_txn(txn_id, producer_id, producer_epoch, commit)
        return await self._perform(partition, write, answer)

    def describe(self, txn_id: str) -> TxnDescription:
        routed = self._route(txn_id)
        if isinstance(routed, ErrorCode):
            return TxnDescription(txn_id, routed)
        meta = routed[1].txns.get(txn_id)
        if meta is None or meta.state is TxnState.DEAD:
            return TxnDescription(txn_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return TxnDescription(txn_id, ErrorCode.NONE, meta.state.kafka_name, meta.timeout_ms,
                              meta.start_ms, meta.producer_id, meta.producer_epoch,
                              tuple(sorted(meta.partitions)))

    def list_transactions(self, states: list[str], producer_ids: list[int],
                          min_duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[str], list[TransactionMetadata]]:
        """ListTransactions: the error, the unknown state filters, the matching ids."""
        unknown = [s for s in states if s not in STATE_NAMES]
        wanted = {STATE_NAMES[s] for s in states if s in STATE_NAMES}
        pids = set(producer_ids)
        now = self.clock.time_ms()
        out = [meta for _, shard in self.runtime.shards() for meta in shard.txns.values()
               if meta.state is not TxnState.DEAD
               and (not states or meta.state in wanted)
               and (not pids or meta.producer_id in pids)
               and (min_duration_ms < 0 or now - meta.start_ms >= min_duration_ms)]
        error = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.loading()
                 else ErrorCode.NONE)
        return error, unknown, out

    # -- markers -------------------------------------------------------------------------
    def _send_markers(self, partition: int, meta: TransactionMetadata) -> None:
        self._marker_tasks.spawn(self._markers(partition, meta),
                                 f"writing the markers of {meta.transactional_id!r}")

    async def _markers(self, partition: int, meta: TransactionMetadata) -> None:
        commit = meta.state is TxnState.PREPARE_COMMIT
        left = set(meta.partitions)
        attempt = 0
        while left:
            coordinator_epoch = self.runtime.leader_epoch(partition)
            if self.runtime.shard(partition) is None:
                return  # no longer the coordinator: the next one sends them
            try:
                failed = await self.markers.write_markers(
                    meta.producer_id, meta.producer_epoch, commit, coordinator_epoch, left)
            except Exception:
                log.exception("writing the markers of %r failed", meta.transactional_id)
                failed = dict.fromkeys(left, ErrorCode.UNKNOWN_SERVER_ERROR)
            moot = {p: e for p, e in failed.items() if e in _MOOT}
            if moot:
                # A partition has seen a newer producer epoch or coordinator: this
                # coordinator is stale. Kafka stops sending and never writes the
                # completion; the coordinator that fenced this one completes it.
                log.warning("markers of %r stopped: %s; the transaction is left to the "
                            "newer coordinator", meta.transactional_id,
                            ", ".join(f"{p[0]}-{p[1]} {e.name}" for p, e in sorted(moot.items())))
                return
            left = set(failed)
            if left:
                await asyncio.sleep(_MARKER_BACKOFF_S[min(attempt, len(_MARKER_BACKOFF_S) - 1)])
                attempt += 1
        for backoff in itertools.chain(_MARKER_BACKOFF_S, itertools.repeat(_MARKER_BACKOFF_S[-1])):
            shard = self.runtime.shard(partition)
            write = None if shard is None else shard.markers_written(
                meta.transactional_id, meta.producer_id, meta.producer_epoch)
            if write is None or await self.runtime.write(partition, write) is ErrorCode.NONE:
                return  # completed, or no longer this coordinator's to complete
            await asyncio.sleep(backoff)

    # -- time and shutdown ---------------------------------------------------------------
    def shutdown(self) -> None:
        super().shutdown()
        self._marker_tasks.cancel()
