"""The offset manager: commit rules, the `__consumer_offsets` record layout, loading,
deletion and expiry, against an in-memory log and a manual clock."""

from __future__ import annotations

import struct

from ads.coordinator.group import records as rec
from ads.coordinator.group.api import CommittedOffset, OffsetCommit
from ads.coordinator.group.coordinator import GroupCoordinator
from ads.coordinator.group.state import GroupState
from ads.coordinator.topic import java_string_hash, partition_for
from ads.protocol.errors import ErrorCode
from ads.records.batch import decode_records
from coordinator_fakes import join, join_new, lead_all, make, sync


async def commit(coord: GroupCoordinator, group: str = "g", generation: int = -1,
                 member: str = "", offsets: list[tuple[str, int, int]] | None = None,
                 metadata: str | None = "m") -> list[ErrorCode]:
    return await coord.commit_offsets(group, generation, member, None, -1, [
        OffsetCommit(t, p, o, 3, metadata) for t, p, o in (offsets or [("t", 0, 5)])])


def test_coordinator_partition_for_matches_java_hash() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("ü€") == (0xFC * 31 + 0x20AC)


async def test_coordinator_commit_record_layout_is_kafkas() -> None:
    coord, mlog, clock = await make()
    assert await commit(coord, offsets=[("t", 1, 42)]) == [ErrorCode.NONE]
    (batch,) = mlog.batches[coord.partition_of("g")]
    (record,) = decode_records(batch, max_uncompressed_bytes=1 << 20)
    assert record.key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 1)
    assert record.value == struct.pack(">hqih1sq", 3, 42, 3, 1, b"m", clock.time_ms())
    assert rec.parse_key(record.key) == rec.OffsetKey("g", "t", 1)
    assert rec.parse_offset_value(record.value) == CommittedOffset(42, 3, "m", clock.time_ms())


async def test_coordinator_commit_and_fetch_round_trip_metadata() -> None:
    coord, _, _ = await make()
    assert await commit(coord, offsets=[("t", 0, 7), ("u", 1, 9)], metadata=None) == [
        ErrorCode.NONE] * 2
    assert await commit(coord, offsets=[("t", 2, 1)], metadata="ünïcode meta") == [
        ErrorCode.NONE]
    error, found = coord.fetch_offsets("g", [("t", 0), ("t", 2), ("t", 5)])
    assert error == ErrorCode.NONE
    assert [(tp, c.offset if c else None, c.metadata if c else None) for tp, c in found] == [
        (("t", 0), 7, ""), (("t", 2), 1, "ünïcode meta"), (("t", 5), None, None)]
    error, everything = coord.fetch_offsets("g", None)
    assert [tp for tp, _ in everything] == [("t", 0), ("t", 2), ("u", 1)]
    assert coord.fetch_offsets("unknown", [("t", 0)]) == (ErrorCode.NONE, [(("t", 0), None)])


async def test_coordinator_commit_bad_input_gets_kafka_errors() -> None:
    coord, mlog, _ = await make(offset_metadata_max_bytes=10)
    assert await commit(coord, offsets=[("nope", 0, 1), ("t", 6, 1), ("t", -1, 1)]) == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 3
    assert await commit(coord, metadata="x" * 11) == [ErrorCode.OFFSET_METADATA_TOO_LARGE]
    assert await commit(coord, generation=3, member="m") == [ErrorCode.ILLEGAL_GENERATION]
    assert await coord.commit_offsets(None, -1, "", None, -1, []) == []  # type: ignore[arg-type]
    assert mlog.appended() == 0 and coord.groups == {}
    mlog.fail_with = ErrorCode.MESSAGE_TOO_LARGE
    assert await commit(coord) == [ErrorCode.INVALID_COMMIT_OFFSET_SIZE]
    assert coord.fetch_offsets("g", [("t", 0)])[1] == [(("t", 0), None)]


async def test_coordinator_commit_rules_follow_the_group_state() -> None:
    coord, _, _ = await make()
    a, _ = join_new(coord)
    assert await commit(coord, generation=1, member=a) == [ErrorCode.REBALANCE_IN_PROGRESS]
    sync(coord, a, 1, {a: b""})
    assert await commit(coord) == [ErrorCode.UNKNOWN_MEMBER_ID]  # generation -1, group not empty
    assert await commit(coord, generation=0, member=a) == [ErrorCode.ILLEGAL_GENERATION]
    assert await commit(coord, generation=1, member="x") == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert await commit(coord, generation=1, member=a) == [ErrorCode.NONE]


