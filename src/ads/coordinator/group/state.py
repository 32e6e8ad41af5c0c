"""The state machine of a classic group, with every rule in this header.

Theory of operation
-------------------
A classic group moves through five states::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                  ▲   │                                                   │
      │                  │   └──no member left after the join phase──▶ Empty     │
      │                  └──join, leave, expiry, leader rejoin────────────┐      │ leader's
      │                                                                   │      ▼ SyncGroup
      └──────── last member leaves or expires (after a rebalance) ─────── Stable ◀─┘
    any state ──DeleteGroups / offsets expired of an empty group──▶ Dead

- Empty: no members; the group may still hold committed offsets. Commits from outside any
  generation (generation -1, e.g. `ads groups reset-offsets` or a consumer that assigns
  partitions itself) are accepted only here.
- PreparingRebalance: the join phase. JoinGroup requests are parked until every known
  member has rejoined (or the rebalance timeout, the largest of the members', expires;
  members that did not rejoin are then removed). A group that was Empty waits
  `group.initial.rebalance.delay.ms` first, extended by each new member up to the
  rebalance timeout, so that consumers started together land in one generation.
- CompletingRebalance: the generation id was incremented, a protocol chosen and the join
  responses sent; the leader (the only one given the members' metadata) computes the
  assignment and sends it with its SyncGroup. Other members' SyncGroups are parked until
  then. A member that sends no SyncGroup within the rebalance timeout is removed.
- Stable: assignments delivered; members heartbeat within their session timeout. The group
  metadata (generation, protocol, leader, members and assignments) is written to
  `__consumer_offsets` when it becomes Stable, so a restarted coordinator resumes it.
- Dead: the group is being removed; requests get COORDINATOR_NOT_AVAILABLE (the client
  looks for the coordinator again) or, for DescribeGroups, an empty "Dead" description.

Member identity (KIP-394, KIP-345): a dynamic member joining with an empty member id is
given one and told MEMBER_ID_REQUIRED; it stays "pending" until it joins again with that
id (or its session timeout passes). A static member (`group.instance.id`) is never pending:
rejoining with a new member id replaces the old one (FENCED_INSTANCE_ID for whoever still
uses the old id) and, in Stable, gets its previous assignment back without a rebalance
unless its protocols changed.

Session timeout: a member that neither heartbeats nor takes part in a rebalance within
its session timeout is removed; a member parked in JoinGroup or SyncGroup is alive.

Validation order
----------------
Each request is checked in Kafka's order (its ClassicGroup and GroupMetadataManager); the
first check that fails answers. "member" is `member_error` below: a group instance id that
no static member holds -> UNKNOWN_MEMBER_ID; held by another member id (an older
incarnation of the instance) -> FENCED_INSTANCE_ID; a member id the group does not know ->
UNKNOWN_MEMBER_ID. "generation" is a generation id other than the group's ->
ILLEGAL_GENERATION. The state's answer (the tables) comes last, so a member of an older
generation learns that first, whatever the group is doing::

    API            checks, in order                                          then
    Heartbeat      no such group -> UNKNOWN_MEMBER_ID; Dead ->               HEARTBEAT
                   COORDINATOR_NOT_AVAILABLE; member; generation
    SyncGroup      no such group, or no members -> UNKNOWN_MEMBER_ID;        SYNC
                   Dead -> COORDINATOR_NOT_AVAILABLE; member; generation;
                   protocol type/name not the group's ->
                   INCONSISTENT_GROUP_PROTOCOL
    LeaveGroup     no such group -> UNKNOWN_MEMBER_ID; Dead ->               removed
                   COORDINATOR_NOT_AVAILABLE (whole request); then per
                   member: member id "" -> the instance's static member, or
                   UNKNOWN_MEMBER_ID; a pending member leaves; else member
    OffsetCommit   no such group: generation < 0 -> a simple group is        MEMBER_COMMIT
                   created, else GROUP_ID_NOT_FOUND (v9+) or
                   ILLEGAL_GENERATION; Dead -> COORDINATOR_NOT_AVAILABLE;
                   generation < 0 and Empty -> accepted (tools, consumers
                   that assign partitions themselves); a member id,
                   instance id or generation >= 0 given -> member,
                   generation; none given and not Empty -> UNKNOWN_MEMBER_ID
    TxnOffsetCommit  (when transactions exist) as OffsetCommit, without the
                   state's answer: Kafka does not refuse it during a rebalance

So a commit from a member of the current generation is accepted while the group prepares a
rebalance (cooperative consumers commit what they keep), refused with
REBALANCE_IN_PROGRESS while it completes one (the member already holds the new generation
from its join response and will commit again once synced), and a commit from an older
generation gets ILLEGAL_GENERATION (or FENCED_INSTANCE_ID) in every state.
"""

