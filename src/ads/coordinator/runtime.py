"""The coordinator runtime: one state machine per internal-topic partition this broker leads.

Theory of operation
-------------------
A coordinator (groups on `__consumer_offsets`, transactions on `__transaction_state`) is a
set of *shards*, one per partition of its internal topic, each holding the state of the
keys (group ids, transactional ids) that hash to that partition. The runtime owns the
shards: it loads one when the broker becomes the partition's leader, serves it while
active, drops it when leadership moves away, writes the records its state machine asks
for, and runs its timers. The broker hands the runtime an `InternalTopic`
(`ads.coordinator.topic`) and calls `become_leader` / `become_follower`; the coordinator
never sees the broker, its partitions or its replica manager.

A partition moves through these states::

    not led ──become_leader(epoch)──▶ LOADING ──every batch replayed──▶ ACTIVE
                                         │
                                         └──read or replay failed──▶ FAILED
    FAILED ──become_leader(higher epoch)──▶ LOADING
    LOADING, ACTIVE, FAILED ──become_follower, shutdown──▶ not led

Answers, by state (`error`): not led or FAILED: NOT_COORDINATOR (the client looks for the
coordinator again); LOADING: COORDINATOR_LOAD_IN_PROGRESS (the client retries); ACTIVE:
the shard answers. Leader epochs order the calls as in Kafka: `become_leader` with an epoch
not above the partition's is ignored, and one above it while LOADING or ACTIVE only moves
the epoch on (the state in memory is still that of the log); `become_follower` unloads
unless its epoch is not above the partition's (None: always, e.g. the topic is gone).

Loading replays, in offset order, every record with a key of the partition into a fresh
shard (`CoordinatorShard.replay`), then calls `on_loaded` and serves it. Records of a
transactional batch go to `replay_transactional` with the batch's producer id, and a
transaction marker (a control batch) to `replay_marker`, so offsets committed inside a
transaction come back pending or applied as the marker says; keyless records are skipped;
a batch that does not decode is skipped with a warning, as a record the shard cannot
parse is. Requests for other partitions are served between the
reads of a partition (the topic's `read_batches` yields to the event loop).

Writes. A shard's state machine never appends anything itself: it returns `Write`s, the
records to append and a continuation (`then`). The runtime appends a write's records as one
batch at once, so batches land in the order the writes were issued, and once the batch is
committed (one broker: before `submit` or `write` returns; with replication, when the high
watermark passes it) replays its records into the shard with the same `replay` (or
`replay_transactional`) loading uses, then calls `then`. So the state a record describes
(an offset committed or deleted, a transaction's offsets pending) enters the shard one way,
whether it is read at load or just written, and only once durable: a client is never told
what a reload would not rebuild. `then` keeps what is not the record's image: answering the
client (after checking again, where Kafka does, that the state is the one its request
wrote), sending transaction markers, a rebalance handing out its assignments, a group going
away. The transaction coordinator's shard and KIP-848 consumer groups (their epochs,
members, target and current assignments) change only this way. Classic group metadata
records are replayed at load only, as Kafka's coordinator does (it writes them without
replaying them): a classic group's membership is soft state kept by the rebalance in
memory, and its record is a snapshot for the next leader; their continuations make the
group's transition in memory. `then` gets the client's error instead when the
append failed (`coordinator_error`, the one mapping of append errors to coordinator errors)
or the partition was unloaded before the batch committed (NOT_COORDINATOR); the writes
`then` returns are performed next. `write` lets an async caller await the outcome; its
continuation runs even if the caller is cancelled meanwhile.

Transaction markers on the topic (`write_marker`: the group coordinator's
`__consumer_offsets`, where transactional offset commits wait for them) are writes of the
shard like any other, replayed by `replay_marker` once committed; while the shard is not
ACTIVE they are refused, since a marker appended during a load would land past what the
load reads and its transaction's offsets would stay pending. Their sender gets the
partition's own error, not the coordinator's.

Timers: each loaded partition has its own `Timers`; `tick` runs the due ones of ACTIVE
partitions and performs the writes they return. Unloading cancels them all. The owner
learns when to call `tick` from `wakeup(deadline_ms)`, called for every timer scheduled
and for the earliest timer of a partition that becomes ACTIVE, and from
`next_deadline_ms` (the broker arms one event-loop timer at the earliest deadline).

Limits: a write's state enters the shard only once committed (Kafka replays at once into
versioned state and reads the committed version): two requests in flight do not see each
other's uncommitted writes, so a shard that must order them holds its own lock (the
transaction coordinator's pending transition; a KIP-848 group's write on its way, which
its next heartbeat and timers wait for). A write waits at most
`offsets.commit.timeout.ms` (the topic's append fails it then with REQUEST_TIMED_OUT, and
the client gets COORDINATOR_NOT_AVAILABLE); its batch is in the log by then and is
committed once the replicas catch up, so the partition is loaded again from the log at
once (its requests get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and its state includes that
write, as a new leader's would. Kafka keeps such a write in its versioned state instead.
Loading reads on the event loop, a chunk at a time. Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ads.common.clock import Clock
from ads.coordinator.timer import Timers
from ads.coordinator.topic import AppendError, InternalTopic, partition_for
from ads.protocol.errors import ErrorCode
from ads.records.batch import (
    ControlRecordType,
    build_batch,
    build_control_batch,
    decode_records,
    parse_control_record,
    read_batch_header,
)
from ads.records.errors import RecordError

log = logging.getLogger("ads.coordinator")

Record = tuple[bytes, bytes | None]
_MAX_LOAD_BATCH_BYTES = 64 * 1024 * 1024

# How append failures reach the coordinator's clients, as in Kafka's coordinators.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    # A transactional write (TxnOffsetCommit) of a producer fenced meanwhile, or whose
    # transaction ended while it was verified.
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.INVALID_TXN_STATE: ErrorCode.INVALID_TXN_STATE,
}
_TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                        ErrorCode.INVALID_FETCH_SIZE})


def coordinator_error(code: ErrorCode, too_large: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
                      ) -> ErrorCode:
    """The error a coordinator's client gets for an append that failed with `code`."""
    if code in _TOO_LARGE:
        return too_large
    return _APPEND_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)


