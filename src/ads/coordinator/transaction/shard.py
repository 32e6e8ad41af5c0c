"""The transactional ids of one `__transaction_state` partition and their transactions.

A shard is what the coordinator runtime (`ads.coordinator.runtime`) keeps for each
partition of `__transaction_state` this broker leads: rebuilt from the partition's records
when it is loaded, it answers the transaction APIs for the ids that hash to the partition.
`state.py` holds the rules, this module applies them.

One way into the state: a request checks the rules, marks its transition pending and
returns a `Write` of one record; the runtime appends it and, once committed, replays it with
`replay`, the method loading uses, which makes the record the id's state (a tombstone
forgets the id). Only then does the write's continuation run, and it checks again, as
Kafka does when a transaction log append completes, that the state is the one its request
wrote (same producer id, epoch and state; else PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING
or CONCURRENT_TRANSACTIONS) before acting on it: answering the client, sending markers,
arming the timeout. So the state served live is the state a reload of the partition builds.
Two things are not written: the pending mark (a request's lock) and the entry a new id gets
while its first record is on its way (it holds the pending mark; it goes if the write fails).

Markers: once a PREPARE_COMMIT or PREPARE_ABORT record is committed, `send_markers` (the
coordinator's) writes the markers to every partition of the transaction and calls
`markers_written`, which writes COMPLETE_*. A reload that finds a PREPARE_* state sends
its markers again. Timers: an ONGOING transaction is aborted at its start plus its
timeout (epoch bumped, fencing the producer); every
`transaction.remove.expired.transaction.cleanup.interval.ms` a sweep writes a tombstone
for each completed id idle for `transactional.id.expiration.ms`.

Not thread-safe: the broker's event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ads.common.partitions import TopicPartition
from ads.coordinator.runtime import Write
from ads.coordinator.timer import Timers
from ads.coordinator.transaction import records as rec
from ads.coordinator.transaction.state import (
    COMPLETED,
    MAX_EPOCH,
    TransactionMetadata,
    TxnState,
    add_error,
    end_error,
    producer_error,
)
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")

S = TxnState
# Called with a snapshot of a PREPARE_* transaction whose markers are to be written.
SendMarkers = Callable[[int, TransactionMetadata], None]


@dataclass(slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    # How often idle ids are looked for (one sweep per partition, not a timer per id: a
    # timer per transaction would sit in the heap for the whole expiration time).
    id_cleanup_interval_ms: int = 3_600_000


@dataclass(slots=True)
class Answer:
    """What a transaction request is told; filled in by a write's continuation."""

    error: ErrorCode = ErrorCode.NONE
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class TxnCounts:
    """Transactions completed by this broker's coordinator since it started."""

    committed: int = 0
    aborted: int = 0


