"""The state machine of one transactional id, and every rule that answers a request with it.

Theory of operation
-------------------
A transactional id has one producer id and epoch at a time and at most one transaction in
flight. Its state is kept in `__transaction_state` (`records.py`): every transition is one
record, and the state in memory changes only by replaying a record, the same way whether
the record is read at load or was just written and committed (`TransactionMetadata.apply`),
so a reload rebuilds exactly the state the coordinator served. The *pending* target marks
a transition whose record is on its way; requests meanwhile get CONCURRENT_TRANSACTIONS.
It is a lock held by the request, not state: it is never written and a reload starts
without it. The epoch handed out before the last bump is not written either (Kafka's record
has no field for it); it is always the epoch minus one, since every bump adds one and a new
producer id starts at 0 (`last_producer_epoch`).

::

                  InitProducerId (new id, or epoch bump)
                 ┌──────────────┐
                 ▼              │
    (none) ──▶ EMPTY ──AddPartitions/AddOffsets──▶ ONGOING ◀──┐ AddPartitions (more)
                 ▲  ▲                               │  │  │   │
                 │  │                               │  │  └───┘
    InitProducerId  │             EndTxn(commit)    │  │ EndTxn(abort), timeout,
                 │  │          ┌────────────────────┘  │ InitProducerId of a new
                 │  │          ▼                       ▼ instance (PREPARE_EPOCH_FENCE)
                 │  │   PREPARE_COMMIT           PREPARE_ABORT
                 │  │          │ markers written       │ markers written
                 │  │          ▼                       ▼
                 │  └── COMPLETE_COMMIT          COMPLETE_ABORT ──┐
                 │         │   ▲ AddPartitions: ONGOING          │
                 └─────────┴───┴──────────────────────────────────┘
    EMPTY, COMPLETE_* ──transactional.id.expiration.ms idle──▶ DEAD (tombstone; forgotten)

`VALID_PREVIOUS` below is the same diagram as a table; `TransactionMetadata.prepare` refuses
any other transition. PREPARE_EPOCH_FENCE is Kafka's: an InitProducerId that finds a
transaction ONGOING bumps the epoch (fencing the old instance) and aborts it; here that
abort is written directly as PREPARE_ABORT with the bumped epoch, so PREPARE_EPOCH_FENCE
exists as a status value only.

Answers (the error a request gets from the state of its id; NONE: it proceeds)
-------------------------------------------------------------------------------
Checked in this order, as Kafka does: the id is unknown → INVALID_PRODUCER_ID_MAPPING; the
producer id differs → INVALID_PRODUCER_ID_MAPPING; the epoch differs → PRODUCER_FENCED
(INVALID_PRODUCER_EPOCH for client versions before KIP-588: `fenced_error`); a transition is
pending → CONCURRENT_TRANSACTIONS; then by state:

    state            AddPartitions/AddOffsets    EndTxn(commit)          EndTxn(abort)
    EMPTY            → ONGOING                   INVALID_TXN_STATE       INVALID_TXN_STATE
    ONGOING          add (no write if known)     → PREPARE_COMMIT        → PREPARE_ABORT
    PREPARE_COMMIT   CONCURRENT_TRANSACTIONS     CONCURRENT_TRANSACTIONS CONCURRENT_TRANSACTIONS
    PREPARE_ABORT    CONCURRENT_TRANSACTIONS     CONCURRENT_TRANSACTIONS CONCURRENT_TRANSACTIONS
    COMPLETE_COMMIT  → ONGOING                   NONE (a retry)          INVALID_TXN_STATE
    COMPLETE_ABORT   → ONGOING                   INVALID_TXN_STATE       NONE (a retry)
    DEAD             INVALID_PRODUCER_ID_MAPPING (the id is forgotten)

A PREPARE_* state is always on its way to COMPLETE_* (its markers are being written), so
EndTxn of either kind waits there, as in Kafka, whose coordinator marks that transition
pending while it writes the markers: a commit sent right after an abort gets
CONCURRENT_TRANSACTIONS, and INVALID_TXN_STATE only once the abort is complete.

    InitProducerId   (transaction.timeout.ms above transaction.max.timeout.ms:
                      INVALID_TRANSACTION_TIMEOUT, before anything else)
    no id, DEAD      new producer id, epoch 0, → EMPTY
    pending          CONCURRENT_TRANSACTIONS
    PREPARE_*        CONCURRENT_TRANSACTIONS (the client retries until markers are done)
    ONGOING          epoch bumped, → PREPARE_ABORT; CONCURRENT_TRANSACTIONS (retried, it
                     then finds the abort complete and gets the next epoch)
    EMPTY, COMPLETE_* epoch + 1 (a new producer id when the epoch is exhausted), → EMPTY;
                     a KIP-360 request naming a producer id and epoch must name the current
                     ones, or the previous ones (a retry of the bump, answered the same;
                     or a producer whose transaction timed out, bumped again); otherwise
                     PRODUCER_FENCED

Timeouts: a transaction ONGOING longer than its `transaction_timeout_ms` is aborted by the
coordinator with the epoch bumped, so the producer that left it is fenced.

Not thread-safe: the broker's event loop only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ads.common.partitions import TopicPartition
from ads.protocol.errors import ErrorCode

MAX_EPOCH = 32767
NO_PRODUCER_ID = -1


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with its ids (the status byte of the log value)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return "".join(part.capitalize() for part in self.name.split("_"))


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
STATE_NAMES = {s.kafka_name: s for s in TxnState}


@dataclass(slots=True)
class TransactionMetadata:
    """What `__transaction_state` holds for one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # A record for this transition is on its way: set by `prepare`, cleared by the request
    # once the write ended (the record itself enters through `apply`).
    pending: TransactionMetadata | None = None

    @property
    def last_producer_epoch(self) -> int:
        """The epoch handed out before the last bump (a retried InitProducerId is answered
        again); -1 at epoch 0."""
        return self.producer_epoch - 1

    def copy(self) -> TransactionMetadata:
        return TransactionMetadata(
            self.transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms,
            self.state, set(self.partitions), self.start_ms, self.last_update_ms)

    def prepare(self, state: TxnState, now_ms: int, **changes: object) -> TransactionMetadata:
        """The target of a transition, recorded as pending (its record is written next)."""
        if self.state not in VALID_PREVIOUS[state]:
            raise ValueError(f"{self.transactional_id}: {self.state.name} -> {state.name}")
        target = self.copy()
        target.state = state
        target.last_update_ms = now_ms
        for name, value in changes.items():
            setattr(target, name, value)
        self.pending = target
        return target

    def apply(self, record: TransactionMetadata) -> None:
        """A record of this id was replayed (read at load, or written and committed): it
        becomes the state, in place, so that what holds this object sees it."""
        self.producer_id, self.producer_epoch = record.producer_id, record.producer_epoch
        self.timeout_ms, self.state = record.timeout_ms, record.state
        self.partitions, self.start_ms = set(record.partitions), record.start_ms
        self.last_update_ms = record.last_update_ms


def producer_error(meta: TransactionMetadata | None, producer_id: int, epoch: int
                   ) -> ErrorCode:
    """The checks every request of a transaction passes first (the header's order)."""
    if meta is None or meta.state is S.DEAD or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != epoch:
        return ErrorCode.PRODUCER_FENCED
    if meta.pending is not None:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.NONE


def add_error(state: TxnState) -> ErrorCode:
    """AddPartitionsToTxn / AddOffsetsToTxn once the producer checks passed."""
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if state in (S.PREPARE_EPOCH_FENCE, S.DEAD):
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE


def end_error(state: TxnState, commit: bool) -> ErrorCode | None:
    """EndTxn once the producer checks passed: the error, NONE for an answered retry, or
    None when the transaction is to end now (ONGOING)."""
    if state is S.ONGOING:
        return None
    same = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
    if state is same:
        return ErrorCode.NONE
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.INVALID_TXN_STATE


def fenced_error(error: ErrorCode, supports_fenced: bool) -> ErrorCode:
    """Clients before KIP-588 know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if error is ErrorCode.PRODUCER_FENCED and not supports_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