@dataclass(frozen=True, slots=True)
class Write:
    """Records a state machine wants appended to its partition, and what follows.

    `then` gets ErrorCode.NONE once the records are committed, or the client's error; the
    writes it returns are performed next. `too_large` is the client's error when the log
    refuses the batch as too large (OffsetCommit: INVALID_COMMIT_OFFSET_SIZE).
    """

    records: Sequence[Record]
    then: Callable[[ErrorCode], Sequence[Write]] | None = None
    too_large: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    # A transactional write (TxnOffsetCommit): the batch carries the producer's id and epoch
    # and the transactional bit, and counts only once its COMMIT marker follows it.
    producer_id: int = -1
    producer_epoch: int = -1
    # The KIP-890 verification the transactional write was admitted under (opaque: the
    # topic checks it), so that a transaction that ended meanwhile refuses it.
    guard: object | None = None


@dataclass(frozen=True, slots=True)
class _Marker:
    """A transaction marker written to a shard's partition (`write_marker`)."""

    batch: bytes
    producer_id: int
    commit: bool


def _reporter(answer: asyncio.Future[ErrorCode]) -> Callable[[ErrorCode], None]:
    """Sets `answer` unless its awaiting caller was cancelled meanwhile."""
    def report(error: ErrorCode) -> None:
        if not answer.done():
            answer.set_result(error)
    return report


