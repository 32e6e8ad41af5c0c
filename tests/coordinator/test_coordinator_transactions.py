"""The transaction coordinator's state machine against an in-memory `__transaction_state`
and a manual clock: the answer tables of `state.py`, markers and completion, reloading
(PREPARE_* states send their markers again), timeouts, id expiry; and the group
coordinator's transactional offsets, pending until their marker, also after a reload.
(Real clients drive the same code over sockets in tests/broker/test_transactions_*.py.)"""

from __future__ import annotations

import asyncio
import itertools

from ads.common.clock import ManualClock
from ads.coordinator.group.api import OffsetCommit
from ads.coordinator.group.coordinator import GroupCoordinator
from ads.coordinator.transaction import records as rec
from ads.coordinator.transaction.coordinator import TransactionCoordinator
from ads.coordinator.transaction.shard import TxnConfig
from ads.coordinator.transaction.state import TxnState, fenced_error
from ads.protocol.errors import ErrorCode
from ads.records.batch import decode_records
from coordinator_fakes import MemoryLog, lead_all

Partition = tuple[str, int]


class Markers:
    """Records the markers asked for; `failing` partitions refuse theirs with
    NOT_LEADER_OR_FOLLOWER, `refusing` ones with the error given."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, frozenset[Partition]]] = []
        self.failing: set[Partition] = set()
        self.refusing: dict[Partition, ErrorCode] = {}
        self.attempts = 0

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: set[Partition]
                            ) -> dict[Partition, ErrorCode]:
        self.attempts += 1
        refused = {p: self.refusing.get(p, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                   for p in partitions & (self.failing | set(self.refusing))}
        ok = frozenset(partitions - set(refused))
        if ok:
            self.written.append((producer_id, producer_epoch, commit, ok))
        return refused

    async def close(self) -> None:
        pass


async def make(**config: int) -> tuple[TransactionCoordinator, MemoryLog, ManualClock, Markers]:
    clock = ManualClock()
    mlog = MemoryLog()
    mlog.name = rec.TRANSACTION_STATE_TOPIC
    markers = Markers()
    ids = itertools.count(1000)

    async def new_id() -> int:
        return next(ids)

    coord = TransactionCoordinator(mlog, mlog, clock, new_id, markers, TxnConfig(**config))
    await lead_all(coord)  # type: ignore[arg-type]
    return coord, mlog, clock, markers


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def state(coord: TransactionCoordinator, txn_id: str) -> str:
    return coord.describe(txn_id).state


async def test_coordinator_txn_commit_walks_the_states() -> None:
    coord, mlog, _, markers = await make()
    init = await coord.init_producer_id("t1", 60_000)
    assert (init.error, init.producer_id, init.producer_epoch) == (ErrorCode.NONE, 1000, 0)
    assert state(coord, "t1") == "Empty"
    added = await coord.add_partitions("t1", 1000, 0, [("t", 0), ("t", 1)])
    assert set(added.values()) == {ErrorCode.NONE}
    assert state(coord, "t1") == "Ongoing"
    end = await coord.end_txn("t1", 1000, 0, commit=True)
    assert end.error is ErrorCode.NONE
    await settle()
    assert markers.written == [(1000, 0, True, frozenset({("t", 0), ("t", 1)}))]
    assert state(coord, "t1") == "CompleteCommit"
    assert coord.describe("t1").partitions == ()
    # A retry of the same EndTxn is answered NONE; the other outcome is refused.
    assert (await coord.end_txn("t1", 1000, 0, commit=True)).error is ErrorCode.NONE
    assert (await coord.end_txn("t1", 1000, 0, commit=False)).error is ErrorCode.INVALID_TXN_STATE
    await settle()
    # Counted once, when COMPLETE_COMMIT was written; the retry adds nothing.
    assert (coord.counts.committed, coord.counts.aborted) == (1, 0)
    # Every transition is one record in Kafka's layout, the last one COMPLETE_COMMIT.
    (partition,) = [p for p, b in mlog.batches.items() if b]
    records = [r for b in mlog.batches[partition]
               for r in decode_records(b, max_uncompressed_bytes=1 << 20)]
    assert [rec.parse_value("t1", r.value).state for r in records if r.value] == [
        TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    assert all(rec.parse_key(r.key) == "t1" for r in records if r.key)


async def test_coordinator_txn_answer_table() -> None:
    coord, _, _, markers = await make()
    await coord.init_producer_id("t1", 60_000)
    assert (await coord.end_txn("t1", 1000, 0, commit=True)).error is ErrorCode.INVALID_TXN_STATE
    unknown = await coord.add_partitions("nobody", 1, 0, [("t", 0)])
    assert unknown == {("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    wrong_pid = await coord.add_partitions("t1", 7, 0, [("t", 0)])
    assert wrong_pid == {("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    fenced = await coord.add_partitions("t1", 1000, 5, [("t", 0)])
    assert fenced == {("t", 0): ErrorCode.PRODUCER_FENCED}
    assert fenced_error(ErrorCode.PRODUCER_FENCED, False) is ErrorCode.INVALID_PRODUCER_EPOCH
    bad_topic = await coord.add_partitions("t1", 1000, 0, [("t", 0), ("missing", 0)])
    assert bad_topic == {("t", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                         ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert (await coord.init_producer_id("t1", 900_001)).error is (
        ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    # PREPARE_COMMIT while its markers cannot be written: everything else must wait.
    markers.failing = {("t", 0)}
    await coord.add_partitions("t1", 1000, 0, [("t", 0)])
    assert (await coord.end_txn("t1", 1000, 0, commit=True)).error is ErrorCode.NONE
    await settle()
    assert state(coord, "t1") == "PrepareCommit"
    assert (await coord.add_partitions("t1", 1000, 0, [("t", 1)])) == {
        ("t", 1): ErrorCode.CONCURRENT_TRANSACTIONS}
    # Kafka answers an abort then as it answers a commit: its markers are on their way.
    for commit in (True, False):
        assert (await coord.end_txn("t1", 1000, 0, commit=commit)).error is (
            ErrorCode.CONCURRENT_TRANSACTIONS)
    assert (await coord.init_producer_id("t1", 60_000)).error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert coord.verify_partitions("t1", 1000, 0, [("t", 0)]) == {
        ("t", 0): ErrorCode.INVALID_TXN_STATE}
    coord.shutdown()


async def test_coordinator_txn_new_instance_fences_and_aborts() -> None:
    coord, _, _, markers = await make()
    await coord.init_producer_id("t1", 60_000)
    await coord.add_partitions("t1", 1000, 0, [("t", 2)])
    assert coord.verify_partitions("t1", 1000, 0, [("t", 2), ("t", 3)]) == {
        ("t", 2): ErrorCode.NONE, ("t", 3): ErrorCode.INVALID_TXN_STATE}
    # The new instance is told to retry while the old transaction is aborted with epoch 1.
    first = await coord.init_producer_id("t1", 60_000)
    assert first.error is ErrorCode.CONCURRENT_TRANSACTIONS
    await settle()
    assert markers.written == [(1000, 1, False, frozenset({("t", 2)}))]
    assert (coord.counts.committed, coord.counts.aborted) == (0, 1)  # the fence's abort
    retry = await coord.init_producer_id("t1", 60_000)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (ErrorCode.NONE, 1000, 2)
    assert (await coord.end_txn("t1", 1000, 0, commit=True)).error is ErrorCode.PRODUCER_FENCED
    # KIP-360: naming the current id and epoch bumps it; an older one is fenced.
    bumped = await coord.init_producer_id("t1", 60_000, 1000, 2)
    assert (bumped.error, bumped.producer_epoch) == (ErrorCode.NONE, 3)
    assert (await coord.init_producer_id("t1", 60_000, 1000, 1)).error is (
        ErrorCode.PRODUCER_FENCED)


async def test_coordinator_txn_reload_sends_markers_of_a_prepared_transaction() -> None:
    coord, mlog, clock, markers = await make()
    await coord.init_producer_id("t1", 60_000)
    await coord.add_partitions("t1", 1000, 0, [("t", 0)])
    markers.failing = {("t", 0)}
    await coord.end_txn("t1", 1000, 0, commit=False)
    await settle()
    coord.shutdown()  # unloaded before the markers could be written
    fresh_markers = Markers()

    async def no_id() -> int:
        raise AssertionError("a reload needs no new producer id")

    fresh = TransactionCoordinator(mlog, mlog, clock, no_id, fresh_markers)
    partition = fresh.partition_of("t1")
    mlog.gate = asyncio.Event()
    fresh.runtime.become_leader(partition, 1)
    assert (await fresh.end_txn("t1", 1000, 0, commit=False)).error is (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    mlog.gate.set()
    await fresh.runtime.until_loaded(partition)
    await settle()
    assert fresh_markers.written == [(1000, 0, False, frozenset({("t", 0)}))]
    assert state(fresh, "t1") == "CompleteAbort"
    fresh.shutdown()


async def test_coordinator_txn_timeout_aborts_and_expiry_forgets() -> None:
    coord, _, clock, markers = await make(id_expiration_ms=3_600_000,
                                          id_cleanup_interval_ms=60_000)
    await coord.init_producer_id("t1", 1_000)
    await coord.add_partitions("t1", 1000, 0, [("t", 4)])
    clock.advance(999)
    coord.tick()
    assert state(coord, "t1") == "Ongoing"
    clock.advance(1)
    coord.tick()
    await settle()
    assert markers.written == [(1000, 1, False, frozenset({("t", 4)}))]
    d = coord.describe("t1")
    assert (d.state, d.producer_epoch) == ("CompleteAbort", 1)
    assert (coord.counts.committed, coord.counts.aborted) == (0, 1)  # the timeout's abort
    assert (await coord.end_txn("t1", 1000, 0, commit=True)).error is ErrorCode.PRODUCER_FENCED
    # KIP-360: the producer whose transaction timed out goes on with a new epoch.
    resumed = await coord.init_producer_id("t1", 1_000, 1000, 0)
    assert (resumed.error, resumed.producer_epoch) == (ErrorCode.NONE, 2)
    error, _, listed = coord.list_transactions(["Empty", "Bogus"], [])
    assert error is ErrorCode.NONE and [t.transactional_id for t in listed] == ["t1"]
    assert coord.list_transactions(["Bogus"], [])[1] == ["Bogus"]
    clock.advance(3_540_000)  # idle for 3,540 s: the sweeps leave it
    coord.tick()
    await settle()
    assert coord.describe("t1").state == "Empty"
    clock.advance(60_000)  # idle for 3,600 s at the next sweep
    coord.tick()
    await settle()
    assert coord.describe("t1").error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


async def test_coordinator_group_transactional_offsets_wait_for_the_marker() -> None:
    clock = ManualClock()
    mlog = MemoryLog()
    groups = GroupCoordinator(mlog, mlog, clock)
    await lead_all(groups)
    commits = [OffsetCommit("t", 0, 17, -1, "")]
    assert await groups.txn_commit_offsets("g", 55, 0, -1, "", None, commits) == [ErrorCode.NONE]
    assert groups.fetch_offsets("g", [("t", 0)])[1] == [(("t", 0), None)]
    assert groups.unstable_offsets("g", [("t", 0)]) == {("t", 0)}
    partition = groups.partition_of("g")
    # The marker is written through the coordinator, which replays it once committed.
    assert await groups.complete_transaction(partition, 55, 0, True, 0) is ErrorCode.NONE
    assert groups.fetch_offsets("g", [("t", 0)])[1][0][1].offset == 17  # type: ignore[union-attr]
    assert groups.unstable_offsets("g", [("t", 0)]) == set()
    # An aborted one never shows, and a reload replays both outcomes from the log.
    aborted = [OffsetCommit("t", 0, 99, -1, "")]
    assert await groups.txn_commit_offsets("g", 56, 0, -1, "", None, aborted) == [ErrorCode.NONE]
    assert await groups.complete_transaction(partition, 56, 0, False, 0) is ErrorCode.NONE
    pending = [OffsetCommit("t", 1, 5, -1, "")]
    assert await groups.txn_commit_offsets("g", 57, 0, -1, "", None, pending) == [ErrorCode.NONE]
    fresh = GroupCoordinator(mlog, mlog, clock)
    await lead_all(fresh)
    found = dict(fresh.fetch_offsets("g", [("t", 0), ("t", 1)])[1])
    assert found[("t", 0)].offset == 17  # type: ignore[union-attr]
    assert found[("t", 1)] is None
    assert fresh.unstable_offsets("g", [("t", 0), ("t", 1)]) == {("t", 1)}


async def test_coordinator_txn_completion_retried_until_written() -> None:
    coord, mlog, _, markers = await make()
    await coord.init_producer_id("t1", 60_000)
    await coord.add_partitions("t1", 1000, 0, [("t", 0)])
    markers.failing = {("t", 0)}
    assert (await coord.end_txn("t1", 1000, 0, commit=True)).error is ErrorCode.NONE
    mlog.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS  # the COMPLETE_COMMIT record fails
    markers.failing = set()
    for _ in range(50):  # bounded: the markers' retry backoff is 50 ms at first
        if markers.written:
            break
        await asyncio.sleep(0.02)
    assert markers.written and state(coord, "t1") == "PrepareCommit"
    mlog.fail_with = None
    for _ in range(100):
        if state(coord, "t1") == "CompleteCommit":
            break
        await asyncio.sleep(0.02)
    assert state(coord, "t1") == "CompleteCommit"


async def test_coordinator_txn_fenced_marker_stops_and_leaves_the_completion() -> None:
    # A partition that saw a newer producer epoch or coordinator: this coordinator is stale,
    # so it sends no more markers (not even to the partitions that failed otherwise) and
    # never writes COMPLETE_COMMIT; the newer coordinator completes the transaction.
    for refusal in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
        coord, _, clock, markers = await make()
        await coord.init_producer_id("t1", 60_000)
        await coord.add_partitions("t1", 1000, 0, [("t", 0), ("t", 1), ("t", 2)])
        markers.refusing = {("t", 1): refusal}
        markers.failing = {("t", 2)}
        assert (await coord.end_txn("t1", 1000, 0, commit=True)).error is ErrorCode.NONE
        await settle()
        await asyncio.sleep(0.3)  # past the first retries' backoff, had there been any
        assert markers.attempts == 1
        assert markers.written == [(1000, 0, True, frozenset({("t", 0)}))]
        assert state(coord, "t1") == "PrepareCommit"
        assert coord.counts.committed == 0


async def test_coordinator_txn_failed_first_write_leaves_no_id() -> None:
    """A new id's first record that is not written leaves nothing behind: a reload would
    not know the id, so the live state must not either."""
    coord, mlog, _, _ = await make()
    mlog.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    assert (await coord.init_producer_id("t1", 60_000)).error is (
        ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert coord.describe("t1").error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    mlog.fail_with = None
    init = await coord.init_producer_id("t1", 60_000)
    assert (init.error, init.producer_epoch) == (ErrorCode.NONE, 0)


async def test_coordinator_txn_end_rechecked_when_its_record_commits() -> None:
    """EndTxn's record enters the state by replay once committed, and the request is checked
    again then: when the partition was loaded again in between (a leadership move and back,
    Kafka's coordinator epoch check), it is answered NOT_COORDINATOR and this request sends
    no marker; the new load sends them, from the PREPARE_COMMIT it reads."""
    coord, mlog, _, markers = await make()
    await coord.init_producer_id("t1", 60_000)
    await coord.add_partitions("t1", 1000, 0, [("t", 0)])
    partition = coord.partition_of("t1")
    mlog.hold = True
    ending = asyncio.ensure_future(coord.end_txn("t1", 1000, 0, commit=True))
    await settle()
    mlog.gate = asyncio.Event()
    coord.runtime.become_follower(partition, 1)
    coord.runtime.become_leader(partition, 2)
    mlog.commit_held()
    assert (await ending).error is ErrorCode.NOT_COORDINATOR
    await settle()
    assert markers.written == []
    mlog.hold = False
    mlog.gate.set()
    await coord.runtime.until_loaded(partition)
    await settle()
    assert markers.written == [(1000, 0, True, frozenset({("t", 0)}))]
    assert state(coord, "t1") == "CompleteCommit"
