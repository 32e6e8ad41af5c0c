"""KIP-848 consumer groups and the server-side assignors, with a manual clock."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from ads.coordinator.group.api import HeartbeatRequest, HeartbeatResult
from ads.coordinator.group.assignors import RangeAssignor, UniformAssignor
from ads.protocol.errors import ErrorCode
from coordinator_fakes import make

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def test_coordinator_range_assignor_gives_contiguous_ranges() -> None:
    out = RangeAssignor().assign({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 7}, {})
    assert out == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4}}, "c": {T1: {5, 6}}}


def test_coordinator_uniform_assignor_is_sticky() -> None:
    uniform = UniformAssignor()
    first = uniform.assign({"a": {T1}, "b": {T1}}, {T1: 6}, {})
    second = uniform.assign({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 6}, first)
    assert sorted(len(second[m][T1]) for m in second) == [2, 2, 2]
    for m in ("a", "b"):
        assert second[m][T1] <= first[m][T1]  # nobody gains while someone must give up


@given(st.dictionaries(st.sampled_from("abcdef"), st.sets(st.sampled_from([T1, T2]), min_size=1),
                       min_size=1),
       st.integers(1, 12), st.integers(1, 12))
def test_coordinator_assignors_assign_each_partition_once(
        subs: dict[str, set[uuid.UUID]], n1: int, n2: int) -> None:
    partitions = {T1: n1, T2: n2}
    for assignor in (UniformAssignor(), RangeAssignor()):
        out = assignor.assign(subs, partitions, {})
        seen = [(t, p) for m in out for t, ps in out[m].items() for p in ps]
        wanted = {(t, p) for t in set().union(*subs.values()) for p in range(partitions[t])}
        assert sorted(seen, key=str) == sorted(wanted, key=str)
        for m, owned in out.items():
            assert set(owned) <= subs[m]
    uniform = UniformAssignor().assign(subs, partitions, {})
    if all(s == {T1} for s in subs.values()):
        loads = [len(uniform[m].get(T1, ())) for m in subs]
        assert max(loads) - min(loads) <= 1


async def hb(coord, member: str, epoch: int, owned: dict[uuid.UUID, set[int]] | None = None,
       topics: list[str] | None = None, **kw: object) -> HeartbeatResult:
    req = HeartbeatRequest(
        group_id=str(kw.pop("group", "g")), member_id=member, member_epoch=epoch,
        instance_id=kw.pop("instance", None), rack_id=kw.pop("rack", None),  # type: ignore[arg-type]
        rebalance_timeout_ms=int(kw.pop("rebalance", 30_000)) if epoch == 0 else -1,
        subscribed_topic_names=topics if topics is not None else (["t"] if epoch == 0 else None),
        subscribed_topic_regex=kw.pop("regex", None),  # type: ignore[arg-type]
        server_assignor=kw.pop("assignor", None),  # type: ignore[arg-type]
        topic_partitions=owned if owned is not None else ({} if epoch == 0 else None))
    return await coord.consumer_heartbeat(req, 1)


async def test_coordinator_consumer_group_hands_partitions_over_after_revocation() -> None:
    coord, mlog, _ = await make()
    t = mlog.ids["t"]
    a = await hb(coord, "a", 0)
    assert a.error == ErrorCode.NONE and a.member_epoch == 1
    assert a.assignment == {t: set(range(6))}
    b = await hb(coord, "b", 0)
    assert b.member_epoch == 2 and b.assignment == {}  # nothing is free yet
    a2 = await hb(coord, "a", 1, {t: set(range(6))})
    assert a2.member_epoch == 1 and len(a2.assignment[t]) == 3  # revoke first
    kept = a2.assignment[t]
    assert coord.groups["g"].state_name == "Reconciling"
    a3 = await hb(coord, "a", 1, {t: kept})
    assert a3.member_epoch == 2 and a3.assignment is None
    b2 = await hb(coord, "b", 2, {})
    assert b2.assignment == {t: set(range(6)) - kept}
    assert coord.groups["g"].state_name == "Stable"


async def test_coordinator_consumer_group_fencing_leave_and_expiry() -> None:
    coord, mlog, clock = await make(consumer_session_timeout_ms=10_000)
    t = mlog.ids["t"]
    await hb(coord, "a", 0)
    assert (await hb(coord, "a", 5, {t: set()})).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert (await hb(coord, "zz", 1)).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert await coord.commit_offsets("g", 1, "a", None, -1, []) == []
    await hb(coord, "b", 0)
    assert (await hb(coord, "b", -1)).error == ErrorCode.NONE
    assert set(coord.groups["g"].members) == {"a"}
    clock.advance(10_001)
    coord.tick()
    assert coord.groups["g"].members == {} and coord.groups["g"].state_name == "Empty"


async def test_coordinator_consumer_group_bad_requests() -> None:
    coord, _, _ = await make()
    assert (await hb(coord, "a", 0, group="")).error == ErrorCode.INVALID_REQUEST
    assert (await hb(coord, "", 0)).error == ErrorCode.INVALID_REQUEST
    assert (await hb(coord, "a", -3)).error == ErrorCode.INVALID_REQUEST
    assert (await hb(coord, "a", 0, {uuid.uuid4(): {1}})).error == ErrorCode.INVALID_REQUEST
    assert (await hb(coord, "a", 0, assignor="magic")).error == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert (await hb(coord, "a", 0, regex="(")).error == ErrorCode.INVALID_REQUEST
    assert coord.groups == {}


async def test_coordinator_consumer_group_regex_and_static_rejoin() -> None:
    coord, mlog, _ = await make()
    r = await hb(coord, "a", 0, topics=[], regex="t|u", instance="i1", assignor="range")
    assert r.assignment == {mlog.ids["t"]: set(range(6)), mlog.ids["u"]: {0, 1}}
    assert (await hb(coord, "a", r.member_epoch, None, instance="i1")).error == ErrorCode.NONE
    assert (await hb(coord, "a2", 0, instance="i1")).error == ErrorCode.UNRELEASED_INSTANCE_ID
    await hb(coord, "a", -2, instance="i1")
    again = await hb(coord, "a2", 0, topics=[], regex="t|u", instance="i1")
    assert again.error == ErrorCode.NONE and again.member_epoch == r.member_epoch
    assert again.assignment == r.assignment


async def test_coordinator_group_protocols_do_not_mix() -> None:
    from coordinator_fakes import join, join_new

    coord, _, _ = await make()
    await hb(coord, "a", 0)
    assert join(coord).last.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    await hb(coord, "a", -1)
    member, joined = join_new(coord)  # an empty consumer group turns classic
    assert joined.last.error == ErrorCode.NONE
    assert (await hb(coord, "b", 0)).error == ErrorCode.GROUP_ID_NOT_FOUND


def _persisted(coord) -> dict[str, object]:
    """Every persisted field of every consumer group (what its records hold)."""
    out: dict[str, object] = {}
    for gid, g in coord.groups.items():
        out[gid] = (g.group_epoch, g.assignment_epoch, g.target, g.resolved_regexes, {
            mid: (mem.metadata(), mem.current()) for mid, mem in g.members.items()})
    return out


async def _reload(coord, epoch: int = 1) -> None:
    """Leadership of every partition moves away and back: each is loaded from the log."""
    from coordinator_fakes import lead_all

    for p in range(coord.topic.partition_count()):
        coord.runtime.become_follower(p, epoch)
    await lead_all(coord, epoch + 1)


async def test_coordinator_consumer_group_state_survives_a_reload() -> None:
    """A member keeps its id, epoch and assignment when the coordinator moves: it heartbeats
    with its epoch after the reload and gets its partitions back (before, the group was
    gone: UNKNOWN_MEMBER_ID, and members rejoined with epoch 0)."""
    coord, mlog, clock = await make(consumer_session_timeout_ms=10_000)
    t = mlog.ids["t"]
    await hb(coord, "a", 0, instance="ia", rack="r1")
    await hb(coord, "c", 0, topics=["u"])
    await hb(coord, "c", -1)  # leaves: its records are tombstoned
    b = await hb(coord, "b", 0, topics=[], regex="t|u")
    a = await hb(coord, "a", 1, {t: set(range(6))})  # a revokes what b gets
    kept = a.assignment[t]
    live = _persisted(coord)
    assert live["g"][4]["a"][1].state == 1  # UNREVOKED_PARTITIONS: a has not reported yet
    await _reload(coord)
    assert _persisted(coord) == live
    a2 = await hb(coord, "a", 1, {t: kept})
    assert a2.error == ErrorCode.NONE and a2.member_epoch == coord.groups["g"].group_epoch
    assert a2.assignment == {t: kept}  # the whole assignment again after the move
    b = await hb(coord, "b", b.member_epoch, {})
    assert b.error == ErrorCode.NONE and b.assignment[t] == set(range(6)) - kept
    assert coord.groups["g"].state_name == "Stable"
    stable = _persisted(coord)
    await _reload(coord, 3)
    assert _persisted(coord) == stable and coord.groups["g"].state_name == "Stable"
    # The sessions were armed again at load: members that stay silent go.
    clock.advance(10_001)
    coord.tick()
    assert coord.groups["g"].members == {}
    await _reload(coord, 5)
    assert coord.groups["g"].members == {} and coord.groups["g"].state_name == "Empty"


async def test_coordinator_consumer_group_writes_only_what_changed() -> None:
    """A heartbeat that changes nothing writes nothing; a join writes the joining member's
    records and the target records of the members whose target moved, not every member's."""
    coord, mlog, _ = await make()
    t = mlog.ids["t"]
    for member in "abc":
        await hb(coord, member, 0)
    group = coord.groups["g"]
    for _ in range(3):  # each reports what it owns until all are reconciled
        for member in group.members.values():
            await hb(coord, member.member_id, member.member_epoch, member.assigned)
    assert group.state_name == "Stable"
    records = _written(mlog)
    await hb(coord, "a", group.members["a"].member_epoch, group.members["a"].assigned)
    assert _written(mlog) == records  # nothing written
    await hb(coord, "d", 0, topics=["u"])  # its own topic: no one else's target moves
    kinds = [k.type.name for k in _written(mlog)[len(records):]]
    assert kinds == ["MEMBER_METADATA", "GROUP_METADATA", "TARGET_ASSIGNMENT_MEMBER",
                     "TARGET_ASSIGNMENT_METADATA", "CURRENT_MEMBER_ASSIGNMENT"]
    assert t in coord.groups["g"].target["a"]


