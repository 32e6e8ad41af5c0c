"""The replica manager: every partition replica on this broker, and the requests that wait.

Handlers reach partitions only through it (Kafka's ReplicaManager):

- `partition(topic, index)` for a partition this broker leads: UNKNOWN_TOPIC_OR_PARTITION
  when it has no replica of it, NOT_LEADER_OR_FOLLOWER when another broker leads it.
- `append_records` is the one append path, for every write to a partition: a leader's
  producers' batches (origin CLIENT), coordinators' records and transaction markers
  (COORDINATOR), and a follower's copy of its leader's batches (REPLICATION, from the
  replica fetcher), each validated as its origin requires; with acks=all the result waits
  in the produce purgatory until the high watermark passes what it appended
  (`Appended.pending`, None when it already has, as always on one broker). A marker is
  committed like data.
- `end_offset_for_epoch`, `active_producers`, `delete_records`, and the partition
  `partition` or `replica` returns (its offsets, `offset_for_timestamp`): the queries of
  ListOffsets, OffsetForLeaderEpoch, DescribeProducers and DeleteRecords. Handlers never
  reach a partition's log: errors come as `PartitionError` with the Kafka code (storage
  and record errors mapped once, in `PartitionError.of`).
- `fetch` reads what a fetch asks for (one segment's file region per partition, never a
  copy) and, with fewer than `min_bytes` found, waits in the fetch purgatory until an append
  or its deadline.
- `apply_delta`: a batch of metadata changes (`MetadataDelta`) applied in one place:
  replicas opened (their logs made in the `logs` store), led, followed, and dropped with
  their logs; the leadership listeners (the coordinators of internal topics) hear of each
  change.
- `add_partition`, `remove_partition`, `update_config`: the partitions the broker serves.
- `become_leader`, `become_follower`: leadership changes; what waits on the partition wakes
  and `on_leadership_change` listeners (the coordinators of internal topics) hear of it.

The high watermark advances only in `Partition.maybe_advance_high_watermark`, after an
append here and after a follower's fetch reports its log end offset. Consumers read only
below it; followers read up to the log end offset.

Replication: a fetch with a replica id (`FetchParams.replica_id`) is a follower's. It is
checked for divergence first (its last fetched epoch must end at or after its fetch offset
in this log, else the answer names where it diverges), then records where the follower is,
which may advance the high watermark (waking acks=all produces) and let the follower join
the ISR. ISR changes go through `isr_writer` (the metadata store's conditional write) and
apply here only once recorded; `shrink_isrs` runs on a timer. Followed partitions are
handed to `fetchers` (`ads.replication.fetcher`), which write what they fetch back through
`append_records` (REPLICATION).

Not thread-safe: used from the event loop thread only (DESIGN rule 6).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ads.common.clock import Clock, SystemClock
from ads.common.later import Later
from ads.common.partitions import TopicPartition
from ads.common.tasks import TaskSet
from ads.net.regions import SENDFILE_MIN_BYTES
from ads.protocol.errors import ErrorCode
from ads.replication.partition import (
    AppendOrigin,
    Partition,
    PartitionError,
    ProduceResult,
    VerificationGuard,
)
from ads.replication.purgatory import DelayedFetch, DelayedProduce, Purgatory

if TYPE_CHECKING:
    import uuid

    from ads.metadata.model import PartitionState, TopicState
    from ads.storage.config import LogConfig
    from ads.storage.files import FileRegion
    from ads.storage.log import Log
    from ads.storage.producer_state import ProducerStateEntry
    from ads.storage.txn_index import AbortedTxn

log = logging.getLogger("ads.replication")

# (topic, index, now leads, leader epoch: None when the replica is gone from this broker)
LeadershipListener = Callable[[str, int, bool, int | None], None]
# (topic, index, leader epoch, new ISR) -> whether the store recorded it.
IsrWriter = Callable[[str, int, int, list[int]], Awaitable[bool]]


class LogStore(Protocol):
    """Where partitions' logs are made and deleted: the log manager (`ads.storage.manager`)."""

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None
                   ) -> Log: ...

    def delete_log(self, topic: str, partition: int) -> None: ...

    @property
    def log_dirs(self) -> Sequence[Path]:
        """The directories partitions are placed in (`log.dirs`)."""
        ...


