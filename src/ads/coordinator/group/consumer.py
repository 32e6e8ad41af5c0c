"""KIP-848 consumer groups: ConsumerGroupHeartbeat with server-side assignment.

Theory of operation
-------------------
Three epochs drive a group. The *group epoch* grows whenever membership or a member's
subscription (or the partition count of a subscribed topic) changes. When it passes the
*assignment epoch*, the configured assignor computes a new *target assignment* and the
assignment epoch catches up. Each member then reconciles, one heartbeat at a time, from
its current assignment toward its target, and its *member epoch* reaches the assignment
epoch when it is done:

- STABLE: the member owns its target (or is between targets with nothing to give up).
- UNREVOKED_PARTITIONS: it must first give up partitions it owns that moved away; the
  heartbeat answer lists what it may keep, and its epoch stays until a heartbeat reports
  (in `topic_partitions`) that the revoked partitions are gone. A member that does not
  revoke within its rebalance timeout is removed.
- UNRELEASED_PARTITIONS: it has the new epoch and every partition of its target that no
  other member still owns; the rest are handed over as their owners revoke them.

A partition is never owned by two members: it is free only when no member has it
assigned or pending revocation. Member epoch checks: a heartbeat with an epoch above the
member's, or below it (other than the previous epoch while the member may have missed a
response), gets FENCED_MEMBER_EPOCH and the client rejoins with epoch 0. A member that
misses its session timeout (`group.consumer.session.timeout.ms`) is removed. Epoch -1
leaves; -2 leaves temporarily (a static member keeps its assignment until its session
timeout, and rejoining with the same `group.instance.id` takes it back).

Gaps: group records are kept in memory only (committed offsets persist); after a
coordinator restart members rejoin with epoch 0. Topic regexes use Python's `re` syntax.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ads.coordinator.group.assignors import ASSIGNORS
from ads.coordinator.timer import TimerHandle
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger("ads.coordinator")

LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
STABLE, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"
Owned = dict[uuid.UUID, set[int]]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    assigned: Owned = field(default_factory=dict)
    pending_revocation: Owned = field(default_factory=dict)
    last_sent: Owned | None = None
    session_timer: TimerHandle | None = None
    revocation_timer: TimerHandle | None = None


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Owned] = field(default_factory=dict)
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    assignor_name: str = "uniform"
    current_state_timestamp: int = -1

    group_type = "consumer"
    protocol_type = "consumer"

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> set[str] | None:
        topics: set[str] = set()
        for member in self.members.values():
            topics.update(member.subscribed_topic_names)
        topics.update(self.subscription_metadata)
        return topics

    def owner_epochs(self, exclude: str) -> set[tuple[uuid.UUID, int]]:
        """Partitions owned (assigned or pending revocation) by members other than one."""
        out: set[tuple[uuid.UUID, int]] = set()
        for mid, member in self.members.items():
            if mid == exclude:
                continue
            for owned in (member.assigned, member.pending_revocation):
                for topic_id, parts in owned.items():
                    out.update((topic_id, p) for p in parts)
        return out


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: Owned | None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Owned | None = None


class ConsumerGroupManager:
    def __init__(self, host: GroupCoordinator) -> None:
        self.host = host
        self.timers = host.timers
        self.config = host.config

    # -- validation ------------------------------------------------------------------
    def _invalid(self, req: HeartbeatRequest, version: int) -> str | None:
        if not req.group_id:
            return "GroupId can't be empty."
        if req.instance_id == "":
            return "InstanceId can't be empty."
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            return f"MemberEpoch {req.member_epoch} is invalid."
        if (version >= 1 or req.member_epoch != 0) and not req.member_id:
            return "MemberId can't be empty."
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if req.topic_partitions is None or any(req.topic_partitions.values()):
                return "TopicPartitions must be empty when (re-)joining."
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return "InstanceId can't be null when leaving as a static member."
        return None

    def heartbeat(self, req: HeartbeatRequest, version: int) -> HeartbeatResult:
        message = self._invalid(req, version)
        if message is not None:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, message)
        error = self.host.group_error(req.group_id)
        if error is not ErrorCode.NONE:
            return HeartbeatResult(error)
        if req.server_assignor is not None and req.server_assignor not in (
                self.config.consumer_assignors):
            return HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                   f"Assignor {req.server_assignor} is not supported.")
        if req.subscribed_topic_regex is not None:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                return HeartbeatResult(ErrorCode.INVALID_REQUEST,
                                       f"Invalid regular expression: {exc}")
        group = self.host.groups.get(req.group_id)
        if group is not None and not isinstance(group, ConsumerGroup):
            if group.members or req.member_epoch != 0:
                return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Group {req.group_id} is not a consumer group.")
            group = None  # an empty classic group (only offsets) becomes a consumer group
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, req)
        if group is None:
            if req.member_epoch != 0:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            group = ConsumerGroup(req.group_id, current_state_timestamp=self._now())
            self.host.groups[req.group_id] = group
        return self._heartbeat(group, req)

    def _now(self) -> int:
        return self.timers.clock.time_ms()

    # -- heartbeat -------------------------------------------------------------------
    def _heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResult:
        member_id = req.member_id or str(uuid.uuid4())
        member = group.members.get(member_id)
        bump = False
        if req.member_epoch == 0:
            if member is None:
                if len(group.members) >= self.config.consumer_max_size:
                    return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
                member = self._static_takeover(group, member_id, req.instance_id)
                if isinstance(member, HeartbeatResult):
                    return member
                # A static member taking its place back changes nothing for the others.
                bump = member.member_epoch == 0
                group.members[member_id] = member
            member.last_sent = None  # a (re)joining member gets the full assignment
        else:
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of the group.")
            error = self._check_epoch(member, req)
            if error is not None:
                return error
        bump |= self._update_member(member, req)
        bump |= self._refresh_metadata(group)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, req.server_assignor)
        self._reconcile(group, member, req.topic_partitions)
        self._touch(group, member)
        assignment = None
        if member.last_sent != member.assigned or (
                req.topic_partitions is not None and req.topic_partitions != _nonempty(
                    member.assigned)):
            assignment = {t: set(p) for t, p in member.assigned.items() if p}
            member.last_sent = {t: set(p) for t, p in member.assigned.items() if p}
        return HeartbeatResult(ErrorCode.NONE, None, member_id, member.member_epoch,
                               self.config.consumer_heartbeat_interval_ms, assignment)

    def _static_takeover(self, group: ConsumerGroup, member_id: str, instance_id: str | None
                         ) -> ConsumerMember | HeartbeatResult:
        if instance_id is None:
            return ConsumerMember(member_id)
        old = next((m for m in group.members.values() if m.instance_id == instance_id), None)
        if old is None:
            return ConsumerMember(member_id, instance_id)
        if old.member_epoch != STATIC_LEAVE_EPOCH:
            return HeartbeatResult(ErrorCode.UNRELEASED_INSTANCE_ID,
                                   f"Static member {instance_id} is still in use.")
        self._drop_timers(old)
        del group.members[old.member_id]
        old.member_id = member_id
        old.member_epoch = old.previous_epoch
        old.last_sent = None
        return old

    def _check_epoch(self, member: ConsumerMember, req: HeartbeatRequest
                     ) -> HeartbeatResult | None:
        if req.member_epoch == member.member_epoch:
            return None
        owned = req.topic_partitions
        # The previous epoch is fine while the member may have missed our last answer.
        if (req.member_epoch == member.previous_epoch and owned is not None and all(
                set(parts) <= member.assigned.get(t, set()) for t, parts in owned.items())):
            return None
        return HeartbeatResult(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The member epoch {req.member_epoch} is not {member.member_epoch}.")

    def _update_member(self, member: ConsumerMember, req: HeartbeatRequest) -> bool:
        changed = False
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if req.subscribed_topic_names is not None and sorted(req.subscribed_topic_names) != (
                sorted(member.subscribed_topic_names)):
            member.subscribed_topic_names = list(req.subscribed_topic_names)
            changed = True
        if req.subscribed_topic_regex is not None and (
                req.subscribed_topic_regex != member.subscribed_topic_regex):
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
            changed = True
        return changed

    def _member_topics(self, member: ConsumerMember) -> set[str]:
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = re.compile(member.subscribed_topic_regex)
            topics.update(t for t in self.host.log.topic_names() if pattern.fullmatch(t))
        return topics

    def _refresh_metadata(self, group: ConsumerGroup) -> bool:
        """Partition counts of the subscribed topics; True when they changed."""
        metadata: dict[str, int] = {}
        for member in group.members.values():
            for topic in self._member_topics(member):
                count = self.host.log.topic_partitions(topic)
                if count is not None:
                    metadata[topic] = count
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _compute_target(self, group: ConsumerGroup, preferred: str | None) -> None:
        names = [m.server_assignor for m in group.members.values() if m.server_assignor]
        name = preferred or (names[0] if names else self.config.consumer_assignors[0])
        assignor = ASSIGNORS.get(name, ASSIGNORS["uniform"])
        ids = {t: self.host.log.topic_id(t) for t in group.subscription_metadata}
        partitions = {tid: group.subscription_metadata[t] for t, tid in ids.items()
                      if tid is not None}
        subscriptions = {mid: {ids[t] for t in self._member_topics(m) if ids.get(t) is not None}
                         for mid, m in group.members.items()}
        group.target = assignor.assign(subscriptions, partitions, group.target)  # type: ignore[arg-type]
        group.assignor_name = assignor.name
        group.assignment_epoch = group.group_epoch
        log.info("consumer group %s: epoch %d target assignment by %s for %d members",
                 group.group_id, group.group_epoch, assignor.name, len(group.members))

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Owned | None
                   ) -> None:
        target_epoch = group.assignment_epoch
        if member.state == UNREVOKED:
            if owned is None or any(owned.get(t, set()) & parts
                                    for t, parts in member.pending_revocation.items()):
                return
            member.pending_revocation = {}
        elif member.state == STABLE and member.member_epoch == target_epoch:
            return
        target = group.target.get(member.member_id, {})
        taken = group.owner_epochs(member.member_id)
        keep: Owned = {}
        revoke: Owned = {}
        gain: Owned = {}
        unreleased = False
        for topic_id in set(target) | set(member.assigned):
            want = target.get(topic_id, set())
            have = member.assigned.get(topic_id, set())
            if have & want:
                keep[topic_id] = have & want
            if have - want:
                revoke[topic_id] = have - want
            free = {p for p in want - have if (topic_id, p) not in taken}
            if free:
                gain[topic_id] = free
            if len(free) < len(want - have):
                unreleased = True
        if revoke:
            member.state = UNREVOKED
            member.assigned = keep
            member.pending_revocation = revoke
            if member.revocation_timer is not None:
                member.revocation_timer.cancel()
            member_id = member.member_id
            member.revocation_timer = self.timers.schedule(
                member.rebalance_timeout_ms,
                lambda: self._revocation_expired(group, member, member_id))
            return
        if member.revocation_timer is not None:
            member.revocation_timer.cancel()
            member.revocation_timer = None
        for topic_id, parts in gain.items():
            keep.setdefault(topic_id, set()).update(parts)
        member.assigned = keep
        if member.member_epoch != target_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = target_epoch
        member.state = UNRELEASED if unreleased else STABLE

    # -- leaving and timeouts --------------------------------------------------------
    def _leave(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> HeartbeatResult:
        member = None if group is None else group.members.get(req.member_id)
        if member is None and group is not None and req.instance_id is not None:
            member = next((m for m in group.members.values()
                           if m.instance_id == req.instance_id), None)
        if group is None or member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id,
                                   member_epoch=req.member_epoch)
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            member.previous_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            self._touch(group, member)
        else:
            self._remove(group, member, "left the group")
        return HeartbeatResult(ErrorCode.NONE, None, req.member_id, req.member_epoch,
                               self.config.consumer_heartbeat_interval_ms)

    def _touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member_id = member.member_id
        member.session_timer = self.timers.schedule(
            self.config.consumer_session_timeout_ms,
            lambda: self._session_expired(group, member, member_id))

    def _session_expired(self, group: ConsumerGroup, member: ConsumerMember, member_id: str
                         ) -> None:
        if group.members.get(member_id) is member:
            self._remove(group, member, "session timed out")

    def _revocation_expired(self, group: ConsumerGroup, member: ConsumerMember,
                            member_id: str) -> None:
        if group.members.get(member_id) is member and member.state == UNREVOKED:
            self._remove(group, member, "did not revoke its partitions in time")

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        log.info("consumer group %s: removing member %s: %s", group.group_id,
                 member.member_id, reason)
        self._drop_timers(member)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.group_epoch += 1
        self._refresh_metadata(group)
        if not group.members:
            group.current_state_timestamp = self._now()

    @staticmethod
    def _drop_timers(member: ConsumerMember) -> None:
        for timer in (member.session_timer, member.revocation_timer):
            if timer is not None:
                timer.cancel()

    def remove_all(self, group: ConsumerGroup) -> None:
        for member in group.members.values():
            self._drop_timers(member)

    # -- offsets ---------------------------------------------------------------------
    def commit_error(self, group: ConsumerGroup, member_id: str, epoch: int
                     ) -> ErrorCode | None:
        if not member_id and epoch < 0:
            return None if group.is_empty else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def fetch_error(self, group: ConsumerGroup, member_id: str, epoch: int) -> ErrorCode:
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


def _nonempty(owned: Owned) -> Owned:
    return {t: p for t, p in owned.items() if p}