def _written(mlog) -> list:
    """The keys of the consumer-group records appended to the group's partition."""
    from ads.coordinator.group import records as rec
    from ads.records.batch import decode_records

    out = []
    for batches in mlog.batches.values():
        for batch in batches:
            for r in decode_records(batch, max_uncompressed_bytes=1 << 20):
                key = rec.parse_key(r.key)
                if isinstance(key, rec.ConsumerKey):
                    out.append(key)
    return out


async def test_coordinator_consumer_group_deleted_and_converted_stay_so_after_a_reload() -> None:
    """DeleteGroups and a conversion to a classic group write the group's tombstones, so a
    reload does not bring the consumer group back."""
    from coordinator_fakes import join_new

    coord, _, _ = await make()
    await hb(coord, "a", 0)
    await hb(coord, "a", -1)
    assert await coord.delete_groups(["g"]) == [ErrorCode.NONE]
    await hb(coord, "a", 0, group="h")
    await hb(coord, "a", -1, group="h")
    join_new(coord, group="h")
    await _reload(coord)
    assert "g" not in coord.groups
    assert getattr(coord.groups.get("h"), "group_type", "classic") == "classic"


async def test_coordinator_consumer_group_changes_wait_for_the_write_on_its_way() -> None:
    """With replicas a write is committed later: a second join waits for the first one's
    records instead of being computed from the state before them (both members would get
    epoch 1 and every partition)."""
    import asyncio

    coord, mlog, _ = await make()
    mlog.hold = True
    a = asyncio.ensure_future(hb(coord, "a", 0))
    b = asyncio.ensure_future(hb(coord, "b", 0))
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(mlog.held) == 1 and not a.done() and not b.done()  # b waits for a's write
    mlog.commit_held()
    for _ in range(5):
        await asyncio.sleep(0)
    assert a.done() and len(mlog.held) == 1  # b's write, computed after a's
    mlog.commit_held()
    ra, rb = await a, await b
    assert (ra.member_epoch, rb.member_epoch) == (1, 2)
    assert sorted(coord.groups["g"].target) == ["a", "b"]
    assert rb.assignment == {}  # a owns every partition until it revokes