class FollowedPartitions(Protocol):
    """Where followed partitions go: the replica fetchers (`ads.replication.fetcher`)."""

    def follow(self, part: Partition) -> None: ...

    def unfollow(self, key: TopicPartition) -> None: ...

    def failed_partitions(self) -> int:
        """Partitions no longer fetched after an error of their own log."""
        ...


class ReplicaSelector(Protocol):
    """KIP-392's `replica.selector.class`: the replica a consumer in `rack` reads the
    partition from (the leader's node id to keep it on the leader)."""

    def select(self, part: Partition, rack: str, fetch_offset: int) -> int: ...


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: the leader if it is in the consumer's rack or no
    replica is; otherwise, of the in-sync followers in that rack that have the fetch offset,
    the one furthest ahead (the lowest id among equals)."""

    def __init__(self, rack_of: Callable[[int], str | None]) -> None:
        self._rack_of = rack_of

    def select(self, part: Partition, rack: str, fetch_offset: int) -> int:
        leader = part.node_id
        if self._rack_of(leader) == rack:
            return leader
        ends = part.replica_end_offsets
        near = [(ends.get(r, -1), -r) for r in part.isr
                if r != leader and self._rack_of(r) == rack and ends.get(r, -1) >= fetch_offset]
        return -max(near)[1] if near else leader


@dataclass(frozen=True, slots=True)
class MetadataDelta:
    """What changed in the metadata for this broker's replicas: each topic whose state
    changed (with its logs' settings, for replicas new here), the topics deleted, and
    whether this broker is fenced (its registration lost: it leads nothing and follows
    nobody)."""

    topics: Sequence[tuple[TopicState, LogConfig]] = ()
    deleted: Sequence[str] = ()
    fenced: bool = False


class Appended:
    """What `append_records` did: each partition's result (or error), and for acks=all the
    wait for the high watermark (`pending`: None when every batch is committed already)."""

    __slots__ = ("pending", "results")

    def __init__(self, results: dict[TopicPartition, ProduceResult | PartitionError],
                 pending: DelayedProduce | None) -> None:
        self.results = results
        self.pending = pending

    def errors(self) -> dict[TopicPartition, ErrorCode]:
        """The partitions that failed, appending or (once `pending` is done) waiting."""
        found = {k: r.code for k, r in self.results.items() if isinstance(r, PartitionError)}
        if self.pending is not None:
            found.update(self.pending.errors)
        return found

    async def committed(self) -> dict[TopicPartition, ErrorCode]:
        """Waits for the acks=all wait to end; the errors then."""
        if self.pending is not None:
            await self.pending.future
        return self.errors()


class FetchPartition(NamedTuple):
    """One partition of a fetch: `topic` is None when the request named an unknown id."""

    topic: str | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int = -1  # a follower's, to find where its log diverges


class FetchParams(NamedTuple):
    max_bytes: int
    min_bytes: int
    max_wait_ms: int
    read_committed: bool
    check_epoch: bool  # Fetch v9+: fence requests from older leader epochs
    replica_id: int = -1  # >= 0: a follower's fetch
    # A consumer's rack (Fetch v11+, "" when it names none); None: a fetch that only a
    # leader answers (a follower's, or a consumer's before v11), as in Kafka (KIP-392).
    client_rack: str | None = None
    # Regions of at most this many bytes are read into memory at once, as the network layer
    # would read them before sending anyway: a region holds its segment file open until
    # sent, and a response over thousands of partitions would hold a descriptor for each
    # (`ads.storage.open_files`). 0 keeps every region (a share fetch looks into them).
    inline_bytes: int = SENDFILE_MIN_BYTES


class PartitionRead(NamedTuple):  # a tuple: built per partition of every fetch
    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: FileRegion | bytes | None  # bytes: read already (`FetchParams.inline_bytes`)
    size: int
    # read_committed: the aborted transactions overlapping the read (None otherwise).
    aborted: list[AbortedTxn] | None = None
    # For a follower whose log diverges: the epoch and end offset to truncate to.
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    # KIP-392: the replica the consumer should fetch from instead (no records then).
    preferred_read_replica: int = -1


UNKNOWN_READ = PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, None, 0)
NOT_LEADER_READ = PartitionRead(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, None, 0)


class FetchResult(NamedTuple):
    reads: list[PartitionRead]  # in the order of the request's partitions
    bytes: int
    error: bool
    keys: list[TopicPartition]  # the partitions found, which a waiting fetch watches


class ReplicaManager:
    def __init__(self, node_id: int,
                 known: Callable[[str, int], bool] | None = None,
                 clock: Clock | None = None) -> None:
        """`known(topic, index)`: whether the partition exists in the cluster; one this
        broker does not hold then answers NOT_LEADER_OR_FOLLOWER (clients refresh their
        metadata and go to its leader), an unknown one UNKNOWN_TOPIC_OR_PARTITION."""
        self.node_id = node_id
        self._known = known or (lambda _topic, _index: False)
        self.clock: Clock = clock or SystemClock()
        self._partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory = Purgatory("fetch")
        self.produce_purgatory = Purgatory("produce")
        self._listeners: list[LeadershipListener] = []
        self.isr_writer: IsrWriter | None = None
        # ISR changes this broker recorded as leader (Kafka's IsrShrinksPerSec/IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.fetchers: FollowedPartitions | None = None
        self.logs: LogStore | None = None  # set by the broker; `apply_delta` makes logs there
        # KIP-392: which replica a consumer with a rack should read from (None: the leader,
        # always; the broker sets it for `replica.selector.class`).
        self.replica_selector: ReplicaSelector | None = None
        self._isr_writes = TaskSet(log)

    # -- the partitions ------------------------------------------------------------------
    def get(self, topic: str, index: int) -> Partition | None:
        """This broker's replica of the partition, leader or not."""
        return self._partitions.get(TopicPartition(topic, index))

    def __contains__(self, key: object) -> bool:
        """Whether this broker leads the `(topic, index)` partition (a `TopicPartition`, or
        a plain tuple that equals one)."""
        if isinstance(key, TopicPartition):
            part = self._partitions.get(key)
        elif isinstance(key, tuple) and len(key) == 2:
            part = self._partitions.get(TopicPartition(*key))
        else:
            return False
        return part is not None and part.is_leader

    def __iter__(self) -> Iterator[Partition]:
        return iter(list(self._partitions.values()))

    def partition(self, topic: str, index: int) -> Partition:
        """The partition if this broker leads it; PartitionError otherwise."""
        part = self._partitions.get(TopicPartition(topic, index))
        if part is None:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER if self._known(topic, index)
                                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not part.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return part

    def replica(self, topic: str, index: int) -> Partition:
        """This broker's replica of the partition, leader or follower; PartitionError
        UNKNOWN_TOPIC_OR_PARTITION without one."""
        part = self._partitions.get(TopicPartition(topic, index))
        if part is None:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return part

    def log_dirs(self) -> Sequence[Path]:
        """The directories this broker places partitions in (DescribeLogDirs)."""
        return self.logs.log_dirs if self.logs is not None else ()

    # -- queries (ListOffsets, OffsetForLeaderEpoch, DescribeProducers, DeleteRecords) ---
    def end_offset_for_epoch(self, topic: str, index: int, leader_epoch: int,
                             current_leader_epoch: int = -1) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: ``(epoch, end offset)``."""
        part = self.partition(topic, index)
        part.check_leader_epoch(current_leader_epoch)
        return part.end_offset_for_epoch(leader_epoch)

    def active_producers(self, topic: str, index: int) -> list[ProducerStateEntry]:
        """DescribeProducers on any replica, as in Kafka (tools may ask a given broker)."""
        return self.replica(topic, index).active_producers

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords on the leader: offset -1 is the high watermark; returns the new
        log start offset."""
        return self.partition(topic, index).delete_records(offset)

    def add_partition(self, topic: str, topic_id: uuid.UUID, index: int, log: Log,
                      leader_epoch: int, config: LogConfig, leader: bool = True) -> Partition:
        """Serves a partition of a new or reopened topic, led here from `leader_epoch`
        unless `leader` is False (then `become_leader` or `become_follower` follows)."""
        key = TopicPartition(topic, index)
        part = self._partitions.get(key)
        if part is None:
            part = Partition(topic, topic_id, index, log, leader_epoch, self.node_id, config,
                             leader)
            self._partitions[key] = part
        return part

    def remove_partition(self, topic: str, index: int) -> None:
        """The partition is deleted: whatever waits on it answers now, and the leadership
        listeners hear that it is gone (leader epoch None)."""
        key = TopicPartition(topic, index)
        if self._partitions.pop(key, None) is not None:
            if self.fetchers is not None:
                self.fetchers.unfollow(key)
            self._wake(key)
            for listener in self._listeners:
                listener(topic, index, False, None)

    # -- metadata changes, applied in one place ---------------------------------------------
    def apply_delta(self, delta: MetadataDelta) -> None:
        """Serves this broker's replicas as the changed metadata says: a deleted topic's
        replicas go with their logs; for each changed topic, a replica new here gets its log
        (`logs`), one moved to other brokers is dropped with its log, and each leads or
        follows in the role its partition's state names, from its leader epoch."""
        for name in delta.deleted:
            for part in [p for p in self._partitions.values() if p.topic == name]:
                self._drop(name, part.index)
        for topic, config in delta.topics:
            self._apply_topic(topic, config, delta.fenced)

    def _apply_topic(self, topic: TopicState, config: LogConfig, fenced: bool) -> None:
        for p in topic.partitions:
            part = self._partitions.get(TopicPartition(topic.name, p.partition))
            if self.node_id not in p.replicas:
                if part is not None:  # moved to other brokers
                    self._drop(topic.name, p.partition)
                continue
            if part is None:
                assert self.logs is not None, "the broker sets the log store"
                plog = self.logs.create_log(topic.name, p.partition, config)
                part = self.add_partition(topic.name, topic.topic_id, p.partition, plog,
                                          max(p.leader_epoch, 0), config, leader=False)
            if p.leader_epoch >= 0:  # else no leader is elected yet
                self._apply_role(part, p, fenced)

    def _apply_role(self, part: Partition, state: PartitionState, fenced: bool) -> None:
        leads = state.leader == self.node_id and not fenced
        if leads and (not part.is_leader or part.leader_epoch < state.leader_epoch):
            self.become_leader(part.topic, part.index, state.leader_epoch, state.isr,
                               state.replicas)
        elif leads:
            self.update_isr(part.topic, part.index, state.leader_epoch, state.isr,
                            state.replicas)
        elif (part.is_leader or part.leader_epoch < state.leader_epoch
              or part.leader_id != state.leader):
            self.become_follower(part.topic, part.index,
                                 max(state.leader_epoch, part.leader_epoch),
                                 -1 if fenced else state.leader)

    def _drop(self, topic: str, index: int) -> None:
        self.remove_partition(topic, index)
        if self.logs is not None:
            self.logs.delete_log(topic, index)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for part in self._partitions.values():
            if part.topic == topic:
                part.config = config

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        """`listener(topic, index, is_leader, leader_epoch)` hears every leadership change,
        and a replica's removal (not leader, epoch None)."""
        self._listeners.append(listener)

    def become_leader(self, topic: str, index: int, leader_epoch: int,
                      isr: list[int] | None = None, replicas: list[int] | None = None) -> None:
        """Leads the partition from `leader_epoch` (a newer epoch fences older ones)."""
        part = self.replica(topic, index)
        if leader_epoch < part.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH,
                                 f"epoch {leader_epoch} is older than {part.leader_epoch}")
        if self.fetchers is not None:
            self.fetchers.unfollow(part.key)
        part.make_leader(leader_epoch, isr or [self.node_id], replicas, self.clock.time_ms())
        log.info("%s-%d: leader from epoch %d at offset %d, ISR %s", topic, index, leader_epoch,
                 part.log_end_offset, part.isr)
        self._wake(part.key)
        for listener in self._listeners:
            listener(topic, index, True, leader_epoch)

    def become_follower(self, topic: str, index: int, leader_epoch: int,
                        leader_id: int = -1) -> None:
        """`leader_id` leads from `leader_epoch`: produce and consumer fetches here get
        NOT_LEADER_OR_FOLLOWER, the requests waiting on the partition answer now, and the
        replica fetches from the leader (none while `leader_id` is -1 or this broker)."""
        part = self.replica(topic, index)
        if leader_epoch < part.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH,
                                 f"epoch {leader_epoch} is older than {part.leader_epoch}")
        part.make_follower(leader_epoch, leader_id)
        log.info("%s-%d: follower of broker %d from epoch %d at offset %d", topic, index,
                 leader_id, leader_epoch, part.log_end_offset)
        self._wake(part.key)
        if self.fetchers is not None:
            if leader_id < 0 or leader_id == self.node_id:
                self.fetchers.unfollow(part.key)
            else:
                self.fetchers.follow(part)
        for listener in self._listeners:
            listener(topic, index, False, leader_epoch)

    def update_isr(self, topic: str, index: int, leader_epoch: int, isr: list[int],
                   replicas: list[int] | None = None) -> None:
        """The store's ISR (and replicas, which a reassignment changes) for a partition led
        here at `leader_epoch`; other epochs are left to become_leader/follower."""
        part = self._partitions.get(TopicPartition(topic, index))
        if part is None or not part.is_leader or part.leader_epoch != leader_epoch:
            return
        if replicas is not None:
            part.replicas = list(replicas)
        if part.isr != isr:
            part.set_isr(isr)
            part.maybe_advance_high_watermark()
            self._wake(part.key)  # waiting acks=all produces re-check min.insync.replicas

    # -- the ISR ---------------------------------------------------------------------------
    def shrink_isrs(self, lag_ms: int) -> None:
        """Timer: drops ISR members not caught up for `lag_ms` (replica.lag.time.max.ms)."""
        now = self.clock.time_ms()
        for part in list(self._partitions.values()):
            if part.is_leader and len(part.isr) > 1:
                late = part.out_of_sync(now, lag_ms)
                if late:
                    log.info("%s-%d: followers %s not caught up for %d ms leave the ISR",
                             part.topic, part.index, late, lag_ms)
                    self._propose_isr(part, [r for r in part.isr if r not in late])

    def _propose_isr(self, part: Partition, isr: list[int]) -> None:
        writer = self.isr_writer
        if writer is None or part.isr_change_pending:
            return
        part.isr_change_pending = True
        epoch = part.leader_epoch
        shrinks = len(isr) < len(part.isr)

        async def record() -> None:
            try:
                recorded = await writer(part.topic, part.index, epoch, isr)
            except Exception as exc:  # noqa: BLE001 - the store unreachable: tried again later
                log.warning("%s-%d: recording the ISR %s failed: %r", part.topic, part.index,
                            isr, exc)
                recorded = False
            finally:
                part.isr_change_pending = False
            if recorded:
                log.info("%s-%d: ISR is now %s (leader epoch %d)", part.topic, part.index, isr,
                         epoch)
                if shrinks:
                    self.isr_shrinks += 1
                else:
                    self.isr_expands += 1
                self.update_isr(part.topic, part.index, epoch, isr)

        self._isr_writes.spawn(record(), f"recording the ISR of {part.topic}-{part.index}")

    def _wake(self, key: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)

    # -- the one append path ---------------------------------------------------------------
    def append_records(self, entries: Mapping[TopicPartition, memoryview | bytes | None],
                       origin: AppendOrigin, required_acks: int, timeout_ms: int,
                       guards: Mapping[TopicPartition, VerificationGuard] | None = None,
                       leader_offsets: Mapping[TopicPartition, tuple[int, int]] | None = None,
                       ) -> Appended:
        """Appends each partition's batch: the one way anything is written to a partition.

        CLIENT and COORDINATOR: a leader's writes (producers' batches; coordinators'
        records and transaction markers) on partitions led here. With `required_acks` -1
        the result waits in the produce purgatory until each partition's high watermark
        passes its batch (`Appended.pending`, None when nothing waits). `guards`: the
        KIP-890 verification each transactional batch was admitted under
        (`start_verification`); an append whose transaction ended meanwhile fails.

        REPLICATION: a follower's copy of its leader's batches (the replica fetcher's),
        on partitions followed here, with `leader_offsets` giving each partition's (high
        watermark, log start offset) as the leader sent them; local only (`required_acks`
        and `timeout_ms` are not used), and consumers reading this replica (KIP-392) wake."""
        replicating = origin is AppendOrigin.REPLICATION
        copied_from = leader_offsets or {}
        results: dict[TopicPartition, ProduceResult | PartitionError] = {}
        waiting: dict[TopicPartition, tuple[Partition, int]] = {}
        now_ms = self.clock.time_ms()
        partitions = self._partitions
        for key, records in entries.items():
            try:
                part = partitions.get(key)
                if replicating:
                    results[key] = self._copy(key, part, records, copied_from[key])
                    self.fetch_purgatory.check_and_complete(key)
                    continue
                if part is None or not part.is_leader:
                    part = self.partition(*key)  # raises the partition's error
                if guards and key in guards:
                    part.check_verification(guards[key])
                result = part.append(records, origin, required_acks, now_ms)
            except PartitionError as exc:
                results[key] = exc.detached()
                continue
            except OSError as exc:  # one line: what ran out (space, descriptors) says it all
                log.error("%s-%d: appending failed: %s", key[0], key[1], exc)  # noqa: TRY400
                results[key] = PartitionError.of(exc)
                continue
            results[key] = result
            self._appended(part)
            if required_acks == -1 and part.high_watermark < result.next_offset:
                waiting[key] = (part, result.next_offset)
        return Appended(results, self._delay(waiting, timeout_ms))

    def _copy(self, key: TopicPartition, part: Partition | None,
              records: memoryview | bytes | None, leader: tuple[int, int]) -> ProduceResult:
        # A follower's append: the partition checks its role and the batches' CRCs.
        if part is None:
            part = self.replica(*key)  # raises UNKNOWN_TOPIC_OR_PARTITION
        high_watermark, log_start_offset = leader
        return part.append_replicated(
            records if isinstance(records, memoryview) else memoryview(records or b""),
            high_watermark, log_start_offset)

    def _appended(self, part: Partition) -> None:
        if part.maybe_advance_high_watermark():
            self._wake(part.key)
        else:
            # Followers' fetches wait for the records themselves, not for the high
            # watermark: wake them now, or acks=all waits out replica.fetch.wait.max.ms.
            self.fetch_purgatory.check_and_complete(part.key)

    def _delay(self, waiting: dict[TopicPartition, tuple[Partition, int]],
               timeout_ms: int) -> DelayedProduce | None:
        if not waiting:
            return None
        op = DelayedProduce(waiting)
        if not op.try_complete():
            self.produce_purgatory.watch(op, timeout_ms / 1000.0)
        return op

    def start_verification(self, topic: str, index: int, producer_id: int
                           ) -> VerificationGuard | None:
        """KIP-890: the guard a transactional append checks after its transaction was
        verified with a coordinator elsewhere (None: the partition is not led here)."""
        part = self._partitions.get(TopicPartition(topic, index))
        if part is None or not part.is_leader:
            return None
        return part.start_verification(producer_id)

    # -- fetch ---------------------------------------------------------------------------
    def fetch(self, targets: list[FetchPartition], params: FetchParams
              ) -> FetchResult | Later[FetchResult]:
        """Reads the partitions; waits for more data while below `min_bytes` (long poll).

        A fetch that waits is answered by a `Later`, completed within the step of the
        append (or the deadline) that wakes it: no task, no extra loop pass."""
        result = self._read(targets, params)
        min_bytes = max(params.min_bytes, 1)
        if (params.max_wait_ms <= 0 or result.bytes >= min_bytes or result.error
                or not result.keys):
            return result
        later: Later[FetchResult] = Later()
        self._park(targets, params, result.keys, params.max_wait_ms / 1000.0, None, later)
        return later

    def _park(self, targets: list[FetchPartition], params: FetchParams,
              keys: list[TopicPartition], timeout_s: float, deadline: float | None,
              later: Later[FetchResult]) -> None:
        """Parks in this same step (see the purgatory's header); reads again when woken."""
        op = DelayedFetch(keys)
        later.on_cancel = op.cancel  # a request gone leaves no timer or watcher behind
        self.fetch_purgatory.watch(op, timeout_s)
        op.woken = partial(self._woken, targets, params,
                           op.deadline if deadline is None else deadline, op, later)

    def _woken(self, targets: list[FetchPartition], params: FetchParams, deadline: float,
               op: DelayedFetch, later: Later[FetchResult]) -> None:
        try:
            result = self._read(targets, params)
        except Exception as exc:  # the fetch's own failure, not the waker's
            later.fail(exc)
            return
        remaining = deadline - op.future.get_loop().time()
        if result.bytes >= max(params.min_bytes, 1) or result.error or remaining <= 0:
            later.resolve(result)
        else:
            self._park(targets, params, result.keys, remaining, deadline, later)

    def _read(self, targets: list[FetchPartition], params: FetchParams) -> FetchResult:
        reads: list[PartitionRead] = []
        keys: list[TopicPartition] = []
        total = 0
        error = False
        remaining = params.max_bytes
        partitions = self._partitions
        follower = params.replica_id >= 0
        for t in targets:
            part = (partitions.get(TopicPartition(t.topic, t.partition)) if t.topic is not None
                    else None)
            if part is None:
                reads.append(NOT_LEADER_READ if t.topic is not None
                             and self._known(t.topic, t.partition) else UNKNOWN_READ)
                error = True
                continue
            keys.append(part.key)
            if not part.is_leader and (follower or params.client_rack is None):
                reads.append(PartitionRead(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, None, 0))
                error = True
                continue
            hw, lso, start = part.high_watermark, part.last_stable_offset, part.log_start_offset
            # One attribute test per partition when no selector is set (the default).
            if self.replica_selector is not None and params.client_rack and part.is_leader:
                preferred = self.replica_selector.select(part, params.client_rack,
                                                         t.fetch_offset)
                if preferred != self.node_id:  # answered at once, without records
                    reads.append(PartitionRead(ErrorCode.NONE, hw, lso, start, None, 0,
                                               preferred_read_replica=preferred))
                    error = True
                    continue
            try:
                if params.check_epoch or follower:
                    part.check_leader_epoch(t.current_leader_epoch)
                if follower:
                    diverged = self._follower_fetched(part, params.replica_id, t)
                    if diverged is not None:  # answered at once, not long-polled
                        reads.append(diverged)
                        error = True
                        continue
                    bound = part.log_end_offset
                    hw = part.high_watermark
                else:
                    bound = lso if params.read_committed else hw
                limit = max(0, min(t.max_bytes, remaining))
                region, size = part.read(t.fetch_offset, limit, total == 0, bound)
                records: FileRegion | bytes | None = region
                if region is not None and size <= params.inline_bytes:
                    records = part.read_bytes(region)
            except PartitionError as exc:
                reads.append(PartitionRead(exc.code, hw, lso, start, None, 0))
                error = True
                continue
            aborted = (part.aborted_transactions(t.fetch_offset, lso)
                       if params.read_committed and size else None)
            reads.append(PartitionRead(ErrorCode.NONE, hw, lso, start, records, size, aborted))
            total += size
            remaining -= size
        return FetchResult(reads, total, error, keys)

    def _follower_fetched(self, part: Partition, replica_id: int, t: FetchPartition
                          ) -> PartitionRead | None:
        """A follower's fetch: where its log diverges from this one, or None after noting
        where it is (the high watermark may move, the follower may join the ISR)."""
        if t.last_fetched_epoch >= 0:
            epoch, end = part.log.end_offset_for_epoch(t.last_fetched_epoch)
            if epoch < t.last_fetched_epoch or end < t.fetch_offset:
                return PartitionRead(ErrorCode.NONE, part.high_watermark,
                                     part.last_stable_offset, part.log_start_offset, None, 0,
                                     diverging_epoch=epoch, diverging_end_offset=end)
        part.record_follower_fetch(replica_id, t.fetch_offset, self.clock.time_ms())
        if part.maybe_advance_high_watermark():
            self._wake(part.key)
        if part.may_join_isr(replica_id):
            self._propose_isr(part, [*part.isr, replica_id])
        return None
