"""KIP-848 consumer groups: ConsumerGroupHeartbeat with server-side assignment.

The rules (epochs, member states, answers) are in `consumer_state.py`; this module keeps
the groups' data and applies the rules: it refreshes the subscribed topics' partition
counts, runs the assignor (`assignors.py`) when the group epoch moves, reconciles the
heartbeating member and keeps its session and revocation timers. The shard that owns the
groups (`shard.py`) resolves the group of a request and hands it in; nothing here writes
to `__consumer_offsets` (consumer-group records are not persisted yet). Not thread-safe:
used from the broker's event loop only.
"""

from __future__ import annotations

import logging
import re
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
from ads.coordinator.group.assignors import ASSIGNORS
from ads.coordinator.group.consumer_state import (
    STATIC_LEAVE_EPOCH,
    ConsumerGroupState,
    MemberState,
    group_state,
    heartbeat_epoch_error,
    reconcile,
)
from ads.coordinator.runtime import Write
from ads.coordinator.timer import TimerHandle, Timers
from ads.coordinator.topic import TopicMetadata
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")


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
    state: MemberState = MemberState.STABLE
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
    def state(self) -> ConsumerGroupState:
        return group_state(((m.member_epoch, m.state) for m in self.members.values()),
                           self.group_epoch, self.assignment_epoch)

    @property
    def state_name(self) -> str:
        return self.state.value

    def member_epoch(self, member_id: str) -> int | None:
        member = self.members.get(member_id)
        return None if member is None else member.member_epoch

    def subscribed_topics(self) -> set[str] | None:
        topics: set[str] = set()
        for member in self.members.values():
            topics.update(member.subscribed_topic_names)
        topics.update(self.subscription_metadata)
        return topics

    def owned_by_others(self, member_id: str) -> set[tuple[uuid.UUID, int]]:
        """Partitions other members have assigned or pending revocation."""
        out: set[tuple[uuid.UUID, int]] = set()
        for mid, member in self.members.items():
            if mid == member_id:
                continue
            for owned in (member.assigned, member.pending_revocation):
                for topic_id, parts in owned.items():
                    out.update((topic_id, p) for p in parts)
        return out