class CoordinatorShard(Protocol):
    """The state machine of one internal-topic partition."""

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        """Applies one record of the partition (value None: a tombstone), read at load or
        written by the shard and committed."""
        ...

    def replay_transactional(self, producer_id: int, offset: int, key: bytes,
                             value: bytes | None) -> None:
        """One record of a transactional batch of `producer_id` (load or committed write)."""
        ...

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """The transaction of `producer_id` ended (a COMMIT or ABORT marker, read at load or
        written by `write_marker` and committed)."""
        ...

    def on_loaded(self) -> Sequence[Write]:
        """Every record was replayed: start timers; the writes returned are performed."""
        ...

    def on_unloaded(self) -> None:
        """The partition is dropped: answer parked requests NOT_COORDINATOR."""
        ...


S = TypeVar("S", bound=CoordinatorShard)


class PartitionStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


@dataclass(slots=True)
class _LoadSummary:
    """Loads under way and what the finished ones read: the first use of an internal topic
    loads all its partitions at once, and one INFO line says so (each partition's at DEBUG)."""

    pending: int = 0
    partitions: int = 0
    records: int = 0
    started: float = 0.0


@dataclass(slots=True, eq=False)
class _Partition(Generic[S]):
    index: int
    leader_epoch: int
    shard: S
    timers: Timers[Write]
    status: PartitionStatus = PartitionStatus.LOADING
    load: asyncio.Task[None] | None = None


