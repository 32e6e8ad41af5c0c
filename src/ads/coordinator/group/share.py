"""KIP-932 share groups: ShareGroupHeartbeat membership and server-side assignment.

Theory of operation
-------------------
A share group's members read the same partitions together; which record goes to whom is
decided by the partition leaders (share-partitions, `ads.replication.share_partition`),
not here. The coordinator only keeps the membership and tells each member which
partitions to fetch from. As in KIP-848, the *group epoch* grows whenever membership, a
subscription or a subscribed topic's partition count changes; the assignment is then
computed again and the *assignment epoch* catches up. Since partitions are shared, no
member waits for another to give one up: a member takes the new assignment, and the
assignment epoch as its member epoch, on its next heartbeat.

Assignment ("simple", `assignors.SimpleAssignor`): the subscribed partitions spread evenly
over the members, a partition shared by several members only when there are more members
than partitions.

Answers to ShareGroupHeartbeat by `member_epoch`::

    0    join (the member id is the client's, v1); GROUP_MAX_SIZE_REACHED past
         `group.share.max.size`.
    -1   leave.
    n>0  unknown member: UNKNOWN_MEMBER_ID; an epoch that is neither the member's nor its
         previous one: FENCED_MEMBER_EPOCH.

Group states: Empty (no members), Stable (members). A member that misses its session
timeout (`group.share.session.timeout.ms`) is removed. Share groups are kept in memory
only: a coordinator restart forgets them and members rejoin with epoch 0. Not
thread-safe: used from the broker's event loop only.
"""

from __future__ import annotations

import enum
import logging
import uuid
from dataclasses import dataclass, field

from ads.coordinator.group.api import (
    AssignedPartitions,
    ConsumerGroupDescription,
    ConsumerMemberDescription,
    GroupConfig,
    HeartbeatRequest,
    HeartbeatResult,
    Owned,
)
from ads.coordinator.group.assignors import SimpleAssignor
from ads.coordinator.runtime import Write
from ads.coordinator.timer import TimerHandle, Timers
from ads.coordinator.topic import TopicMetadata
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")
SIMPLE_ASSIGNOR = SimpleAssignor()

JOIN_EPOCH, LEAVE_EPOCH = 0, -1


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    member_epoch: int = 0
    previous_epoch: int = -1
    assigned: Owned = field(default_factory=dict)
    last_sent: Owned | None = None
    session_timer: TimerHandle | None = None


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    current_state_timestamp: int = -1
    # The topics its members subscribed to and those whose offsets were altered, until
    # their offsets are deleted: what DescribeShareGroupOffsets without topics describes
    # (Kafka records the group's initialized partitions; kept in memory here, as the
    # group is).
    topics: set[str] = field(default_factory=set)

    group_type = "share"
    protocol_type = "share"

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str] | None:
        topics: set[str] = set()
        for member in self.members.values():
            topics.update(member.subscribed_topic_names)
        return topics


def invalid_share_heartbeat(req: HeartbeatRequest) -> str | None:
    """Why a heartbeat is malformed (INVALID_REQUEST), None if it is not."""
    if not req.group_id:
        return "GroupId can't be empty."
    if not req.member_id:
        return "MemberId can't be empty."
    if req.member_epoch < LEAVE_EPOCH:
        return f"MemberEpoch {req.member_epoch} is invalid."
    if req.member_epoch == JOIN_EPOCH and not req.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    return None