class TxnShard:
    def __init__(self, partition: int, timers: Timers[Write], config: TxnConfig,
                 send_markers: SendMarkers, counts: TxnCounts | None = None) -> None:
        self.partition = partition
        self.counts = counts or TxnCounts()
        self.timers = timers
        self.clock = timers.clock
        self.config = config
        self._send_markers = send_markers
        self.txns: dict[str, TransactionMetadata] = {}

    # -- the records -----------------------------------------------------------------
    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        """One record of the partition, read at load or written and committed: the last
        record of an id is its state."""
        try:
            txn_id = rec.parse_key(key)
            record = None if value is None else rec.parse_value(txn_id, value)
        except rec.TransactionRecordError as exc:
            log.warning("skipping a bad record at offset %d of %s-%d: %s", offset,
                        rec.TRANSACTION_STATE_TOPIC, self.partition, exc)
            return
        if record is None or record.state is S.DEAD:
            self.txns.pop(txn_id, None)
            return
        meta = self.txns.get(txn_id)
        if meta is None:
            self.txns[txn_id] = record
        else:
            meta.apply(record)  # in place: timers and requests in flight hold `meta`

    def replay_transactional(self, producer_id: int, offset: int, key: bytes,
                             value: bytes | None) -> None:
        """Nothing writes transactional batches to `__transaction_state`."""

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """Nothing writes markers to `__transaction_state`."""

    def on_loaded(self) -> list[Write]:
        for meta in self.txns.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._send_markers(self.partition, meta.copy())
            elif meta.state is S.ONGOING:
                self._schedule_timeout(meta)
        self.timers.schedule(self.config.id_cleanup_interval_ms, self._expire_idle)
        return []

    def on_unloaded(self) -> None:
        self.txns.clear()

    # -- writing transitions ---------------------------------------------------------
    def _write(self, meta: TransactionMetadata, target: TransactionMetadata,
               after: Callable[[ErrorCode], Sequence[Write]]) -> Write:
        """The record of `target`; `after` gets the write's error, or once the record is
        committed and replayed, what the re-check of the state finds."""
        def then(error: ErrorCode) -> Sequence[Write]:
            if meta.pending is target:
                meta.pending = None
            if error is ErrorCode.NONE:
                error = self._recheck(meta, target)
            elif meta.producer_epoch < 0 and self.txns.get(meta.transactional_id) is meta:
                del self.txns[meta.transactional_id]  # a new id whose first record failed
            return after(error)

        value = None if target.state is S.DEAD else rec.txn_value(target)
        return Write([(rec.txn_key(meta.transactional_id), value)], then)

    def _recheck(self, meta: TransactionMetadata, target: TransactionMetadata) -> ErrorCode:
        """Whether the state after the committed record is the one its request wrote; the
        error that request gets when it is not (Kafka's checks when an append completes)."""
        current = self.txns.get(meta.transactional_id)
        if target.state is S.DEAD:
            return ErrorCode.NONE if current is None else ErrorCode.CONCURRENT_TRANSACTIONS
        if current is not meta:
            return ErrorCode.NOT_COORDINATOR
        if current.producer_id != target.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if current.producer_epoch != target.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if current.state is not target.state or current.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    def _after_prepare(self, meta: TransactionMetadata, answer: Answer | None
                       ) -> Callable[[ErrorCode], Sequence[Write]]:
        def after(error: ErrorCode) -> Sequence[Write]:
            if answer is not None:
                answer.error = error
            if error is ErrorCode.NONE:
                self._send_markers(self.partition, meta.copy())
            return ()
        return after

    # -- InitProducerId ----------------------------------------------------------------
    def needs_producer_id(self, txn_id: str) -> bool:
        meta = self.txns.get(txn_id)
        return meta is None or meta.state is S.DEAD or (
            meta.state in COMPLETED and meta.producer_epoch >= MAX_EPOCH - 1)

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, epoch: int,
                         fresh_id: int | None) -> tuple[Write | None, Answer]:
        now = self.clock.time_ms()
        meta = self.txns.get(txn_id)
        if meta is None or meta.state is S.DEAD:
            return self._first_id(txn_id, timeout_ms, fresh_id, now)
        if meta.pending is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return None, Answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if producer_id >= 0:  # KIP-360: the producer names what it had
            if (producer_id, epoch) == (meta.producer_id, meta.last_producer_epoch):
                if meta.state is S.EMPTY:  # a retry of the bump just made
                    return None, Answer(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)
                # Otherwise its transaction was aborted for its timeout (the epoch bumped
                # then): it may go on with a new epoch.
            elif (producer_id, epoch) != (meta.producer_id, meta.producer_epoch):
                return None, Answer(ErrorCode.PRODUCER_FENCED)
        if meta.state is S.ONGOING:
            return self._fence(meta, now)
        return self._bump(meta, timeout_ms, fresh_id, now)

    def _first_id(self, txn_id: str, timeout_ms: int, fresh_id: int | None, now: int
                  ) -> tuple[Write | None, Answer]:
        """A transactional id new here (or dead): its producer id, epoch 0."""
        if fresh_id is None:
            return None, Answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        meta = TransactionMetadata(txn_id, fresh_id, -1, timeout_ms, S.EMPTY,
                                   last_update_ms=now)
        self.txns[txn_id] = meta
        target = meta.prepare(S.EMPTY, now, producer_epoch=0, timeout_ms=timeout_ms)
        return self._answered_write(meta, target)

    def _fence(self, meta: TransactionMetadata, now: int) -> tuple[Write | None, Answer]:
        """A new instance while a transaction is open: fence the old one and abort what it
        left open; the new one retries (CONCURRENT_TRANSACTIONS)."""
        target = meta.prepare(S.PREPARE_ABORT, now, producer_epoch=meta.producer_epoch + 1)
        answer = Answer(ErrorCode.CONCURRENT_TRANSACTIONS)

        def fenced(error: ErrorCode) -> Sequence[Write]:
            self._after_prepare(meta, None)(error)
            if error is not ErrorCode.NONE:
                answer.error = error
            return ()

        return self._write(meta, target, fenced), answer

    def _bump(self, meta: TransactionMetadata, timeout_ms: int, fresh_id: int | None,
              now: int) -> tuple[Write | None, Answer]:
        """The next epoch, or a new producer id once the epochs run out."""
        if meta.producer_epoch >= MAX_EPOCH - 1:
            if fresh_id is None:
                return None, Answer(ErrorCode.CONCURRENT_TRANSACTIONS)
            target = meta.prepare(S.EMPTY, now, producer_id=fresh_id, producer_epoch=0,
                                  timeout_ms=timeout_ms, partitions=set(), start_ms=-1)
        else:
            target = meta.prepare(S.EMPTY, now, producer_epoch=meta.producer_epoch + 1,
                                  timeout_ms=timeout_ms, partitions=set(), start_ms=-1)
        return self._answered_write(meta, target)

    def _answered_write(self, meta: TransactionMetadata, target: TransactionMetadata
                        ) -> tuple[Write, Answer]:
        answer = Answer(ErrorCode.NONE, target.producer_id, target.producer_epoch)

        def after(error: ErrorCode) -> Sequence[Write]:
            answer.error = error
            return ()

        return self._write(meta, target, after), answer

    # -- the transaction ---------------------------------------------------------------
    def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition]) -> tuple[Write | None, Answer]:
        meta = self.txns.get(txn_id)
        error = producer_error(meta, producer_id, epoch)
        if error is ErrorCode.NONE and meta is not None:
            error = add_error(meta.state)
        if error is not ErrorCode.NONE or meta is None:
            return None, Answer(error)
        wanted = set(partitions)
        if meta.state is S.ONGOING and wanted <= meta.partitions:
            return None, Answer()
        now = self.clock.time_ms()
        starting = meta.state is not S.ONGOING
        target = meta.prepare(S.ONGOING, now, partitions=(
            wanted if starting else meta.partitions | wanted),
            start_ms=now if starting else meta.start_ms)
        answer = Answer()

        def after(error: ErrorCode) -> Sequence[Write]:
            answer.error = error
            if error is ErrorCode.NONE and starting:
                self._schedule_timeout(meta)
            return ()

        return self._write(meta, target, after), answer

    def verify(self, txn_id: str, producer_id: int, epoch: int, partition: TopicPartition
               ) -> ErrorCode:
        """KIP-890: whether a transactional write to `partition` belongs to the id's
        ongoing transaction."""
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch < meta.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if meta.state is not S.ONGOING or partition not in meta.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool
                ) -> tuple[Write | None, Answer]:
        meta = self.txns.get(txn_id)
        error = producer_error(meta, producer_id, epoch)
        if error is not ErrorCode.NONE or meta is None:
            return None, Answer(error)
        ended = end_error(meta.state, commit)
        if ended is not None:
            return None, Answer(ended, meta.producer_id, meta.producer_epoch)
        target = meta.prepare(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                              self.clock.time_ms())
        answer = Answer(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)
        return self._write(meta, target, self._after_prepare(meta, answer)), answer

    def markers_written(self, txn_id: str, producer_id: int, epoch: int) -> Write | None:
        """Every marker of the transaction is written: COMPLETE_COMMIT / COMPLETE_ABORT."""
        meta = self.txns.get(txn_id)
        if (meta is None or meta.pending is not None or meta.producer_id != producer_id
                or meta.producer_epoch != epoch
                or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
            return None
        done = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        target = meta.prepare(done, self.clock.time_ms(), partitions=set())

        def after(error: ErrorCode) -> Sequence[Write]:
            if error is not ErrorCode.NONE:  # moved or failed: the next leader completes it
                log.warning("completing the transaction of %r failed: %s", txn_id, error.name)
            elif done is S.COMPLETE_COMMIT:
                self.counts.committed += 1
            else:
                self.counts.aborted += 1
            return ()

        return self._write(meta, target, after)

    # -- timers --------------------------------------------------------------------------
    def _schedule_timeout(self, meta: TransactionMetadata) -> None:
        start, epoch = meta.start_ms, meta.producer_epoch
        delay = start + meta.timeout_ms - self.clock.time_ms()
        self.timers.schedule(delay, lambda: self._abort_timed_out(meta, start, epoch))

    def _abort_timed_out(self, meta: TransactionMetadata, start_ms: int, epoch: int
                         ) -> list[Write]:
        if (self.txns.get(meta.transactional_id) is not meta or meta.state is not S.ONGOING
                or meta.start_ms != start_ms or meta.producer_epoch != epoch):
            return []
        if meta.pending is not None:  # a request's record is on its way: look again soon
            self.timers.schedule(100, lambda: self._abort_timed_out(meta, start_ms, epoch))
            return []
        log.info("aborting the transaction of %r (producer %d, epoch %d): open longer than its "
                 "timeout of %d ms", meta.transactional_id, meta.producer_id, epoch,
                 meta.timeout_ms)
        target = meta.prepare(S.PREPARE_ABORT, self.clock.time_ms(), producer_epoch=epoch + 1)
        return [self._write(meta, target, self._after_prepare(meta, None))]

    def _expire_idle(self) -> list[Write]:
        now = self.clock.time_ms()
        self.timers.schedule(self.config.id_cleanup_interval_ms, self._expire_idle)
        return [self._expire(meta, now) for meta in list(self.txns.values())
                if meta.pending is None and meta.state in COMPLETED
                and now - meta.last_update_ms >= self.config.id_expiration_ms]

    def _expire(self, meta: TransactionMetadata, now: int) -> Write:
        target = meta.prepare(S.DEAD, now)

        def after(error: ErrorCode) -> Sequence[Write]:
            if error is ErrorCode.NONE:  # its tombstone's replay forgot it
                log.info("transactional id %r expired", meta.transactional_id)
            return ()

        return self._write(meta, target, after)
