"""The share coordinator against an in-memory `__share_group_state`: how state batches
combine, snapshots and updates replayed (at load and once written) into the same state,
a new snapshot after enough updates, fencing by leader and state epoch, deletion; and the
share-partition window rebuilt from that state. (Brokers and real ShareConsumers drive the
same code in tests/broker/test_share_groups.py and
tests/replication/test_replication_share_state.py.)"""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from ads.common.clock import ManualClock
from ads.coordinator.share import records as rec
from ads.coordinator.share.coordinator import ShareCoordinator
from ads.coordinator.share.records import ShareKey, StateBatch
from ads.coordinator.share.shard import ShareCoordinatorConfig, WriteRequest
from ads.coordinator.share.state import ACKNOWLEDGED, ARCHIVED, AVAILABLE, combine
from ads.protocol.errors import ErrorCode
from ads.records.batch import decode_records
from ads.replication.share_partition import RecordState, ShareConfig, SharePartition
from coordinator_fakes import MemoryLog, lead_all

B = StateBatch
PRUNE_MS = 60_000


async def make(per_snapshot: int = 3, partitions: int = 3, clock: ManualClock | None = None
               ) -> tuple[ShareCoordinator, MemoryLog, ShareKey]:
    mlog = MemoryLog(partitions=partitions)
    mlog.name = rec.SHARE_GROUP_STATE_TOPIC
    coord = ShareCoordinator(mlog, mlog, clock or ManualClock(),
                             ShareCoordinatorConfig(per_snapshot, PRUNE_MS))
    await lead_all(coord)  # type: ignore[arg-type]
    return coord, mlog, ShareKey("g", mlog.ids["t"], 1)


def kinds(mlog: MemoryLog) -> list[int]:
    """The record types written, in order (0 snapshot, 1 update)."""
    return [rec.decode_key(bytes(r.key))[0] for batches in mlog.batches.values()
            for batch in batches
            for r in decode_records(batch, max_uncompressed_bytes=1 << 20) if r.key is not None]


async def reloaded(mlog: MemoryLog, per_snapshot: int = 3) -> ShareCoordinator:
    coord = ShareCoordinator(mlog, mlog, ManualClock(), ShareCoordinatorConfig(per_snapshot))
    await lead_all(coord)  # type: ignore[arg-type]
    return coord


def test_coordinator_share_state_combine_lays_new_batches_over_old() -> None:
    known = [B(0, 9, AVAILABLE, 1), B(10, 19, ACKNOWLEDGED, 1)]
    assert combine(known, [B(5, 12, ARCHIVED, 2)], 0) == (
        B(0, 4, AVAILABLE, 1), B(5, 12, ARCHIVED, 2), B(13, 19, ACKNOWLEDGED, 1))
    # Below the start offset nothing is kept; neighbours alike are joined.
    assert combine(known, [B(0, 9, ACKNOWLEDGED, 1)], 3) == (B(3, 19, ACKNOWLEDGED, 1),)


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 8), st.sampled_from(
    [AVAILABLE, ACKNOWLEDGED, ARCHIVED]), st.integers(1, 3)), max_size=12),
    st.integers(0, 20))
def test_coordinator_share_state_combine_matches_offset_by_offset(
        writes: list[tuple[int, int, int, int]], start: int) -> None:
    """Combining write after write gives each offset its last written state."""
    expected: dict[int, tuple[int, int]] = {}
    batches: tuple[StateBatch, ...] = ()
    for first, length, state, count in writes:
        batches = combine(batches, [B(first, first + length, state, count)], 0)
        expected.update(dict.fromkeys(range(first, first + length + 1), (state, count)))
    batches = combine(batches, [], start)
    got = {o: (b.state, b.delivery_count) for b in batches for o in range(b.first, b.last + 1)}
    assert got == {o: v for o, v in expected.items() if o >= start}
    assert all(a.last < b.first for a, b in zip(batches, batches[1:], strict=False))