class ShareGroupManager:
    def __init__(self, timers: Timers[Write], config: GroupConfig, topics: TopicMetadata
                 ) -> None:
        self.timers = timers
        self.config = config
        self.topics = topics

    def heartbeat(self, group: ShareGroup, req: HeartbeatRequest) -> HeartbeatResult:
        """A join (epoch 0) or a heartbeat of a member (epoch > 0)."""
        member = group.members.get(req.member_id)
        bump = False
        if req.member_epoch == JOIN_EPOCH:
            if member is None:
                if len(group.members) >= self.config.share_max_size:
                    return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
                member = ShareMember(req.member_id)
                group.members[req.member_id] = member
                bump = True
            member.last_sent = None  # a (re)joining member gets its whole assignment
        elif member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {req.member_id} is not a member of the group.")
        elif req.member_epoch not in (member.member_epoch, member.previous_epoch):
            return HeartbeatResult(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The member epoch {req.member_epoch} is not {member.member_epoch}.")
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.subscribed_topic_names is not None and sorted(req.subscribed_topic_names) != (
                sorted(member.subscribed_topic_names)):
            member.subscribed_topic_names = list(req.subscribed_topic_names)
            bump = True
        bump |= self._refresh_metadata(group)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
        if member.member_epoch != group.assignment_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        self._touch(group, member)
        assignment = None
        if member.last_sent != member.assigned:
            assignment = {t: set(p) for t, p in member.assigned.items()}
            member.last_sent = assignment
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, member.member_epoch,
                               self.config.timeouts(group.group_id).share_heartbeat_interval_ms,
                               assignment)

    def _refresh_metadata(self, group: ShareGroup) -> bool:
        """Partition counts of the subscribed topics; True when they changed."""
        metadata: dict[str, int] = {}
        for topic in group.subscribed_topics() or ():
            count = self.topics.topic_partitions(topic)
            if count is not None:
                metadata[topic] = count
        group.topics.update(metadata)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _assign(self, group: ShareGroup) -> None:
        """The simple assignment (`assignors.SimpleAssignor`), sticking to the last one."""
        ids: dict[str, uuid.UUID] = {}
        for topic in group.subscription_metadata:
            topic_id = self.topics.topic_id(topic)
            if topic_id is not None:
                ids[topic] = topic_id
        partitions = {ids[t]: n for t, n in group.subscription_metadata.items() if t in ids}
        subscriptions = {mid: {ids[t] for t in member.subscribed_topic_names if t in ids}
                         for mid, member in group.members.items()}
        target = SIMPLE_ASSIGNOR.assign(subscriptions, partitions, {
            mid: member.assigned for mid, member in group.members.items()})
        for mid, member in group.members.items():
            member.assigned = target[mid]
        group.assignment_epoch = group.group_epoch
        log.info("share group %s: epoch %d assignment for %d members", group.group_id,
                 group.group_epoch, len(group.members))

    # -- leaving and timeouts --------------------------------------------------------
    def leave(self, group: ShareGroup | None, req: HeartbeatRequest) -> HeartbeatResult:
        member = None if group is None else group.members.get(req.member_id)
        if group is None or member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id,
                                   member_epoch=req.member_epoch)
        self._remove(group, member, "left the group")
        return HeartbeatResult(ErrorCode.NONE, None, req.member_id, LEAVE_EPOCH,
                               self.config.timeouts(req.group_id).share_heartbeat_interval_ms)

    def _touch(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member_id = member.member_id
        member.session_timer = self.timers.schedule(
            self.config.timeouts(group.group_id).share_session_timeout_ms,
            lambda: self._session_expired(group, member, member_id))

    def _session_expired(self, group: ShareGroup, member: ShareMember, member_id: str
                         ) -> None:
        if group.members.get(member_id) is member:
            self._remove(group, member, "session timed out")

    def _remove(self, group: ShareGroup, member: ShareMember, reason: str) -> None:
        log.info("share group %s: removing member %s: %s", group.group_id, member.member_id,
                 reason)
        if member.session_timer is not None:
            member.session_timer.cancel()
        del group.members[member.member_id]
        group.group_epoch += 1
        self._refresh_metadata(group)
        if not group.members:
            group.current_state_timestamp = self.timers.clock.time_ms()

    def remove_all(self, group: ShareGroup) -> None:
        """Drops every timer of a group (its partition is unloaded)."""
        for member in group.members.values():
            if member.session_timer is not None:
                member.session_timer.cancel()

    # -- describe --------------------------------------------------------------------
    def describe(self, group: ShareGroup) -> ConsumerGroupDescription:
        members = tuple(ConsumerMemberDescription(
            mem.member_id, None, mem.rack_id, mem.member_epoch, mem.client_id,
            mem.client_host, tuple(mem.subscribed_topic_names), None,
            self._named(mem.assigned), self._named(mem.assigned))
            for mem in group.members.values())
        return ConsumerGroupDescription(
            group.group_id, ErrorCode.NONE, None, group.state.value, group.group_epoch,
            group.assignment_epoch, "simple", members)

    def _named(self, owned: Owned) -> tuple[AssignedPartitions, ...]:
        return tuple(AssignedPartitions(t, self.topics.topic_name(t) or "", tuple(sorted(p)))
                     for t, p in sorted(owned.items(), key=lambda kv: str(kv[0])) if p)