async def test_coordinator_load_restores_offsets_and_groups() -> None:
    coord, mlog, clock = await make()
    a, _ = join_new(coord, session_ms=10_000)
    sync(coord, a, 1, {a: b"assignment"})
    await commit(coord, generation=1, member=a, offsets=[("t", 0, 5), ("t", 1, 6)])
    await commit(coord, generation=1, member=a, offsets=[("t", 0, 8)])
    await commit(coord, group="solo", offsets=[("u", 0, 1)])
    fresh = GroupCoordinator(mlog, mlog, clock, coord.config)
    for p in range(mlog.partitions):
        fresh.runtime.become_leader(p, 0)
    assert fresh.fetch_offsets("g", [("t", 0)])[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.heartbeat("g", 1, a, None) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    for p in range(mlog.partitions):
        await fresh.runtime.until_loaded(p)
    found = dict(fresh.fetch_offsets("g", None)[1])
    assert {tp: c.offset for tp, c in found.items() if c} == {("t", 0): 8, ("t", 1): 6}
    group = fresh.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert group.members[a].assignment == b"assignment"
    assert fresh.heartbeat("g", 1, a, None) == ErrorCode.NONE
    assert fresh.groups["solo"].state is GroupState.EMPTY
    clock.advance(10_001)
    fresh.tick()  # restored members still need to heartbeat
    assert fresh.groups["g"].state is GroupState.EMPTY


async def test_coordinator_load_skips_garbage_records() -> None:
    coord, mlog, clock = await make()
    await commit(coord)
    from ads.records.batch import build_batch
    p = coord.partition_of("g")
    mlog.batches[p].append(build_batch([(b"\x00", b"x"), (b"\x00\x07zz", b"y"), (None, b"z"),
                                        (rec.offset_key("g", "t", 1), b"\x00\x09")]))
    mlog.batches[p].append(b"not a batch at all" * 4)
    fresh = GroupCoordinator(mlog, mlog, clock, coord.config)
    await lead_all(fresh)
    assert dict(fresh.fetch_offsets("g", None)[1])[("t", 0)].offset == 5  # type: ignore[union-attr]


async def test_coordinator_delete_groups_and_offsets_write_tombstones() -> None:
    coord, mlog, clock = await make()
    await commit(coord, offsets=[("t", 0, 1), ("t", 1, 2)])
    a, _ = join_new(coord, group="busy")
    assert await coord.delete_groups(["busy", "ghost", ""]) == [
        ErrorCode.NON_EMPTY_GROUP, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.INVALID_GROUP_ID]
    assert await coord.delete_offsets("g", [("t", 0), ("zz", 0)]) == (
        ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
    assert [tp for tp, _ in coord.fetch_offsets("g", None)[1]] == [("t", 1)]
    assert await coord.delete_groups(["g"]) == [ErrorCode.NONE]
    assert "g" not in coord.groups and coord.fetch_offsets("g", None)[1] == []
    fresh = GroupCoordinator(mlog, mlog, clock, coord.config)
    await lead_all(fresh)
    assert fresh.fetch_offsets("g", None)[1] == [] and "g" not in fresh.groups
    assert (await coord.delete_offsets("ghost", [("t", 0)]))[0] == ErrorCode.GROUP_ID_NOT_FOUND


async def test_coordinator_offsets_expire_after_retention_of_empty_group() -> None:
    coord, _, clock = await make(offsets_retention_ms=60_000,
                                 offsets_retention_check_interval_ms=1000)
    await commit(coord, group="simple")
    a, _ = join_new(coord, group="live", session_ms=6000)
    sync(coord, a, 1, {a: b""}, group="live")
    await commit(coord, group="live", generation=1, member=a)
    for _ in range(60):
        clock.advance(1000)
        coord.heartbeat("live", 1, a, None)
        coord.tick()
    assert "simple" not in coord.groups  # standalone offsets expire from their commit
    assert coord.fetch_offsets("live", None)[1]  # a live group keeps its offsets
    coord.leave_group("live", [(a, None)])
    clock.advance(59_000)
    coord.tick()
    assert coord.fetch_offsets("live", None)[1]
    clock.advance(1001)
    coord.tick()
    assert coord.fetch_offsets("live", None)[1] == [] and "live" not in coord.groups


async def test_coordinator_commit_checks_member_then_generation_then_state() -> None:
    coord, _, _ = await make()
    a, _ = join_new(coord, client_id="a")
    sync(coord, a, 1, {a: b""})
    b, b_join = join_new(coord, client_id="b")
    # PreparingRebalance: a member of the current generation commits what it keeps.
    assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert await commit(coord, generation=1, member=a) == [ErrorCode.NONE]
    assert await commit(coord, generation=0, member=a) == [ErrorCode.ILLEGAL_GENERATION]
    join(coord, member_id=a, client_id="a")
    assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    # CompletingRebalance: who the member is and its generation come before the state.
    assert await commit(coord, generation=1, member=a) == [ErrorCode.ILLEGAL_GENERATION]
    assert await commit(coord, generation=2, member="ghost") == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert await commit(coord) == [ErrorCode.UNKNOWN_MEMBER_ID]  # generation -1, not Empty
    assert await commit(coord, generation=2, member=b) == [ErrorCode.REBALANCE_IN_PROGRESS]


async def test_coordinator_commit_static_member_fenced_and_unknown_instance() -> None:
    coord, _, _ = await make()
    first = join(coord, instance="i-a").last
    sync(coord, first.member_id, 1, {first.member_id: b""})
    again = join(coord, instance="i-a").last  # the instance restarts with a new member id

    async def commit_as(member: str, instance: str | None) -> list[ErrorCode]:
        return await coord.commit_offsets("g", 1, member, instance, -1,
                                          [OffsetCommit("t", 0, 1, -1, "")])

    assert await commit_as(first.member_id, "i-a") == [ErrorCode.FENCED_INSTANCE_ID]
    assert await commit_as(again.member_id, "i-b") == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert await commit_as(again.member_id, "i-a") == [ErrorCode.NONE]
    assert coord.heartbeat("g", 1, again.member_id, "i-b") == ErrorCode.UNKNOWN_MEMBER_ID


async def test_coordinator_commit_to_unknown_group_by_version() -> None:
    coord, _, _ = await make()
    one = [OffsetCommit("t", 0, 1, -1, "")]
    assert await coord.commit_offsets("nope", 1, "m", None, -1, one, 8) == [
        ErrorCode.ILLEGAL_GENERATION]
    assert await coord.commit_offsets("nope", 1, "m", None, -1, one, 9) == [
        ErrorCode.GROUP_ID_NOT_FOUND]
    assert await coord.commit_offsets("nope", -1, "", None, -1, one, 9) == [ErrorCode.NONE]
