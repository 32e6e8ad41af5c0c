"""The state rules of a KIP-848 consumer group (`group.protocol=consumer`), all in one place.

Theory of operation
-------------------
Three epochs drive a group. The *group epoch* grows whenever membership or a member's
subscription (or the partition count of a subscribed topic) changes. When it passes the
*assignment epoch*, the group's assignor computes a new *target assignment* and the
assignment epoch catches up. Each member then reconciles, one heartbeat at a time, from its
current assignment toward its target; its *member epoch* reaches the assignment epoch once
it has given up what it must give up. A partition is never owned by two members: it is
free only when no other member has it assigned or pending revocation.

A member is in one of three states; `reconcile` is the transition function::

                                join (epoch 0)
                                      │
                                      ▼
              ┌────────(a)─────────  STABLE  ─────────(c)────────┐
              │                      ▲    ▲                      │
              ▼                      │    │                      ▼
      UNREVOKED_PARTITIONS ────(d)───┘    └───(e)──── UNRELEASED_PARTITIONS
              │   ▲                                          │   │
              │   └───────────────────(b)────────────────────┘   │
              └───────────────────────(f)───────────────────────▶┘

    (a), (b) the target no longer holds partitions the member owns: the answer lists what
             it keeps, and its epoch stays until a heartbeat reports (`topic_partitions`)
             that the others are gone. A member that does not revoke within its rebalance
             timeout is removed.
    (c)      a new assignment epoch whose target holds partitions other members still
             own: the member takes the epoch and the free partitions.
    (d), (f) revoked: it takes the epoch and the free partitions of its target, all of
             them (d) or not yet (f).
    (e)      the partitions it waited for were released: it gets them.
    STABLE stays STABLE on a new epoch whose target partitions are all free.

The group's state is derived from its members, never stored (`group_state`)::

    Empty ──a member joins──▶ Assigning ──target computed──▶ Reconciling ──every member
      ▲                          ▲                                        STABLE at the
      │                          │                                        assignment
      │                          │                                        epoch──▶ Stable
      │                          └── membership, subscriptions or partition counts ───┤
      │                              change (from any state with members)             │
      └──────────────────── the last member leaves or expires ────────────────────────┘

    Empty: no members. Assigning: group epoch above the assignment epoch (the assignor runs
    in the heartbeat that changes the group, so only a leave or an expiry, which need no
    answer, leave a group here until the next heartbeat). Reconciling: some member is not
    STABLE or not at the assignment epoch. Stable: none. Dead: no such group.

Answers to ConsumerGroupHeartbeat by `member_epoch` (after `invalid_heartbeat`):

    0    join, or rejoin: a known member starts over and gets its whole assignment;
         GROUP_MAX_SIZE_REACHED past `group.consumer.max.size`; a `group.instance.id` in
         use by a member that did not leave with -2: UNRELEASED_INSTANCE_ID.
    -1   leave; -2 a static member leaves for now: it keeps its assignment until its
         session timeout, and rejoining with the same instance id takes it back.
    n>0  unknown member: UNKNOWN_MEMBER_ID; `heartbeat_epoch_error` otherwise.

A member that misses its session timeout (`group.consumer.session.timeout.ms`) is removed.
Offsets (OffsetCommit v9+, OffsetFetch v9+): `commit_error`, `fetch_error`.

Protocol conversion: a classic group without members (offsets only) becomes a consumer
group when a member joins with epoch 0 (any other heartbeat: GROUP_ID_NOT_FOUND); a consumer
group without members becomes classic on JoinGroup (with members: INCONSISTENT_GROUP_PROTOCOL).

Persistence: the group's epochs, members, target assignment and each member's
reconciliation are records of `__consumer_offsets` (`consumer.py` writes them, `records.py`
lays them out), so members keep their ids and epochs across a coordinator restart.
Gaps: topic regexes use Python's `re` syntax.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Set
from dataclasses import dataclass

from ads.coordinator.group.api import HeartbeatRequest, Owned
from ads.protocol.errors import ErrorCode

JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2


class MemberState(enum.Enum):
    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """A member's state after one reconciliation step."""

    state: MemberState
    member_epoch: int
    assigned: Owned
    pending_revocation: Owned