from __future__ import annotations

import enum

from ads.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


E, PR, CR, ST, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                    GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)

# The states a group may enter each state from.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    PR: frozenset({ST, CR, E}),
    CR: frozenset({PR}),
    ST: frozenset({CR}),
    E: frozenset({PR}),
    D: frozenset({ST, PR, CR, E, D}),
}

# Heartbeat from a known member of the current generation.
HEARTBEAT: dict[GroupState, ErrorCode] = {
    E: ErrorCode.UNKNOWN_MEMBER_ID,
    PR: ErrorCode.REBALANCE_IN_PROGRESS,
    # Members may heartbeat between their join response and their SyncGroup.
    CR: ErrorCode.NONE,
    ST: ErrorCode.NONE,
    D: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}

# SyncGroup from a known member of the current generation; None: handled by the state.
SYNC: dict[GroupState, ErrorCode | None] = {
    E: ErrorCode.UNKNOWN_MEMBER_ID,
    PR: ErrorCode.REBALANCE_IN_PROGRESS,
    CR: None,  # parked until the leader's assignment arrives
    ST: None,  # answered with the member's current assignment
    D: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}

# OffsetCommit that passed the checks above; None: commit.
MEMBER_COMMIT: dict[GroupState, ErrorCode | None] = {
    E: None,  # generation -1 from outside the group (members fail the member check first)
    PR: None,  # members of the current generation keep committing while others rejoin
    CR: ErrorCode.REBALANCE_IN_PROGRESS,
    ST: None,
    D: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


def member_error(instance_id: str | None, instance_owner: str | None, member_id: str,
                 is_member: bool) -> ErrorCode:
    """The member check: `instance_owner` is the member id holding `instance_id` (None when
    no static member holds it), `is_member` whether the group knows `member_id`."""
    if instance_id is not None:
        if instance_owner is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_owner != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    return ErrorCode.NONE if is_member else ErrorCode.UNKNOWN_MEMBER_ID


def commit_error(state: GroupState, generation_id: int, group_generation: int,
                 member_id: str, instance_id: str | None, member_check: ErrorCode
                 ) -> ErrorCode | None:
    """OffsetCommit to an existing group, in the order above; None: commit.
    `member_check` is `member_error` for the request's member and instance ids."""
    if state is D:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and state is E:
        return None
    if generation_id >= 0 or member_id or instance_id is not None:
        if member_check is not ErrorCode.NONE:
            return member_check
        if generation_id != group_generation:
            return ErrorCode.ILLEGAL_GENERATION
    elif state is not E:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return MEMBER_COMMIT[state]


class IllegalStateTransitionError(Exception):
    pass


def check_transition(old: GroupState, new: GroupState) -> None:
    if old not in VALID_PREVIOUS[new]:
        raise IllegalStateTransitionError(f"a group cannot go from {old.value} to {new.value}")


def initial_state(has_members: bool) -> GroupState:
    """State of a group restored from `__consumer_offsets`."""
    return ST if has_members else E
