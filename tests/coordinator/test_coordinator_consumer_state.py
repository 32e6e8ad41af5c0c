"""The KIP-848 state rules (`consumer_state.py`): each transition of the member diagram,
the derived group states, and the epoch answers of heartbeats, commits and fetches."""

from __future__ import annotations

import uuid
from collections.abc import Set

from ads.coordinator.group.api import HeartbeatRequest, Owned
from ads.coordinator.group.consumer_state import (
    ConsumerGroupState,
    MemberState,
    commit_error,
    fetch_error,
    group_state,
    heartbeat_epoch_error,
    invalid_heartbeat,
    reconcile,
)
from ads.protocol.errors import ErrorCode

T = uuid.UUID(int=7)
STABLE, UNREVOKED, UNRELEASED = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                                 MemberState.UNRELEASED_PARTITIONS)


def step(state: MemberState, epoch: int, assigned: Set[int], target: Set[int],
         others: Set[int] = frozenset(), pending: Set[int] = frozenset(),
         reported: Set[int] | None = None, assignment_epoch: int = 2
         ) -> tuple[MemberState, int, set[int], set[int]] | None:
    """One reconciliation of a member of a one-topic group, as plain partition sets."""
    def owned(parts: Set[int]) -> Owned:
        return {T: set(parts)} if parts else {}

    r = reconcile(state, epoch, owned(assigned), owned(pending),
                  None if reported is None else owned(reported), owned(target),
                  {(T, p) for p in others}, assignment_epoch)
    if r is None:
        return None
    return (r.state, r.member_epoch, r.assigned.get(T, set()),
            r.pending_revocation.get(T, set()))


def test_consumer_state_stable_member_at_the_assignment_epoch_does_nothing() -> None:
    assert step(STABLE, 2, {0, 1}, {0}) is None


def test_consumer_state_a_target_that_drops_owned_partitions_asks_to_revoke_first() -> None:
    # (a): keeps what stays, revokes the rest, the epoch waits
    assert step(STABLE, 1, {0, 1, 2}, {0, 3}) == (UNREVOKED, 1, {0}, {1, 2})
    # (b): the same from UNRELEASED_PARTITIONS when the target changes again
    assert step(UNRELEASED, 1, {0, 1}, {0}, assignment_epoch=2) == (UNREVOKED, 1, {0}, {1})


def test_consumer_state_new_epoch_takes_free_partitions_and_waits_for_the_others() -> None:
    # STABLE -> STABLE: everything free
    assert step(STABLE, 1, {0}, {0, 1}) == (STABLE, 2, {0, 1}, set())
    # (c): partition 2 is still owned by another member
    assert step(STABLE, 1, {0}, {0, 1, 2}, others={2}) == (UNRELEASED, 2, {0, 1}, set())
    # (e): released later, it is handed over
    assert step(UNRELEASED, 2, {0, 1}, {0, 1, 2}) == (STABLE, 2, {0, 1, 2}, set())
    assert step(UNRELEASED, 2, {0, 1}, {0, 1, 2}, others={2}) == (
        UNRELEASED, 2, {0, 1}, set())


def test_consumer_state_revocation_completes_only_when_the_heartbeat_shows_it() -> None:
    pending = {1, 2}
    assert step(UNREVOKED, 1, {0}, {0, 3}, pending=pending, reported=None) is None
    assert step(UNREVOKED, 1, {0}, {0, 3}, pending=pending, reported={0, 2}) is None
    # (d): revoked, everything free
    assert step(UNREVOKED, 1, {0}, {0, 3}, pending=pending, reported={0}) == (
        STABLE, 2, {0, 3}, set())
    # (f): revoked, partition 3 still owned by another member
    assert step(UNREVOKED, 1, {0}, {0, 3}, pending=pending, reported={0},
                others={3}) == (UNRELEASED, 2, {0}, set())


def test_consumer_state_group_state_is_derived_from_the_members() -> None:
    assert group_state([], 3, 3) is ConsumerGroupState.EMPTY
    assert group_state([(3, STABLE)], 4, 3) is ConsumerGroupState.ASSIGNING
    assert group_state([(3, STABLE), (2, STABLE)], 3, 3) is ConsumerGroupState.RECONCILING
    assert group_state([(3, UNRELEASED)], 3, 3) is ConsumerGroupState.RECONCILING
    assert group_state([(3, STABLE), (3, STABLE)], 3, 3) is ConsumerGroupState.STABLE


def test_consumer_state_heartbeat_epochs() -> None:
    assigned: Owned = {T: {0, 1}}
    assert heartbeat_epoch_error(5, 5, 4, None, assigned) == ErrorCode.NONE
    # the previous epoch passes while the member reports only what it was given
    assert heartbeat_epoch_error(4, 5, 4, {T: {0}}, assigned) == ErrorCode.NONE
    assert heartbeat_epoch_error(4, 5, 4, {T: {0, 2}}, assigned) == (
        ErrorCode.FENCED_MEMBER_EPOCH)
    assert heartbeat_epoch_error(4, 5, 4, None, assigned) == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat_epoch_error(6, 5, 4, None, assigned) == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat_epoch_error(3, 5, 4, {}, assigned) == ErrorCode.FENCED_MEMBER_EPOCH


def test_consumer_state_offset_commit_and_fetch_epochs() -> None:
    assert commit_error(None, "", -1, group_empty=True) == ErrorCode.NONE
    assert commit_error(None, "", -1, group_empty=False) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit_error(None, "m", 3, group_empty=False) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit_error(3, "m", 2, group_empty=False) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit_error(3, "m", 3, group_empty=False) == ErrorCode.NONE
    assert fetch_error(None, 3) == ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch_error(3, 4) == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch_error(3, 3) == ErrorCode.NONE


def test_consumer_state_malformed_heartbeats() -> None:
    def req(**kw: object) -> HeartbeatRequest:
        fields: dict[str, object] = dict(
            group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
            subscribed_topic_regex=None, server_assignor=None, topic_partitions={})
        fields.update(kw)
        return HeartbeatRequest(**fields)  # type: ignore[arg-type]

    assert invalid_heartbeat(req(), 1) is None
    assert invalid_heartbeat(req(member_id=""), 0) is None  # v0: the broker names it
    assert invalid_heartbeat(req(member_id=""), 1) == "MemberId can't be empty."
    assert invalid_heartbeat(req(group_id=""), 1) == "GroupId can't be empty."
    assert invalid_heartbeat(req(member_epoch=-3), 1) == "MemberEpoch -3 is invalid."
    assert invalid_heartbeat(req(rebalance_timeout_ms=-1), 1) is not None
    assert invalid_heartbeat(req(topic_partitions={T: {1}}), 1) is not None
    assert invalid_heartbeat(req(subscribed_topic_names=None), 1) is not None
    assert invalid_heartbeat(req(member_epoch=-2), 1) is not None  # static leave, no instance
    assert invalid_heartbeat(req(member_epoch=-2, instance_id="i"), 1) is None
