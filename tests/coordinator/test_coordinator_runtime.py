"""The coordinator runtime: loading states and answers, leadership changes, writes that
complete when committed, append failures, timers. Driven with an in-memory topic whose
appends can be held uncommitted (as with replicas) and whose loads can be held."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from ads.common.clock import ManualClock
from ads.coordinator.group.api import OffsetCommit
from ads.coordinator.group.coordinator import GroupCoordinator
from ads.coordinator.runtime import (
    CoordinatorRuntime,
    PartitionStatus,
    Write,
    coordinator_error,
)
from ads.coordinator.timer import Timers
from ads.protocol.errors import ErrorCode
from coordinator_fakes import MemoryLog, join, join_new, lead_all, make, sync


class KeyValueShard:
    """The smallest coordinator: the last value of each key; `put` writes one."""

    def __init__(self, partition: int, timers: Timers[Write]) -> None:
        self.partition = partition
        self.timers = timers
        self.values: dict[bytes, bytes] = {}
        self.loaded = self.unloaded = False

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value

    def on_loaded(self) -> Sequence[Write]:
        self.loaded = True
        return []

    def on_unloaded(self) -> None:
        self.unloaded = True

    def put(self, key: bytes, value: bytes) -> Write:
        def then(error: ErrorCode) -> list[Write]:
            if error is ErrorCode.NONE:
                self.values[key] = value
            return []

        return Write([(key, value)], then)


def _commit(topic: str, partition: int, offset: int) -> OffsetCommit:
    return OffsetCommit(topic, partition, offset, -1, "")


SHARDS: list[KeyValueShard] = []


def kv_runtime(mlog: MemoryLog | None = None
               ) -> tuple[CoordinatorRuntime[KeyValueShard], MemoryLog, ManualClock]:
    """A runtime of `KeyValueShard`s; every shard it makes is appended to SHARDS."""
    def new_shard(partition: int, timers: Timers[Write]) -> KeyValueShard:
        SHARDS.append(KeyValueShard(partition, timers))
        return SHARDS[-1]

    clock = ManualClock()
    mlog = mlog or MemoryLog(partitions=2)
    return CoordinatorRuntime(mlog, clock, new_shard), mlog, clock


async def test_runtime_answers_load_in_progress_until_loaded() -> None:
    runtime, mlog, _ = kv_runtime()
    runtime.become_leader(0, 0)
    await runtime.until_loaded(0)
    assert await runtime.write(0, runtime.shard(0).put(b"k", b"v1")) == ErrorCode.NONE  # type: ignore[union-attr]
    runtime.become_follower(0)
    mlog.gate = asyncio.Event()
    runtime.become_leader(0, 1)
    for _ in range(5):
        await asyncio.sleep(0)
    assert runtime.status(0) is PartitionStatus.LOADING
    assert runtime.error(0) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert runtime.shard(0) is None and runtime.loading()
    assert await runtime.write(0, Write([(b"k", b"x")])) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    mlog.gate.set()
    assert await runtime.until_loaded(0) is PartitionStatus.ACTIVE
    assert runtime.error(0) == ErrorCode.NONE and not runtime.loading()
    shard = runtime.shard(0)
    assert shard is not None and shard.loaded and shard.values == {b"k": b"v1"}


async def test_runtime_group_answers_load_in_progress_then_serves_loaded_offsets() -> None:
    coord, mlog, clock = await make()
    await coord.commit_offsets("g", -1, "", None, -1, [_commit("t", 0, 5)])
    mlog.gate = asyncio.Event()
    fresh = GroupCoordinator(mlog, mlog, clock, coord.config)
    task = asyncio.ensure_future(lead_all(fresh))
    await asyncio.sleep(0)
    assert fresh.fetch_offsets("g", [("t", 0)]) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])
    assert await fresh.commit_offsets("g", -1, "", None, -1, [_commit("t", 1, 1)]) == [
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    assert join(fresh).last.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.list_groups()[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    mlog.gate.set()
    await task
    error, found = fresh.fetch_offsets("g", [("t", 0)])
    assert error == ErrorCode.NONE and found[0][1] is not None and found[0][1].offset == 5
    assert fresh.list_groups()[0] == ErrorCode.NONE


async def test_runtime_marker_refused_while_loading_then_replayed() -> None:
    """A marker for a partition still loading would land past what the load reads; it is
    refused (the sender tries again) and, once written, replayed into the shard."""
    coord, mlog, clock = await make()
    p = coord.partition_of("g")
    assert await coord.txn_commit_offsets("g", 7, 0, -1, "", None, [_commit("t", 0, 9)]) == [
        ErrorCode.NONE]
    mlog.gate = asyncio.Event()
    fresh = GroupCoordinator(mlog, mlog, clock, coord.config)
    task = asyncio.ensure_future(lead_all(fresh))
    await asyncio.sleep(0)
    written = mlog.appended()
    assert await fresh.complete_transaction(p, 7, 0, True, 0) is (
        ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert mlog.appended() == written  # nothing appended while loading
    mlog.gate.set()
    await task
    assert fresh.unstable_offsets("g", [("t", 0)]) == {("t", 0)}
    assert await fresh.complete_transaction(p, 7, 0, True, 0) is ErrorCode.NONE
    assert fresh.unstable_offsets("g", [("t", 0)]) == set()
    found = fresh.fetch_offsets("g", [("t", 0)])[1][0][1]
    assert found is not None and found.offset == 9
    # Not led here (any more): the same answer, so the sender looks for the leader.
    coord.runtime.become_follower(p)
    assert await coord.complete_transaction(p, 7, 0, True, 0) is (
        ErrorCode.NOT_LEADER_OR_FOLLOWER)


async def test_runtime_not_coordinator_for_partitions_not_led_or_unloaded() -> None:
    coord, mlog, clock = await make()
    leader, _ = join_new(coord, client_id="a")
    sync(coord, leader, 1, {leader: b""})
    member, _ = join_new(coord, client_id="b")
    join(coord, member_id=leader, client_id="a")  # generation 2: b is a follower
    p = coord.partition_of("g")
    parked = sync(coord, member, 2)  # a follower's SyncGroup waits for the leader's
    assert parked.got == []
    coord.runtime.become_follower(p)
    assert parked.last.error == ErrorCode.NOT_COORDINATOR  # answered when unloaded
    assert coord.fetch_offsets("g", None) == (ErrorCode.NOT_COORDINATOR, [])
    assert coord.heartbeat("g", 2, member, None) == ErrorCode.NOT_COORDINATOR
    assert await coord.commit_offsets("g", -1, "", None, -1, [_commit("t", 0, 1)]) == [
        ErrorCode.NOT_COORDINATOR]
    assert coord.runtime.status(p) is None and "g" not in coord.groups
    never_led = GroupCoordinator(mlog, mlog, clock, coord.config)
    assert never_led.describe_group("g").error == ErrorCode.NOT_COORDINATOR


async def test_runtime_reload_restores_committed_offsets_and_groups() -> None:
    coord, _, _ = await make()
    a, _ = join_new(coord)
    sync(coord, a, 1, {a: b"assignment"})
    assert await coord.commit_offsets("g", 1, a, None, -1, [_commit("t", 0, 7)]) == [
        ErrorCode.NONE]
    p = coord.partition_of("g")
    coord.runtime.become_follower(p, 1)
    coord.runtime.become_leader(p, 1)
    assert await coord.runtime.until_loaded(p) is PartitionStatus.ACTIVE
    error, found = coord.fetch_offsets("g", None)
    assert error == ErrorCode.NONE and [(tp, c.offset) for tp, c in found if c] == [
        (("t", 0), 7)]
    group = coord.groups["g"]
    assert group.generation_id == 1 and group.members[a].assignment == b"assignment"


async def test_runtime_write_completes_only_when_committed() -> None:
    coord, mlog, _ = await make()
    mlog.hold = True
    commit = asyncio.ensure_future(
        coord.commit_offsets("g", -1, "", None, -1, [_commit("t", 0, 9)]))
    await asyncio.sleep(0)
    assert not commit.done() and mlog.appended() == 1  # appended, not yet committed
    assert coord.fetch_offsets("g", [("t", 0)])[1] == [(("t", 0), None)]
    mlog.commit_held()
    assert await commit == [ErrorCode.NONE]
    found = coord.fetch_offsets("g", [("t", 0)])[1][0][1]
    assert found is not None and found.offset == 9
    # The leader's SyncGroup completes the rebalance once the group record is committed.
    a, _ = join_new(coord, group="h")
    answer = sync(coord, a, 1, {a: b"x"}, group="h")
    assert answer.got == [] and coord.groups["h"].state.value == "CompletingRebalance"
    mlog.commit_held()
    await asyncio.sleep(0)  # the commit's callbacks run on the event loop
    assert answer.last.error == ErrorCode.NONE and answer.last.assignment == b"x"
    assert coord.groups["h"].state.value == "Stable"


async def test_runtime_append_failures_map_to_coordinator_errors() -> None:
    assert coordinator_error(ErrorCode.NOT_LEADER_OR_FOLLOWER) == ErrorCode.NOT_COORDINATOR
    assert coordinator_error(ErrorCode.KAFKA_STORAGE_ERROR) == ErrorCode.NOT_COORDINATOR
    for code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        assert coordinator_error(code) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinator_error(ErrorCode.MESSAGE_TOO_LARGE) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert coordinator_error(ErrorCode.CORRUPT_MESSAGE) == ErrorCode.UNKNOWN_SERVER_ERROR
    coord, mlog, _ = await make()
    mlog.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS  # refused at once
    assert await coord.commit_offsets("g", -1, "", None, -1, [_commit("t", 0, 1)]) == [
        ErrorCode.COORDINATOR_NOT_AVAILABLE]
    mlog.fail_with = ErrorCode.RECORD_LIST_TOO_LARGE  # a commit's too large is its own
    assert await coord.commit_offsets("g", -1, "", None, -1, [_commit("t", 0, 1)]) == [
        ErrorCode.INVALID_COMMIT_OFFSET_SIZE]
    mlog.fail_with = None
    mlog.hold = True  # appended, then failed while waiting for the commit
    commit = asyncio.ensure_future(
        coord.commit_offsets("g", -1, "", None, -1, [_commit("t", 0, 1)]))
    await asyncio.sleep(0)
    mlog.commit_held(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert await commit == [ErrorCode.NOT_COORDINATOR]
    assert coord.fetch_offsets("g", [("t", 0)])[1] == [(("t", 0), None)]  # nothing applied


async def test_runtime_write_unloaded_before_commit_reports_not_coordinator() -> None:
    runtime, mlog, _ = kv_runtime()
    runtime.become_leader(1, 0)
    await runtime.until_loaded(1)
    shard = runtime.shard(1)
    assert shard is not None
    mlog.hold = True
    pending = asyncio.ensure_future(runtime.write(1, shard.put(b"k", b"v")))
    await asyncio.sleep(0)
    runtime.become_follower(1)
    assert shard.unloaded
    mlog.commit_held()
    assert await pending == ErrorCode.NOT_COORDINATOR
    assert shard.values == {}  # the dropped shard is not touched
    runtime.become_leader(1, 1)  # the record did land: the next leader loads it
    await runtime.until_loaded(1)
    assert runtime.shard(1).values == {b"k": b"v"}  # type: ignore[union-attr]


async def test_runtime_leader_epochs_order_leadership_changes() -> None:
    runtime, mlog, _ = kv_runtime()
    runtime.become_leader(0, 5)
    await runtime.until_loaded(0)
    first = runtime.shard(0)
    runtime.become_leader(0, 4)  # stale
    runtime.become_leader(0, 6)  # still leader: the state in memory stays
    assert runtime.shard(0) is first
    runtime.become_follower(0, 6)  # not above the partition's epoch: stale
    assert runtime.shard(0) is first
    runtime.become_follower(0, 7)
    assert runtime.status(0) is None and first is not None and first.unloaded
    mlog.gate = asyncio.Event()
    runtime.become_leader(0, 8)
    abandoned = SHARDS[-1]
    runtime.become_follower(0)  # unloaded while loading: the load is abandoned
    mlog.gate.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert runtime.status(0) is None and not abandoned.loaded and abandoned.unloaded


async def test_runtime_failed_load_answers_not_coordinator_until_led_again() -> None:
    class Broken(MemoryLog):
        fail = True

        async def read_batches(self, partition: int) -> AsyncIterator[bytes]:
            if self.fail:
                raise OSError("disk gone")
            async for batch in super().read_batches(partition):
                yield batch

    runtime, mlog, _ = kv_runtime(Broken(partitions=1))
    runtime.become_leader(0, 0)
    assert await runtime.until_loaded(0) is PartitionStatus.FAILED
    assert runtime.error(0) == ErrorCode.NOT_COORDINATOR
    mlog.fail = False  # type: ignore[attr-defined]
    runtime.become_leader(0, 0)  # the same epoch does not retry
    assert runtime.status(0) is PartitionStatus.FAILED
    runtime.become_leader(0, 1)
    assert await runtime.until_loaded(0) is PartitionStatus.ACTIVE


async def test_runtime_timers_run_while_active_and_stop_at_unload() -> None:
    runtime, mlog, clock = kv_runtime()
    runtime.become_leader(0, 0)
    await runtime.until_loaded(0)
    shard = runtime.shard(0)
    assert shard is not None
    shard.timers.schedule(1000, lambda: [shard.put(b"timer", b"fired")])
    shard.timers.schedule(5000, lambda: [shard.put(b"late", b"fired")])
    clock.advance(1000)
    runtime.tick()
    assert shard.values == {b"timer": b"fired"} and mlog.appended() == 1
    runtime.become_follower(0)
    assert len(shard.timers) == 0
    clock.advance(5000)
    runtime.tick()
    assert mlog.appended() == 1


async def test_runtime_group_timers_write_through_the_runtime() -> None:
    coord, mlog, clock = await make()
    a, _ = join_new(coord, session_ms=6000)
    sync(coord, a, 1, {a: b""})
    before = mlog.appended()
    clock.advance(6001)
    coord.tick()  # the session expires; the now empty group's record is written
    assert coord.groups["g"].state.value == "Empty" and mlog.appended() == before + 1



async def test_runtime_wakeup_names_each_deadline_and_the_earliest_left() -> None:
    runtime, _, clock = kv_runtime()
    asked: list[int] = []
    runtime.wakeup = asked.append
    now = clock.time_ms()
    runtime.become_leader(0, 0)
    await runtime.until_loaded(0)
    shard = runtime.shard(0)
    assert shard is not None
    assert runtime.next_deadline_ms() is None
    late = shard.timers.schedule(5000, lambda: None)
    early = shard.timers.schedule(1000, lambda: None)
    assert asked == [now + 5000, now + 1000]
    assert runtime.next_deadline_ms() == now + 1000
    early.cancel()  # a cancelled timer no longer counts
    assert runtime.next_deadline_ms() == now + 5000
    late.cancel()
    assert runtime.next_deadline_ms() is None


async def test_runtime_wakeup_for_timers_set_while_loading() -> None:
    # A partition's timers run only once it is ACTIVE: the owner hears of its earliest
    # deadline again when it gets there.
    coord, mlog, clock = await make()
    a, _ = join_new(coord, session_ms=6000)
    sync(coord, a, 1, {a: b""})
    fresh = GroupCoordinator(mlog, mlog, clock, coord.config)
    asked: list[int] = []
    fresh.runtime.wakeup = asked.append
    await lead_all(fresh)
    assert clock.time_ms() + 6000 in asked
    assert fresh.next_deadline_ms() == clock.time_ms() + 6000


async def test_runtime_write_timed_out_after_its_append_is_loaded_from_the_log() -> None:
    # The batch is in the log when its wait for the replicas times out, and is committed
    # when they catch up: the shard must not go on without it until a leadership change.
    runtime, mlog, _ = kv_runtime()
    runtime.become_leader(1, 3)
    await runtime.until_loaded(1)
    shard = runtime.shard(1)
    assert shard is not None
    mlog.hold = True
    pending = asyncio.ensure_future(runtime.write(1, shard.put(b"k", b"v")))
    await asyncio.sleep(0)
    mlog.commit_held(ErrorCode.REQUEST_TIMED_OUT)
    assert await pending == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert shard.unloaded and shard.values == {}
    assert await runtime.until_loaded(1) is PartitionStatus.ACTIVE
    again = runtime.shard(1)  # built again from the log
    assert again is not None and again is not shard and again.values == {b"k": b"v"}
    assert runtime.leader_epoch(1) == 3