class ConsumerGroupManager:
    def __init__(self, timers: Timers[Write], config: GroupConfig, topics: TopicMetadata
                 ) -> None:
        self.timers = timers
        self.config = config
        self.topics = topics

    def _now(self) -> int:
        return self.timers.clock.time_ms()

    def check(self, req: HeartbeatRequest) -> HeartbeatResult | None:
        """The assignor and regex of a well-formed request; None if they are fine."""
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
        return None

    # -- heartbeat -------------------------------------------------------------------
    def heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResult:
        """A join (epoch 0) or a heartbeat of a member (epoch > 0)."""
        member_id = req.member_id or str(uuid.uuid4())
        member = group.members.get(member_id)
        bump = False
        if req.member_epoch == 0:
            if member is None:
                if len(group.members) >= self.config.consumer_max_size:
                    return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
                joined = self._static_takeover(group, member_id, req.instance_id)
                if isinstance(joined, HeartbeatResult):
                    return joined
                member = joined
                # A static member taking its place back changes nothing for the others.
                bump = member.member_epoch == 0
                group.members[member_id] = member
            member.last_sent = None  # a (re)joining member gets the full assignment
        else:
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of the group.")
            error = heartbeat_epoch_error(req.member_epoch, member.member_epoch,
                                          member.previous_epoch, req.topic_partitions,
                                          member.assigned)
            if error is not ErrorCode.NONE:
                return HeartbeatResult(
                    error, f"The member epoch {req.member_epoch} is not {member.member_epoch}.")
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
            assignment = _nonempty(member.assigned)
            member.last_sent = _nonempty(member.assigned)
        return HeartbeatResult(ErrorCode.NONE, None, member_id, member.member_epoch,
                               self.config.timeouts(group.group_id).consumer_heartbeat_interval_ms,
                               assignment)

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
            topics.update(t for t in self.topics.topic_names() if pattern.fullmatch(t))
        return topics

    def _refresh_metadata(self, group: ConsumerGroup) -> bool:
        """Partition counts of the subscribed topics; True when they changed."""
        metadata: dict[str, int] = {}
        for member in group.members.values():
            for topic in self._member_topics(member):
                count = self.topics.topic_partitions(topic)
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
        ids: dict[str, uuid.UUID] = {}
        for topic in group.subscription_metadata:
            topic_id = self.topics.topic_id(topic)
            if topic_id is not None:
                ids[topic] = topic_id
        partitions = {tid: group.subscription_metadata[t] for t, tid in ids.items()}
        subscriptions = {mid: {ids[t] for t in self._member_topics(m) if t in ids}
                         for mid, m in group.members.items()}
        group.target = assignor.assign(subscriptions, partitions, group.target)
        group.assignor_name = assignor.name
        group.assignment_epoch = group.group_epoch
        log.info("consumer group %s: epoch %d target assignment by %s for %d members",
                 group.group_id, group.group_epoch, assignor.name, len(group.members))

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, reported: Owned | None
                   ) -> None:
        step = reconcile(member.state, member.member_epoch, member.assigned,
                         member.pending_revocation, reported,
                         group.target.get(member.member_id, {}),
                         group.owned_by_others(member.member_id), group.assignment_epoch)
        if step is None:
            return
        if step.member_epoch != member.member_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = step.member_epoch
        member.state = step.state
        member.assigned = step.assigned
        member.pending_revocation = step.pending_revocation
        if member.revocation_timer is not None:
            member.revocation_timer.cancel()
            member.revocation_timer = None
        if step.state is MemberState.UNREVOKED_PARTITIONS:
            member_id = member.member_id
            member.revocation_timer = self.timers.schedule(
                member.rebalance_timeout_ms,
                lambda: self._revocation_expired(group, member, member_id))

    # -- leaving and timeouts --------------------------------------------------------
    def leave(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> HeartbeatResult:
        """A heartbeat with epoch -1 (LEAVE_EPOCH) or -2 (a static member leaves for now)."""
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
                               self.config.timeouts(req.group_id).consumer_heartbeat_interval_ms)

    def _touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member_id = member.member_id
        member.session_timer = self.timers.schedule(
            self.config.timeouts(group.group_id).consumer_session_timeout_ms,
            lambda: self._session_expired(group, member, member_id))

    def _session_expired(self, group: ConsumerGroup, member: ConsumerMember, member_id: str
                         ) -> None:
        if group.members.get(member_id) is member:
            self._remove(group, member, "session timed out")

    def _revocation_expired(self, group: ConsumerGroup, member: ConsumerMember,
                            member_id: str) -> None:
        if group.members.get(member_id) is member and (
                member.state is MemberState.UNREVOKED_PARTITIONS):
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
        """Drops every timer of a group (its partition is unloaded)."""
        for member in group.members.values():
            self._drop_timers(member)

    # -- describe --------------------------------------------------------------------
    def describe(self, group: ConsumerGroup) -> ConsumerGroupDescription:
        members = tuple(ConsumerMemberDescription(
            mem.member_id, mem.instance_id, mem.rack_id, mem.member_epoch, mem.client_id,
            mem.client_host, tuple(mem.subscribed_topic_names), mem.subscribed_topic_regex,
            self._named(mem.assigned), self._named(group.target.get(mem.member_id, {})))
            for mem in group.members.values())
        return ConsumerGroupDescription(
            group.group_id, ErrorCode.NONE, None, group.state_name, group.group_epoch,
            group.assignment_epoch, group.assignor_name, members)

    def _named(self, owned: Owned) -> tuple[AssignedPartitions, ...]:
        return tuple(AssignedPartitions(t, self.topics.topic_name(t) or "", tuple(sorted(p)))
                     for t, p in sorted(owned.items(), key=lambda kv: str(kv[0])) if p)


def _nonempty(owned: Owned) -> Owned:
    return {t: set(p) for t, p in owned.items() if p}