async def test_coordinator_share_state_snapshot_then_updates_replay_to_one_state() -> None:
    coord, mlog, key = await make(per_snapshot=2)
    assert (await coord.initialize(key, 0, 10)).error is ErrorCode.NONE
    writes = [
        WriteRequest(key, 0, 1, 10, (B(10, 14, ACKNOWLEDGED, 1), B(15, 15, AVAILABLE, 1))),
        WriteRequest(key, 0, 1, 15, (B(15, 15, AVAILABLE, 2),)),
        WriteRequest(key, 0, 1, 15, (B(16, 19, ARCHIVED, 1),)),
        WriteRequest(key, 0, 2, 15, (B(15, 15, ACKNOWLEDGED, 3),)),
    ]
    for w in writes:
        assert (await coord.write(w)).error is ErrorCode.NONE
    # A snapshot, two updates, a snapshot again (combining), one update.
    assert kinds(mlog) == [0, 1, 1, 0, 1]
    answer = coord.read(key, 2)
    assert answer.error is ErrorCode.NONE and answer.state is not None
    state = answer.state
    assert (state.start_offset, state.state_epoch, state.leader_epoch) == (15, 0, 2)
    assert state.batches == (B(15, 15, ACKNOWLEDGED, 3), B(16, 19, ARCHIVED, 1))
    # A reload replays the same records into the same state.
    again = (await reloaded(mlog)).read(key, 2).state
    assert again is not None and (again.start_offset, again.batches) == (
        state.start_offset, state.batches)


async def test_coordinator_share_state_fences_and_errors() -> None:
    coord, mlog, key = await make()
    missing = ShareKey("g", mlog.ids["t"], 99)
    assert coord.read(missing, 0).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert coord.read(key, 0).state is None  # nothing written yet: no state, no error
    assert (await coord.write(WriteRequest(key, 1, 5, 0))).error is ErrorCode.NONE
    assert (await coord.write(WriteRequest(key, 1, 4, 0))).error is ErrorCode.FENCED_LEADER_EPOCH
    assert (await coord.write(WriteRequest(key, 0, 5, 0))).error is ErrorCode.FENCED_STATE_EPOCH
    assert (await coord.write(WriteRequest(key, 1, 5, 0, (B(3, 1, AVAILABLE, 1),)))
            ).error is ErrorCode.INVALID_REQUEST
    # A new leader's read fences the former one's writes.
    assert coord.read(key, 6).error is ErrorCode.NONE
    assert (await coord.write(WriteRequest(key, 1, 5, 0))).error is ErrorCode.FENCED_LEADER_EPOCH
    assert coord.read(key, 5).error is ErrorCode.FENCED_LEADER_EPOCH
    # Not led here, or loading.
    coord.runtime.become_follower(coord.partition_of(key))
    assert coord.read(key, 6).error is ErrorCode.NOT_COORDINATOR
    assert (await coord.write(WriteRequest(key, 1, 6, 0))).error is ErrorCode.NOT_COORDINATOR


async def test_coordinator_share_state_delete_leaves_nothing_after_reload() -> None:
    coord, mlog, key = await make()
    assert (await coord.write(WriteRequest(key, 0, 0, 4, (B(4, 6, ARCHIVED, 1),)))
            ).error is ErrorCode.NONE
    assert (await coord.delete(key)).error is ErrorCode.NONE
    assert coord.read(key, 0).state is None
    assert (await reloaded(mlog)).read(key, 0).state is None


async def test_coordinator_share_state_failed_append_changes_nothing() -> None:
    coord, mlog, key = await make()
    mlog.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    answer = await coord.write(WriteRequest(key, 0, 0, 4))
    assert answer.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coord.read(key, 0).state is None


def test_coordinator_share_state_window_from_state() -> None:
    """A new leader's window: written states kept, offsets not written (acquired when the
    leader was lost) AVAILABLE with count 0, leading finished records past the start."""
    sp = SharePartition.from_state(10, [B(10, 11, ACKNOWLEDGED, 1), B(14, 15, AVAILABLE, 2),
                                        B(16, 16, ARCHIVED, 5)], ShareConfig())
    assert (sp.start_offset, sp.end_offset) == (12, 17)
    assert [(s.first, s.last, s.state, s.delivery_count) for s in sp.spans] == [
        (12, 13, RecordState.AVAILABLE, 0), (14, 15, RecordState.AVAILABLE, 2),
        (16, 16, RecordState.ARCHIVED, 5)]
    assert sp.next_fetch_offset() == 12