class CoordinatorRuntime(Generic[S]):
    """The partitions of one internal topic this broker leads, and their shards.

    `new_shard(partition, timers)` builds an empty shard; its state machines schedule their
    deadlines on `timers`. Not thread-safe: the broker's event loop only.
    """

    def __init__(self, topic: InternalTopic, clock: Clock,
                 new_shard: Callable[[int, Timers[Write]], S],
                 wakeup: Callable[[int], None] | None = None) -> None:
        self.topic = topic
        self.clock = clock
        self._new_shard = new_shard
        # Told each new deadline, so its owner can call `tick` then (see the header).
        self.wakeup = wakeup
        self._partitions: dict[int, _Partition[S]] = {}
        # Commits being waited for; referenced so that their tasks are not collected.
        self._waiting: set[asyncio.Future[int]] = set()
        self._loads = _LoadSummary()

    # -- routing and answers ---------------------------------------------------------
    def partition_for(self, key: str) -> int:
        return partition_for(key, self.topic.partition_count())

    def status(self, partition: int) -> PartitionStatus | None:
        """None: this broker does not lead the partition."""
        p = self._partitions.get(partition)
        return None if p is None else p.status

    def error(self, partition: int) -> ErrorCode:
        """What a request for the partition's keys gets before its shard sees it."""
        p = self._partitions.get(partition)
        if p is None or p.status is PartitionStatus.FAILED:
            return ErrorCode.NOT_COORDINATOR
        if p.status is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def shard(self, partition: int) -> S | None:
        """The partition's shard while it is ACTIVE."""
        p = self._partitions.get(partition)
        return p.shard if p is not None and p.status is PartitionStatus.ACTIVE else None

    def shards(self) -> list[tuple[int, S]]:
        """The ACTIVE partitions and their shards."""
        return [(i, p.shard) for i, p in sorted(self._partitions.items())
                if p.status is PartitionStatus.ACTIVE]

    def leader_epoch(self, partition: int) -> int:
        """The partition's leader epoch (transaction markers carry it as the coordinator
        epoch); -1 when not led here."""
        p = self._partitions.get(partition)
        return -1 if p is None else p.leader_epoch

    def loading(self) -> bool:
        return any(p.status is PartitionStatus.LOADING for p in self._partitions.values())

    # -- leadership ------------------------------------------------------------------
    def become_leader(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads the partition: load it in the background (needs the event
        loop running)."""
        current = self._partitions.get(partition)
        if current is not None:
            if current.leader_epoch >= leader_epoch:
                log.info("%s-%d: ignored leadership at epoch %d (at %d already)",
                         self.topic.name, partition, leader_epoch, current.leader_epoch)
                return
            if current.status is not PartitionStatus.FAILED:
                current.leader_epoch = leader_epoch
                return
            self._close(current)
        timers: Timers[Write] = Timers(self.clock, self._scheduled)
        p = _Partition(partition, leader_epoch, self._new_shard(partition, timers), timers)
        self._partitions[partition] = p
        if not self._loads.pending:
            self._loads = _LoadSummary(started=time.monotonic())
        self._loads.pending += 1
        p.load = asyncio.ensure_future(self._load(p))
        p.load.add_done_callback(self._load_ended)

    def become_follower(self, partition: int, leader_epoch: int | None = None) -> None:
        """Another broker leads the partition now (or it is gone, `leader_epoch` None)."""
        current = self._partitions.get(partition)
        if current is None:
            return
        if leader_epoch is not None and current.leader_epoch >= leader_epoch:
            log.info("%s-%d: ignored losing leadership at epoch %d (at %d)",
                     self.topic.name, partition, leader_epoch, current.leader_epoch)
            return
        del self._partitions[partition]
        self._close(current)
        log.info("unloaded %s-%d", self.topic.name, partition)

    async def until_loaded(self, partition: int) -> PartitionStatus | None:
        """Waits for the partition's load to end (tools and tests); returns its status."""
        p = self._partitions.get(partition)
        if p is not None and p.load is not None:
            await asyncio.wait([p.load])
        return self.status(partition)

    def shutdown(self) -> None:
        for p in list(self._partitions.values()):
            self._close(p)
        self._partitions.clear()

    def _close(self, p: _Partition[S]) -> None:
        if p.load is not None and not p.load.done():
            p.load.cancel()
        self._drop(p)

    def _drop(self, p: _Partition[S]) -> None:
        p.timers.cancel_all()
        if p.status is not PartitionStatus.FAILED:
            p.status = PartitionStatus.FAILED  # a dropped shard's writes are refused
            p.shard.on_unloaded()

    def _reload(self, p: _Partition[S]) -> None:
        """A write appended here but not committed in time is still in the log and is
        committed once the replicas catch up: the shard is built again from the log, as a
        new leader would build it, rather than missing what the log will hold."""
        log.warning("%s-%d: a write was not committed within its timeout; loading the "
                    "partition again", self.topic.name, p.index)
        del self._partitions[p.index]
        self._close(p)
        self.become_leader(p.index, p.leader_epoch)

    def _current(self, p: _Partition[S] | None) -> bool:
        return p is not None and self._partitions.get(p.index) is p

    async def _load(self, p: _Partition[S]) -> None:
        started = time.monotonic()
        count = 0
        batches = self.topic.read_batches(p.index)
        try:
            async for batch in batches:
                if not self._current(p):
                    return
                count += self._replay(p, batch)
        except Exception:
            log.exception("loading %s-%d failed", self.topic.name, p.index)
            if self._current(p):
                self._drop(p)
            return
        finally:
            aclose = getattr(batches, "aclose", None)
            if aclose is not None:
                await aclose()
        if not self._current(p):
            return
        p.status = PartitionStatus.ACTIVE
        log.debug("loaded %s-%d: %d records in %.0f ms", self.topic.name, p.index, count,
                  (time.monotonic() - started) * 1000)
        self._loads.partitions += 1
        self._loads.records += count
        self._perform(p, p.shard.on_loaded())
        first = p.timers.next_deadline_ms()
        if first is not None:
            self._scheduled(first)

    def _load_ended(self, _load: asyncio.Future[None]) -> None:
        """Every load's end, done or not: the last of a burst logs what they loaded."""
        loads = self._loads
        loads.pending -= 1
        if not loads.pending and loads.partitions:
            log.info("loaded %d partitions of %s: %d records in %.0f ms", loads.partitions,
                     self.topic.name, loads.records, (time.monotonic() - loads.started) * 1000)

    def _replay(self, p: _Partition[S], batch: bytes) -> int:
        try:
            header = read_batch_header(batch)
            records = decode_records(batch, max_uncompressed_bytes=_MAX_LOAD_BATCH_BYTES)
            if header.is_control:
                kind = parse_control_record(records[0].key, records[0].value)[0] if records else -1
                if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    p.shard.replay_marker(header.producer_id, kind == ControlRecordType.COMMIT)
                return 0
        except RecordError as exc:
            log.warning("skipping a bad batch of %s-%d: %s", self.topic.name, p.index, exc)
            return 0
        shard = p.shard
        for r in records:
            if r.key is None:
                continue
            if header.is_transactional:
                shard.replay_transactional(header.producer_id, r.offset, r.key, r.value)
            else:
                shard.replay(r.offset, r.key, r.value)
        return len(records)

    # -- writes ----------------------------------------------------------------------
    def submit(self, partition: int, writes: Iterable[Write]) -> None:
        """Appends each write's records now; their continuations run once committed."""
        self._perform(self._partitions.get(partition), writes)

    async def write(self, partition: int, write: Write) -> ErrorCode:
        """`submit` of one write, awaiting its outcome (its continuation has run by then)."""
        answer: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._start(self._partitions.get(partition), write, _reporter(answer))
        return await answer

    def _perform(self, p: _Partition[S] | None, writes: Iterable[Write]) -> None:
        for w in writes:
            self._start(p, w, None)

    async def write_marker(self, partition: int, producer_id: int, producer_epoch: int,
                           commit: bool, coordinator_epoch: int) -> ErrorCode:
        """Writes a transaction's marker to the partition as a write of the shard, replayed
        (`replay_marker`) once committed. Returns the partition's own error when the
        append fails (the marker's sender retries it where the partition is led then), and
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when the shard is not ACTIVE: a
        marker appended while the partition loads would be past the records the load
        reads, and its transaction's offsets would stay pending for good."""
        answer: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        marker = _Marker(build_control_batch(kind, producer_id, producer_epoch,
                                             coordinator_epoch, timestamp=self.clock.time_ms()),
                         producer_id, commit)
        self._start(self._partitions.get(partition), marker, _reporter(answer))
        return await answer

    def _start(self, p: _Partition[S] | None, write: Write | _Marker,
               report: Callable[[ErrorCode], None] | None) -> None:
        started = self._append(p, write)
        if isinstance(started, ErrorCode):
            self._finish(p, write, started, report)
        elif started.done():
            self._finish(p, write, self._outcome(p, write, started), report)
        else:
            self._waiting.add(started)

            def committed(fut: asyncio.Future[int]) -> None:
                self._waiting.discard(fut)
                self._finish(p, write, self._outcome(p, write, fut), report)

            started.add_done_callback(committed)

    def _append(self, p: _Partition[S] | None, write: Write | _Marker
                ) -> asyncio.Future[int] | ErrorCode:
        if p is None or not self._current(p):
            return ErrorCode.NOT_COORDINATOR
        if p.status is not PartitionStatus.ACTIVE:
            return self.error(p.index)
        if isinstance(write, _Marker):
            batch = write.batch
        else:
            batch = build_batch(list(write.records), timestamp=self.clock.time_ms(),
                                producer_id=write.producer_id,
                                producer_epoch=write.producer_epoch,
                                is_transactional=write.producer_id >= 0)
        try:
            guard = None if isinstance(write, _Marker) else write.guard
            return asyncio.ensure_future(self.topic.append(p.index, batch, guard))
        except AppendError as exc:
            return self._append_error(write, exc.code)
        except Exception:
            log.exception("appending to %s-%d failed", self.topic.name, p.index)
            return ErrorCode.UNKNOWN_SERVER_ERROR

    @staticmethod
    def _append_error(write: Write | _Marker, code: ErrorCode) -> ErrorCode:
        """A marker's sender gets the partition's error; a shard's client the coordinator's."""
        return code if isinstance(write, _Marker) else coordinator_error(code, write.too_large)

    def _outcome(self, p: _Partition[S] | None, write: Write | _Marker,
                 fut: asyncio.Future[int]) -> ErrorCode:
        if fut.cancelled():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        exc = fut.exception()
        if isinstance(exc, AppendError):
            if exc.code is ErrorCode.REQUEST_TIMED_OUT and p is not None and self._current(p):
                self._reload(p)
            return self._append_error(write, exc.code)
        if exc is not None:
            log.error("appending to %s failed", self.topic.name, exc_info=exc)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if p is None or not self._current(p):
            return ErrorCode.NOT_COORDINATOR  # unloaded before the batch was committed
        self._replay_written(p, write, fut.result())
        return ErrorCode.NONE

    def _replay_written(self, p: _Partition[S], write: Write | _Marker, base_offset: int
                        ) -> None:
        """A committed write enters the shard's state through the replay loading uses."""
        shard = p.shard
        try:
            if isinstance(write, _Marker):
                shard.replay_marker(write.producer_id, write.commit)
            elif write.producer_id >= 0:
                for i, (key, value) in enumerate(write.records):
                    shard.replay_transactional(write.producer_id, base_offset + i, key, value)
            else:
                for i, (key, value) in enumerate(write.records):
                    shard.replay(base_offset + i, key, value)
        except Exception:
            log.exception("replaying a write to %s-%d failed", self.topic.name, p.index)

    def _finish(self, p: _Partition[S] | None, write: Write | _Marker, error: ErrorCode,
                report: Callable[[ErrorCode], None] | None) -> None:
        if error is not ErrorCode.NONE:
            log.warning("a write to %s-%s failed: %s", self.topic.name,
                        "?" if p is None else p.index, error.name)
        if isinstance(write, _Marker):
            if report is not None:
                report(error)
            return
        follow: Sequence[Write] = ()
        if write.then is not None:
            try:
                follow = write.then(error)
            except Exception:
                log.exception("a coordinator continuation failed")
        if follow:
            self._perform(p, follow)
        if report is not None:
            report(error)

    # -- time ------------------------------------------------------------------------
    def _scheduled(self, deadline_ms: int) -> None:
        if self.wakeup is not None:
            self.wakeup(deadline_ms)

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of a timer of an ACTIVE partition (None: no timer)."""
        deadlines = [d for p in self._partitions.values()
                     if p.status is PartitionStatus.ACTIVE
                     and (d := p.timers.next_deadline_ms()) is not None]
        return min(deadlines, default=None)

    def tick(self) -> None:
        """Runs the due timers of every ACTIVE partition and performs their writes."""
        for p in list(self._partitions.values()):
            if p.status is PartitionStatus.ACTIVE:
                writes = p.timers.run_due()
                if writes:
                    self._perform(p, writes)


class RuntimeCoordinator(Generic[S]):
    """What the broker drives of every coordinator (groups, transactions, share state):
    its runtime's topic, timers and shutdown. Each coordinator makes `runtime` with the
    shards of its own kind and adds the requests it answers."""

    runtime: CoordinatorRuntime[S]

    @property
    def topic(self) -> InternalTopic:
        """The coordinator's internal topic (FindCoordinator creates it)."""
        return self.runtime.topic

    def tick(self) -> None:
        """Runs the due timers of the partitions loaded here and performs their writes."""
        self.runtime.tick()

    def next_deadline_ms(self) -> int | None:
        """When `tick` has something to do next (None: no timer)."""
        return self.runtime.next_deadline_ms()

    def shutdown(self) -> None:
        """Unloads every partition: parked requests get NOT_COORDINATOR."""
        self.runtime.shutdown()