def reconcile(state: MemberState, member_epoch: int, assigned: Owned,
              pending_revocation: Owned, reported: Owned | None, target: Owned,
              owned_by_others: Set[tuple[uuid.UUID, int]], assignment_epoch: int
              ) -> Reconciliation | None:
    """One heartbeat's step of a member toward its target; None: nothing changes.

    `reported` is what the heartbeat says the member owns (None: unchanged since the last
    one), `owned_by_others` every partition other members have assigned or pending
    revocation.
    """
    if state is MemberState.UNREVOKED_PARTITIONS:
        if reported is None or any(reported.get(t, set()) & parts
                                   for t, parts in pending_revocation.items()):
            return None
    elif state is MemberState.STABLE and member_epoch == assignment_epoch:
        return None
    keep: Owned = {}
    revoke: Owned = {}
    gain: Owned = {}
    unreleased = False
    for topic_id in set(target) | set(assigned):
        want = target.get(topic_id, set())
        have = assigned.get(topic_id, set())
        if have & want:
            keep[topic_id] = have & want
        if have - want:
            revoke[topic_id] = have - want
        free = {p for p in want - have if (topic_id, p) not in owned_by_others}
        if free:
            gain[topic_id] = free
        if len(free) < len(want - have):
            unreleased = True
    if revoke:
        return Reconciliation(MemberState.UNREVOKED_PARTITIONS, member_epoch, keep, revoke)
    for topic_id, parts in gain.items():
        keep.setdefault(topic_id, set()).update(parts)
    return Reconciliation(
        MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assignment_epoch, keep, {})


def group_state(members: Iterable[tuple[int, MemberState]], group_epoch: int,
                assignment_epoch: int) -> ConsumerGroupState:
    """The state of a group from its members' (member epoch, state) pairs."""
    epochs = list(members)
    if not epochs:
        return ConsumerGroupState.EMPTY
    if group_epoch > assignment_epoch:
        return ConsumerGroupState.ASSIGNING
    if any(epoch != assignment_epoch or state is not MemberState.STABLE
           for epoch, state in epochs):
        return ConsumerGroupState.RECONCILING
    return ConsumerGroupState.STABLE


def heartbeat_epoch_error(request_epoch: int, member_epoch: int, previous_epoch: int,
                          reported: Owned | None, assigned: Owned) -> ErrorCode:
    """A known member's heartbeat with epoch > 0: its own epoch, or the previous one while
    it may have missed our last answer (it reports nothing it was not given)."""
    if request_epoch == member_epoch:
        return ErrorCode.NONE
    if request_epoch == previous_epoch and reported is not None and all(
            set(parts) <= assigned.get(t, set()) for t, parts in reported.items()):
        return ErrorCode.NONE
    return ErrorCode.FENCED_MEMBER_EPOCH


def fetch_error(member_epoch: int | None, request_epoch: int) -> ErrorCode:
    """OffsetFetch by a member (`member_epoch` None: not a member of the group)."""
    if member_epoch is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if request_epoch != member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def commit_error(member_epoch: int | None, member_id: str, request_epoch: int,
                 group_empty: bool) -> ErrorCode:
    """OffsetCommit: from outside the group (no member id, epoch < 0: tools, consumers that
    assign partitions themselves) only while it has no members; from a member as a fetch."""
    if not member_id and request_epoch < 0:
        return ErrorCode.NONE if group_empty else ErrorCode.UNKNOWN_MEMBER_ID
    return fetch_error(member_epoch, request_epoch)


def invalid_heartbeat(req: HeartbeatRequest, version: int) -> str | None:
    """Why a heartbeat is malformed (INVALID_REQUEST), None if it is not."""
    if not req.group_id:
        return "GroupId can't be empty."
    if req.instance_id == "":
        return "InstanceId can't be empty."
    if req.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch {req.member_epoch} is invalid."
    if (version >= 1 or req.member_epoch != JOIN_EPOCH) and not req.member_id:
        return "MemberId can't be empty."
    if req.member_epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if req.topic_partitions is None or any(req.topic_partitions.values()):
            return "TopicPartitions must be empty when (re-)joining."
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
        return "InstanceId can't be null when leaving as a static member."
    return None