def test_coordinator_share_state_acknowledgement_waits_for_its_write() -> None:
    sp = SharePartition(0, ShareConfig(delivery_count_limit=2))
    sp.acquire("m", [(0, 3)], 10, 0)
    written = sp.prepare_acknowledge("m", 0, 3, [1, 2, 3, 1], 0)
    assert written == [(0, 0, 2, 1), (1, 1, 0, 1), (2, 2, 4, 1), (3, 3, 2, 1)]
    # Pending: neither acknowledged again, nor expired, nor released meanwhile.
    assert sp.prepare_acknowledge("m", 0, 0, [1], 0) is ErrorCode.INVALID_RECORD_STATE
    assert not sp.expire(10**9) and not sp.release_member("m")
    sp.complete_acknowledge("m", 0, 3, [1, 2, 3, 1], written=False)
    assert all(s.state is RecordState.ACQUIRED for s in sp.spans)  # the write failed
    assert sp.prepare_acknowledge("m", 0, 3, [1], 0) == [(o, o, 2, 1) for o in range(4)]
    sp.complete_acknowledge("m", 0, 3, [1], written=True)
    assert (sp.start_offset, sp.spans) == (4, [])


async def test_coordinator_share_state_snapshot_waits_for_writes_in_flight() -> None:
    """A snapshot combines the state with the write: it is made only when no other write of
    the share-partition is in flight, else an update is (here every write would be a
    snapshot)."""
    coord, mlog, key = await make(per_snapshot=0)
    assert (await coord.write(WriteRequest(key, 0, 0, 0))).error is ErrorCode.NONE
    mlog.hold = True
    first = asyncio.ensure_future(coord.write(WriteRequest(key, 0, 0, 0, (B(0, 0, 2, 1),))))
    second = asyncio.ensure_future(coord.write(WriteRequest(key, 0, 0, 0, (B(1, 1, 2, 1),))))
    await asyncio.sleep(0)
    mlog.commit_held()
    assert [(await first).error, (await second).error] == [ErrorCode.NONE] * 2
    assert kinds(mlog) == [0, 0, 1]
    state = coord.read(key, 0).state
    assert state is not None and state.batches == (B(0, 1, 2, 1),)


async def test_coordinator_share_state_pruned_below_the_oldest_snapshot_needed() -> None:
    """Each share-partition needs its last snapshot and the updates after it: the records
    below the oldest such snapshot are deleted at the pruning interval, and a reload of
    what is left builds the same state."""
    clock = ManualClock()
    coord, mlog, a = await make(per_snapshot=1, partitions=1, clock=clock)
    b = ShareKey("g2", a.topic_id, 0)
    for key, batches in ((a, ()), (b, ()), (a, (B(0, 1, ACKNOWLEDGED, 1),)),
                         (a, (B(2, 2, AVAILABLE, 1),)), (a, (B(3, 3, ARCHIVED, 2),))):
        assert (await coord.write(WriteRequest(key, 0, 0, 0, batches))).error is ErrorCode.NONE
    assert kinds(mlog) == [0, 0, 1, 0, 1]  # a's last snapshot is the 4th record (offset 3)
    clock.advance(PRUNE_MS)
    coord.tick()
    assert mlog.log_start == {0: 1}  # b's snapshot, offset 1, is still needed
    assert (await coord.delete(b)).error is ErrorCode.NONE
    clock.advance(PRUNE_MS)
    coord.tick()
    assert mlog.log_start == {0: 3}
    state = coord.read(a, 0).state
    again = (await reloaded(mlog, per_snapshot=1)).read(a, 0).state
    assert state is not None and again is not None
    assert (again.start_offset, again.batches) == (state.start_offset, state.batches)
    assert state.batches == (B(0, 1, ACKNOWLEDGED, 1), B(2, 2, AVAILABLE, 1),
                             B(3, 3, ARCHIVED, 2))
