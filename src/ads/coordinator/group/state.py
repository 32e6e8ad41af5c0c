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

The tables below are the answers each state gives; `rebalance.py` consults them after the
checks common to all states (unknown group or member: UNKNOWN_MEMBER_ID; wrong
instance id: FENCED_INSTANCE_ID; wrong generation: ILLEGAL_GENERATION).
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

# OffsetCommit from a member of the group (generation >= 0); None: checks pass, commit.
MEMBER_COMMIT: dict[GroupState, ErrorCode | None] = {
    E: ErrorCode.UNKNOWN_MEMBER_ID,
    # Members of the previous generation may commit while the group rebalances (KIP-429).
    PR: None,
    CR: ErrorCode.REBALANCE_IN_PROGRESS,
    ST: None,
    D: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


class IllegalStateTransitionError(Exception):
    pass


def check_transition(old: GroupState, new: GroupState) -> None:
    if old not in VALID_PREVIOUS[new]:
        raise IllegalStateTransitionError(f"a group cannot go from {old.value} to {new.value}")


def initial_state(has_members: bool) -> GroupState:
    """State of a group restored from `__consumer_offsets`."""
    return ST if has_members else E
