"""KIP-932 share groups on the group coordinator: membership, the simple assignment that
spreads the subscribed partitions over the members (sharing a partition only when members
outnumber partitions), epochs, leaving, session expiry, and the group type in listings
(manual clock)."""

from __future__ import annotations

from ads.coordinator.group.api import HeartbeatRequest, HeartbeatResult
from ads.coordinator.group.coordinator import GroupCoordinator
from ads.protocol.errors import ErrorCode
from coordinator_fakes import join, join_new, make


def share_hb(coord: GroupCoordinator, member: str, epoch: int,
             topics: list[str] | None = None, group: str = "s") -> HeartbeatResult:
    return coord.share_heartbeat(HeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=topics if topics is not None else (["t"] if epoch == 0 else None),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=None))


async def test_coordinator_share_group_spreads_partitions_over_members() -> None:
    coord, mlog, _ = await make(share_heartbeat_interval_ms=700)
    t, u = mlog.ids["t"], mlog.ids["u"]
    a = share_hb(coord, "a", 0)
    assert (a.error, a.member_epoch, a.heartbeat_interval_ms) == (ErrorCode.NONE, 1, 700)
    assert a.assignment == {t: set(range(6))}
    # A second member takes half; the first keeps the half it had (sticky), no waiting.
    b = share_hb(coord, "b", 0)
    assert b.member_epoch == 2 and b.assignment == {t: {3, 4, 5}}
    a2 = share_hb(coord, "a", 1)
    assert a2.member_epoch == 2 and a2.assignment == {t: {0, 1, 2}}
    assert share_hb(coord, "a", 2).assignment is None  # unchanged: not sent again
    # Different subscriptions: each topic is spread over its own subscribers.
    a3 = share_hb(coord, "a", 2, topics=["t", "u"])
    assert a3.member_epoch == 3 and a3.assignment == {t: {0, 1, 2}, u: {0, 1}}
    d = coord.describe_share_group("s")
    assert (d.error, d.state, d.group_epoch, d.assignor_name) == (
        ErrorCode.NONE, "Stable", 3, "simple")
    assert sorted(mem.member_id for mem in d.members) == ["a", "b"]


async def test_coordinator_share_group_shares_partitions_among_more_members() -> None:
    """Five members, two partitions: each partition goes to ceil(5 / 2) = 3 members and
    every member gets one or two; a member leaving gives its partitions to the others."""
    coord, mlog, _ = await make()
    u = mlog.ids["u"]
    joined = {name: share_hb(coord, name, 0, topics=["u"], group="m") for name in "abcde"}
    assigned = {}
    for name in "abcde":
        r = share_hb(coord, name, joined[name].member_epoch, group="m")
        assert (r.error, r.member_epoch) == (ErrorCode.NONE, 5)
        # None: the same as last sent (at the join)
        assigned[name] = r.assignment if r.assignment is not None else joined[name].assignment
    assert all(set(a) == {u} for a in assigned.values())
    counts = sorted(len(a[u]) for a in assigned.values())
    assert counts == [1, 1, 1, 1, 2]
    assert [sum(p in a[u] for a in assigned.values()) for p in (0, 1)] == [3, 3]
    assert share_hb(coord, "e", -1, group="m").error == ErrorCode.NONE
    left = {name: share_hb(coord, name, 5, group="m").assignment for name in "abcd"}
    # Four members, two partitions: each partition with two of them, one partition each.
    now = {name: (a if a is not None else assigned[name]) for name, a in left.items()}
    assert sorted(len(a[u]) for a in now.values()) == [1, 1, 1, 1]
    assert [sum(p in a[u] for a in now.values()) for p in (0, 1)] == [2, 2]


async def test_coordinator_share_group_epochs_and_unknown_members() -> None:
    coord, _, _ = await make()
    share_hb(coord, "a", 0)
    share_hb(coord, "b", 0)
    assert share_hb(coord, "a", 7).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert share_hb(coord, "a", 1).error == ErrorCode.NONE  # its previous epoch still counts
    assert share_hb(coord, "zz", 3).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert share_hb(coord, "", 0).error == ErrorCode.INVALID_REQUEST
    assert share_hb(coord, "c", 0, topics=[]).error == ErrorCode.INVALID_REQUEST


async def test_coordinator_share_group_leave_and_session_expiry() -> None:
    coord, _, clock = await make(share_session_timeout_ms=1000)
    share_hb(coord, "a", 0)
    share_hb(coord, "b", 0)
    left = share_hb(coord, "a", -1)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    assert share_hb(coord, "a", 2).error == ErrorCode.UNKNOWN_MEMBER_ID
    clock.advance(1001)
    coord.tick()
    d = coord.describe_share_group("s")
    assert d.state == "Empty" and not d.members


async def test_coordinator_share_group_type_is_listed_and_exclusive() -> None:
    coord, _, _ = await make()
    share_hb(coord, "a", 0)
    error, listed = coord.list_groups(types=["share"])
    assert error == ErrorCode.NONE
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("s", "share", "Stable")]
    assert coord.list_groups(types=["consumer"])[1] == []
    # The id is taken by a share group: other protocols are refused, and the other way round.
    assert join(coord, group="s").last.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert coord.describe_consumer_group("s").error == ErrorCode.GROUP_ID_NOT_FOUND
    join_new(coord, group="classic")
    assert share_hb(coord, "x", 0, group="classic").error == ErrorCode.GROUP_ID_NOT_FOUND
    assert coord.describe_share_group("classic").error == ErrorCode.GROUP_ID_NOT_FOUND
