"""The classic group state machine, driven by hand with a manual clock (no broker, no sleep)."""

from __future__ import annotations

import pytest

from ads.coordinator.group.state import (
    GroupState,
    IllegalStateTransitionError,
    check_transition,
)
from ads.protocol.errors import ErrorCode
from coordinator_fakes import join, join_new, make, sync


def test_coordinator_state_transitions_follow_the_table() -> None:
    check_transition(GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
    check_transition(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
    with pytest.raises(IllegalStateTransitionError):
        check_transition(GroupState.EMPTY, GroupState.STABLE)
    with pytest.raises(IllegalStateTransitionError):
        check_transition(GroupState.DEAD, GroupState.PREPARING_REBALANCE)


async def test_coordinator_single_member_join_sync_heartbeat() -> None:
    coord, mlog, _ = await make()
    member, joined = join_new(coord)
    r = joined.last
    assert (r.error, r.generation_id, r.leader, r.member_id) == (ErrorCode.NONE, 1, member, member)
    assert r.protocol_name == "range" and len(r.members) == 1
    assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert coord.heartbeat("g", 1, member, None) == ErrorCode.NONE
    s = sync(coord, member, 1, {member: b"assign"})
    assert s.last.error == ErrorCode.NONE and s.last.assignment == b"assign"
    assert coord.groups["g"].state is GroupState.STABLE
    assert mlog.appended() == 1  # the group metadata record
    assert coord.heartbeat("g", 0, member, None) == ErrorCode.ILLEGAL_GENERATION
    assert coord.heartbeat("g", 1, "nobody", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("other", 1, member, None) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_coordinator_second_member_triggers_rebalance_and_waits_for_all() -> None:
    coord, _, _ = await make()
    a, _ = join_new(coord, client_id="a")
    sync(coord, a, 1, {a: b"x"})
    b_id, b_join = join_new(coord, client_id="b")
    assert b_join.got == []  # parked until a rejoins
    assert coord.heartbeat("g", 1, a, None) == ErrorCode.REBALANCE_IN_PROGRESS
    a_join = join(coord, member_id=a, client_id="a")
    assert a_join.last.generation_id == b_join.last.generation_id == 2
    leader = a_join.last.leader
    assert leader == a and len(a_join.last.members) == 2 and b_join.last.members == ()
    follower = sync(coord, b_id, 2)
    assert follower.got == []  # waits for the leader
    sync(coord, a, 2, {a: b"A", b_id: b"B"})
    assert follower.last.assignment == b"B"
    assert coord.groups["g"].state is GroupState.STABLE


async def test_coordinator_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    coord, _, clock = await make()
    a, _ = join_new(coord, client_id="a", rebalance_ms=20_000)
    sync(coord, a, 1, {a: b"x"})
    b_id, b_join = join_new(coord, client_id="b", rebalance_ms=20_000)
    coord.heartbeat("g", 1, a, None)
    clock.advance(20_001)
    coord.tick()
    assert b_join.last.generation_id == 2 and b_join.last.leader == b_id
    assert list(coord.groups["g"].members) == [b_id]


async def test_coordinator_session_timeout_removes_a_silent_member() -> None:
    coord, _, clock = await make()
    a, _ = join_new(coord, client_id="a", session_ms=6000)
    sync(coord, a, 1, {a: b"x"})
    clock.advance(5000)
    coord.tick()
    assert coord.heartbeat("g", 1, a, None) == ErrorCode.NONE
    clock.advance(5000)
    coord.tick()
    assert coord.groups["g"].members  # the heartbeat restarted the session
    clock.advance(1001)
    coord.tick()
    assert not coord.groups["g"].members
    assert coord.groups["g"].state is GroupState.EMPTY
    assert coord.groups["g"].generation_id == 2


async def test_coordinator_initial_rebalance_delay_gathers_members() -> None:
    coord, _, clock = await make(delay_ms=3000)
    _, a_join = join_new(coord, client_id="a")
    clock.advance(2000)
    coord.tick()
    _, b_join = join_new(coord, client_id="b")
    assert a_join.got == [] and b_join.got == []
    clock.advance(1000)
    coord.tick()  # first delay over, but a member joined during it: wait once more
    assert a_join.got == []
    clock.advance(3000)
    coord.tick()
    assert a_join.last.generation_id == b_join.last.generation_id == 1


async def test_coordinator_member_id_required_and_pending_expiry() -> None:
    coord, _, clock = await make()
    first = join(coord, session_ms=6000)
    assert first.last.error == ErrorCode.MEMBER_ID_REQUIRED and first.last.member_id
    clock.advance(6001)
    coord.tick()
    assert first.last.member_id not in coord.groups["g"].pending_members
    old_client = join(coord, v4=False)  # JoinGroup v3 and older: no MEMBER_ID_REQUIRED
    assert old_client.last.error == ErrorCode.NONE


async def test_coordinator_static_member_rejoins_without_rebalance() -> None:
    coord, mlog, _ = await make()
    a = join(coord, instance="i-a", client_id="a").last
    assert a.error == ErrorCode.NONE  # static members skip MEMBER_ID_REQUIRED
    sync(coord, a.member_id, 1, {a.member_id: b"A"})
    b = join(coord, instance="i-b", client_id="b")
    join(coord, member_id=a.member_id, instance="i-a", client_id="a")
    b_id = b.last.member_id
    sync(coord, b_id, 2)
    sync(coord, a.member_id, 2, {a.member_id: b"A2", b_id: b"B2"})
    group = coord.groups["g"]
    assert group.state is GroupState.STABLE
    # b restarts: new member id, same instance id, same protocols: no rebalance
    again = join(coord, instance="i-b", client_id="b").last
    assert again.error == ErrorCode.NONE and again.generation_id == 2
    assert again.member_id != b_id and again.leader == a.member_id
    assert group.state is GroupState.STABLE
    assert sync(coord, again.member_id, 2, instance="i-b").last.assignment == b"B2"
    # whoever still uses the old member id is fenced
    assert coord.heartbeat("g", 2, b_id, "i-b") == ErrorCode.FENCED_INSTANCE_ID
    assert mlog.appended() == 3


async def test_coordinator_leave_group_batch_and_unknown_members() -> None:
    coord, _, _ = await make()
    a = join(coord, instance="i-a").last
    sync(coord, a.member_id, 1, {a.member_id: b""})
    error, results = coord.leave_group("g", [("", "i-a"), ("ghost", None)])
    assert error == ErrorCode.NONE
    assert results == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert coord.groups["g"].state is GroupState.EMPTY
    assert coord.leave_group("nope", [("x", None)])[0] == ErrorCode.UNKNOWN_MEMBER_ID


async def test_coordinator_join_bad_input_changes_nothing() -> None:
    coord, mlog, _ = await make()
    assert join(coord, group="").last.error == ErrorCode.INVALID_GROUP_ID
    assert join(coord, session_ms=10).last.error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(coord, protocols=[]).last.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(coord, member_id="made-up").last.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert coord.groups == {} and mlog.appended() == 0
    a, _ = join_new(coord)
    other = join(coord, protocols=[("roundrobin", b"")]).last
    assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert list(coord.groups["g"].members) == [a]


async def test_coordinator_group_max_size() -> None:
    coord, _, _ = await make(max_size=1)
    join_new(coord, client_id="a")
    assert join(coord, client_id="b").last.error == ErrorCode.GROUP_MAX_SIZE_REACHED


async def test_coordinator_store_failure_fails_the_sync() -> None:
    coord, mlog, _ = await make()
    a, _ = join_new(coord)
    mlog.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert sync(coord, a, 1, {a: b"x"}).last.error == ErrorCode.NOT_COORDINATOR
    assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
