"""KIP-848 consumer groups: ConsumerGroupHeartbeat with server-side assignment, persisted.

The rules (epochs, member states, answers) are in `consumer_state.py`; this module keeps
the groups' data and applies the rules: it refreshes the subscribed topics' partition
counts, runs the assignor (`assignors.py`) when the group epoch moves, reconciles the
heartbeating member and keeps its session and revocation timers. The shard that owns the
groups (`shard.py`) resolves the group of a request and hands it in.

Theory of operation: a group's state is what its records in `__consumer_offsets` say
(layouts in `records.py`), and it changes only by `replay`, at load and once a write is
committed alike. A heartbeat works on a copy of its member and computes what changes (the
member's metadata, the group epoch, a new target assignment, the member's reconciliation
step); those changes become records, and only the records of what changed:

    member joins or its metadata changes      ConsumerGroupMemberMetadata
    its regex resolves to other topics        ConsumerGroupRegularExpression
    group epoch bumped                        ConsumerGroupMetadata
    new target assignment                     ConsumerGroupTargetAssignmentMember for each
                                              member whose target changed, then
                                              ConsumerGroupTargetAssignmentMetadata
    member epoch, state or partitions change  ConsumerGroupCurrentMemberAssignment
    member leaves or expires                  tombstones of its current assignment, target
                                              and metadata, then ConsumerGroupMetadata
    group deleted (empty)                     tombstones of the regexes, the target
                                              assignment metadata and the group metadata

The write's continuation (run once the records are committed and replayed) keeps what no
record holds: the session and revocation timers, the topics' partition counts, the last
assignment sent to the member, and the answer. A heartbeat that changes nothing writes
nothing and is answered at once. Loading replays the same records and then `restore`
re-arms every member's session timer (and the revocation timer of a member that still has
partitions to give up), so members keep their ids and epochs across a move of the
coordinator and a restart. Not thread-safe: used from the broker's event loop only.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ads.coordinator.group import records as rec
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
    JOIN_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupState,
    MemberState,
    group_state,
    heartbeat_epoch_error,
    reconcile,
)
from ads.coordinator.runtime import Record, Write
from ads.coordinator.timer import TimerHandle, Timers
from ads.coordinator.topic import TopicMetadata
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")

T = rec.ConsumerRecordType
# MemberState as Kafka numbers it in ConsumerGroupCurrentMemberAssignment.
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
                MemberState.UNRELEASED_PARTITIONS: 2}
_CODE_STATES = {code: state for state, code in _STATE_CODES.items()}


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    # ConsumerGroupMemberMetadata
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    # ConsumerGroupCurrentMemberAssignment
    member_epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Owned = field(default_factory=dict)
    pending_revocation: Owned = field(default_factory=dict)
    # Not persisted.
    last_sent: Owned | None = None
    session_timer: TimerHandle | None = None
    revocation_timer: TimerHandle | None = None

    def metadata(self) -> rec.MemberMetadata:
        return rec.MemberMetadata(
            self.instance_id, self.rack_id, self.client_id, self.client_host,
            tuple(self.subscribed_topic_names), self.subscribed_topic_regex,
            self.rebalance_timeout_ms, self.server_assignor)

    def apply_metadata(self, v: rec.MemberMetadata) -> None:
        self.instance_id, self.rack_id = v.instance_id, v.rack_id
        self.client_id, self.client_host = v.client_id, v.client_host
        self.subscribed_topic_names = list(v.subscribed_topic_names)
        self.subscribed_topic_regex = v.subscribed_topic_regex
        self.rebalance_timeout_ms = v.rebalance_timeout_ms
        self.server_assignor = v.server_assignor

    def current(self) -> rec.CurrentAssignment:
        return rec.CurrentAssignment(self.member_epoch, self.previous_epoch,
                                     _STATE_CODES[self.state], _nonempty(self.assigned),
                                     _nonempty(self.pending_revocation))

    def apply_current(self, v: rec.CurrentAssignment) -> None:
        self.member_epoch, self.previous_epoch = v.member_epoch, v.previous_member_epoch
        self.state = _CODE_STATES.get(v.state, MemberState.STABLE)
        self.assigned = {t: set(p) for t, p in v.assigned.items()}
        self.pending_revocation = {t: set(p) for t, p in v.pending_revocation.items()}


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Owned] = field(default_factory=dict)
    resolved_regexes: dict[str, rec.ResolvedRegex] = field(default_factory=dict)
    # Not persisted: refreshed from the topics' metadata (at load too).
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

    def tombstones(self) -> list[Record]:
        """The records that delete this group (it has no members left)."""
        gid = self.group_id
        out: list[Record] = [(rec.consumer_key(T.REGULAR_EXPRESSION, gid, regex), None)
                             for regex in self.resolved_regexes]
        out.append((rec.consumer_key(T.TARGET_ASSIGNMENT_METADATA, gid), None))
        out.append((rec.consumer_key(T.GROUP_METADATA, gid), None))
        return out


def owned_by_others(members: Mapping[str, ConsumerMember], member_id: str
                    ) -> set[tuple[uuid.UUID, int]]:
    """Partitions other members have assigned or pending revocation."""
    out: set[tuple[uuid.UUID, int]] = set()
    for mid, member in members.items():
        if mid == member_id:
            continue
        for owned in (member.assigned, member.pending_revocation):
            for topic_id, parts in owned.items():
                out.update((topic_id, p) for p in parts)
    return out


@dataclass(frozen=True, slots=True)
class PendingHeartbeat:
    """A heartbeat whose answer waits for its write: `answer` is set by the write's
    continuation, once its records are committed and replayed."""

    write: Write
    answer: list[HeartbeatResult]

    def result(self, error: ErrorCode) -> HeartbeatResult:
        return self.answer[0] if self.answer else HeartbeatResult(error)


@dataclass(slots=True)
class _Change:
    """What one heartbeat changes, before any of it is written."""

    group: ConsumerGroup
    member: ConsumerMember  # as it will be (a copy)
    old: ConsumerMember | None  # as it is (None: it joins)
    members: dict[str, ConsumerMember]  # the group's members as they will be
    replaced: str | None  # a static member's old id, which it takes over
    metadata: dict[str, int] = field(default_factory=dict)
    group_epoch: int = 0
    target: dict[str, Owned] = field(default_factory=dict)
    new_target: bool = False
    assignor: str = ""
    stepped: bool = False
    regex: rec.ResolvedRegex | None = None  # the member's regex, resolved anew

    def records(self) -> list[Record]:
        group, member, old = self.group, self.member, self.old
        gid, mid = group.group_id, member.member_id
        out: list[Record] = []
        if self.replaced is not None:
            out += _member_tombstones(gid, self.replaced)
        if old is None or member.metadata() != old.metadata():
            out.append((rec.consumer_key(T.MEMBER_METADATA, gid, mid),
                        rec.member_metadata_value(member.metadata())))
        out += self._regex_records()
        if self.group_epoch != group.group_epoch:
            out.append((rec.consumer_key(T.GROUP_METADATA, gid),
                        rec.epoch_value(self.group_epoch)))
        if self.target is not group.target:
            out += self._target_records()
        if old is None or member.current() != old.current():
            out.append((rec.consumer_key(T.CURRENT_MEMBER_ASSIGNMENT, gid, mid),
                        rec.current_assignment_value(member.current())))
        return out

    def _regex_records(self) -> list[Record]:
        gid, regex = self.group.group_id, self.member.subscribed_topic_regex
        out: list[Record] = []
        if self.regex is not None and regex is not None:
            out.append((rec.consumer_key(T.REGULAR_EXPRESSION, gid, regex),
                        rec.regex_value(self.regex)))
        old_regex = None if self.old is None else self.old.subscribed_topic_regex
        unused = _unused_regex(self.group, old_regex, self.members.values())
        if unused is not None and unused != regex:
            out.append((rec.consumer_key(T.REGULAR_EXPRESSION, gid, unused), None))
        return out

    def _target_records(self) -> list[Record]:
        gid, before = self.group.group_id, self.group.target
        out: list[Record] = []
        for mid in sorted((set(self.target) | set(before)) - {self.replaced}):
            owned = _nonempty(self.target.get(mid, {}))
            if mid in self.members and owned != _nonempty(before.get(mid, {})):
                out.append((rec.consumer_key(T.TARGET_ASSIGNMENT_MEMBER, gid, mid),
                            rec.target_member_value(owned)))
        if self.new_target:
            out.append((rec.consumer_key(T.TARGET_ASSIGNMENT_METADATA, gid),
                        rec.epoch_value(self.group_epoch)))
        return out


def _unused_regex(group: ConsumerGroup, regex: str | None,
                  members: Iterable[ConsumerMember]) -> str | None:
    """`regex` if the group records it and none of `members` subscribes with it any more
    (its record is then deleted); None otherwise."""
    if regex is None or regex not in group.resolved_regexes or any(
            m.subscribed_topic_regex == regex for m in members):
        return None
    return regex


def _member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [(rec.consumer_key(kind, group_id, member_id), None)
            for kind in (T.CURRENT_MEMBER_ASSIGNMENT, T.TARGET_ASSIGNMENT_MEMBER,
                         T.MEMBER_METADATA)]


class ConsumerGroupManager:
    """`lookup(group_id)`: the shard's consumer group of that id, as replay left it."""

    def __init__(self, timers: Timers[Write], config: GroupConfig, topics: TopicMetadata,
                 lookup: Callable[[str], ConsumerGroup | None]) -> None:
        self.timers = timers
        self.config = config
        self.topics = topics
        self.lookup = lookup
        # Groups with a write on its way (its records enter the state only once it is
        # committed), and what waits for it: the group's next change is computed from
        # the state that write leaves, never beside it.
        self._writing: dict[str, list[Callable[[], list[Write]]]] = {}

    def after_write(self, group_id: str, action: Callable[[], list[Write]]) -> bool:
        """Runs `action` once the group's write on its way has been committed and
        replayed (the writes it returns are performed then); False: none is on its way."""
        waiting = self._writing.get(group_id)
        if waiting is None:
            return False
        waiting.append(action)
        return True

    def writing(self, group_id: str) -> bool:
        return group_id in self._writing

    def _locked(self, group_id: str, write: Write) -> Write:
        """`write`, holding the group until its continuation has run."""
        self._writing.setdefault(group_id, [])
        inner = write.then

        def then(error: ErrorCode) -> list[Write]:
            follow = list(inner(error)) if inner is not None else []
            for action in self._writing.pop(group_id, []):
                follow += action()
            return follow

        return dataclasses.replace(write, then=then)

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

    # -- replay (loading, and each write once committed) ------------------------------
    def replay(self, group: ConsumerGroup, key: rec.ConsumerKey, value: bytes | None
               ) -> bool:
        """Applies one record to the group; True when it deletes the group."""
        kind = key.type
        if kind is T.GROUP_METADATA:
            if value is None:
                return not group.members
            group.group_epoch = rec.parse_epoch_value(value)
        elif kind is T.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = 0 if value is None else rec.parse_epoch_value(value)
        elif kind is T.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                group.target.pop(key.member, None)
            else:
                group.target[key.member] = rec.parse_target_member_value(value)
        elif kind is T.REGULAR_EXPRESSION:
            if value is None:
                group.resolved_regexes.pop(key.member, None)
            else:
                group.resolved_regexes[key.member] = rec.parse_regex_value(value)
        elif kind in (T.MEMBER_METADATA, T.CURRENT_MEMBER_ASSIGNMENT):
            self._replay_member(group, key, value)
        return False

    def _replay_member(self, group: ConsumerGroup, key: rec.ConsumerKey,
                       value: bytes | None) -> None:
        member = group.members.get(key.member)
        if value is None:
            if member is None:
                return
            if key.type is T.MEMBER_METADATA:
                self._drop_timers(member)
                del group.members[key.member]
                if not group.members:
                    group.current_state_timestamp = self._now()
            else:
                member.apply_current(rec.CurrentAssignment(0, -1, 0, {}, {}))
            return
        if member is None:
            member = group.members[key.member] = ConsumerMember(key.member)
        if key.type is T.MEMBER_METADATA:
            member.apply_metadata(rec.parse_member_metadata_value(value))
        else:
            member.apply_current(rec.parse_current_assignment_value(value))

    def restore(self, group: ConsumerGroup) -> None:
        """A group rebuilt by loading: its partition counts, assignor and timers."""
        group.subscription_metadata = self._subscription_metadata(group.members.values())
        names = [m.server_assignor for m in group.members.values() if m.server_assignor]
        group.assignor_name = names[0] if names else self.config.consumer_assignors[0]
        if not group.members:
            group.current_state_timestamp = self._now()
        for member in group.members.values():
            self._touch(group.group_id, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._arm_revocation(group.group_id, member)

    # -- heartbeat -------------------------------------------------------------------
    def heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest,
                  before: Iterable[Record] = ()) -> HeartbeatResult | PendingHeartbeat:
        """A join (epoch 0) or a heartbeat of a member (epoch > 0). `group` may be a new
        one, not yet in the shard (replaying the write puts it there); `before`: records
        to write first (the tombstone of the classic group it replaces)."""
        member_id = req.member_id or str(uuid.uuid4())
        admitted = self._admit(group, member_id, req)
        if isinstance(admitted, HeartbeatResult):
            return admitted
        change = admitted
        bump = self._update_member(change.member, req) or (
            change.old is None and change.member.member_epoch == 0)
        change.metadata = self._subscription_metadata(change.members.values())
        bump |= change.metadata != group.subscription_metadata
        change.group_epoch = group.group_epoch + (1 if bump else 0)
        assignment_epoch = group.assignment_epoch
        if change.group_epoch > assignment_epoch:
            change.target, change.assignor = self._compute_target(change, req.server_assignor)
            change.new_target = True
            assignment_epoch = change.group_epoch
        change.stepped = self._reconcile(change, req.topic_partitions, assignment_epoch)
        change.regex = self._resolve_regex(group, change.member)
        records = [*before, *change.records()]
        answer: list[HeartbeatResult] = []
        then = self._answer(change, req, answer)
        if not records:
            then(ErrorCode.NONE)
            return answer[0]
        return PendingHeartbeat(self._locked(group.group_id, Write(records, then)), answer)

    def _admit(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest
               ) -> _Change | HeartbeatResult:
        """The heartbeat's member (a copy, or a new one) if it may heartbeat."""
        old = group.members.get(member_id)
        replaced = None
        if old is not None:
            if req.member_epoch != JOIN_EPOCH:
                error = heartbeat_epoch_error(req.member_epoch, old.member_epoch,
                                              old.previous_epoch, req.topic_partitions,
                                              old.assigned)
                if error is not ErrorCode.NONE:
                    return HeartbeatResult(
                        error, f"The member epoch {req.member_epoch} is not {old.member_epoch}.")
            member = dataclasses.replace(old)
        elif req.member_epoch != JOIN_EPOCH:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of the group.")
        elif len(group.members) >= self.config.consumer_max_size:
            return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
        else:
            joined = self._static_takeover(group, member_id, req.instance_id)
            if isinstance(joined, HeartbeatResult):
                return joined
            member, replaced = joined
        members = dict(group.members)
        if replaced is not None:
            del members[replaced]
        members[member_id] = member
        target = group.target
        if replaced is not None and replaced in target:
            target = {mid: t for mid, t in target.items() if mid != replaced}
            target[member_id] = group.target[replaced]
        return _Change(group, member, old, members, replaced, target=target)

    @staticmethod
    def _static_takeover(group: ConsumerGroup, member_id: str, instance_id: str | None
                         ) -> tuple[ConsumerMember, str | None] | HeartbeatResult:
        if instance_id is None:
            return ConsumerMember(member_id), None
        old = next((m for m in group.members.values() if m.instance_id == instance_id), None)
        if old is None:
            return ConsumerMember(member_id, instance_id), None
        if old.member_epoch != STATIC_LEAVE_EPOCH:
            return HeartbeatResult(ErrorCode.UNRELEASED_INSTANCE_ID,
                                   f"Static member {instance_id} is still in use.")
        # It takes its place back: its assignment, at the epoch it had before leaving.
        return dataclasses.replace(old, member_id=member_id, member_epoch=old.previous_epoch,
                                   last_sent=None, session_timer=None,
                                   revocation_timer=None), old.member_id

    @staticmethod
    def _update_member(member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Takes the request's metadata; True when the subscription changed."""
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
        # An empty regex is none (librdkafka sends it with every full heartbeat).
        regex = req.subscribed_topic_regex or None
        if req.subscribed_topic_regex is not None and regex != member.subscribed_topic_regex:
            member.subscribed_topic_regex = regex
            changed = True
        return changed

    def _member_topics(self, member: ConsumerMember) -> set[str]:
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            topics.update(self.topics.topics_matching(member.subscribed_topic_regex))
        return topics

    def _resolve_regex(self, group: ConsumerGroup, member: ConsumerMember
                       ) -> rec.ResolvedRegex | None:
        """The member's regex resolved, when that differs from the group's record of it."""
        regex = member.subscribed_topic_regex
        if not regex:
            return None
        topics = self.topics.topics_matching(regex)
        known = group.resolved_regexes.get(regex)
        if known is not None and known.topics == topics:
            return None
        return rec.ResolvedRegex(topics, 0, self._now())

    def _subscription_metadata(self, members: Iterable[ConsumerMember]) -> dict[str, int]:
        """Partition counts of the topics the members subscribe to."""
        metadata: dict[str, int] = {}
        for member in members:
            for topic in self._member_topics(member):
                count = self.topics.topic_partitions(topic)
                if count is not None:
                    metadata[topic] = count
        return metadata

    def _compute_target(self, change: _Change, preferred: str | None
                        ) -> tuple[dict[str, Owned], str]:
        members = change.members
        names = [m.server_assignor for m in members.values() if m.server_assignor]
        name = preferred or (names[0] if names else self.config.consumer_assignors[0])
        assignor = ASSIGNORS.get(name, ASSIGNORS["uniform"])
        ids: dict[str, uuid.UUID] = {}
        for topic in change.metadata:
            topic_id = self.topics.topic_id(topic)
            if topic_id is not None:
                ids[topic] = topic_id
        partitions = {tid: change.metadata[t] for t, tid in ids.items()}
        subscriptions = {mid: {ids[t] for t in self._member_topics(m) if t in ids}
                         for mid, m in members.items()}
        target = assignor.assign(subscriptions, partitions, change.target)
        log.info("consumer group %s: epoch %d target assignment by %s for %d members",
                 change.group.group_id, change.group_epoch, assignor.name, len(members))
        return target, assignor.name

    @staticmethod
    def _reconcile(change: _Change, reported: Owned | None, assignment_epoch: int) -> bool:
        """The member's step toward its target (on the copy); False: none."""
        member = change.member
        step = reconcile(member.state, member.member_epoch, member.assigned,
                         member.pending_revocation, reported,
                         change.target.get(member.member_id, {}),
                         owned_by_others(change.members, member.member_id), assignment_epoch)
        if step is None:
            return False
        if step.member_epoch != member.member_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = step.member_epoch
        member.state = step.state
        member.assigned = step.assigned
        member.pending_revocation = step.pending_revocation
        return True

    def _answer(self, change: _Change, req: HeartbeatRequest, answer: list[HeartbeatResult]
                ) -> Callable[[ErrorCode], list[Write]]:
        group_id, member_id = change.group.group_id, change.member.member_id

        def then(error: ErrorCode) -> list[Write]:
            group = self.lookup(group_id)
            member = None if group is None else group.members.get(member_id)
            if error is not ErrorCode.NONE or group is None or member is None:
                answer.append(HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID if error is ErrorCode.NONE else error))
                return []
            group.subscription_metadata = change.metadata
            if change.new_target:
                group.assignor_name = change.assignor
            if req.member_epoch == JOIN_EPOCH:
                member.last_sent = None  # a (re)joining member gets the full assignment
            if change.stepped:
                self._arm_revocation(group_id, member)
            self._touch(group_id, member)
            answer.append(self._result(group_id, member, req.topic_partitions))
            return []

        return then

    def _result(self, group_id: str, member: ConsumerMember, reported: Owned | None
                ) -> HeartbeatResult:
        assignment = None
        if member.last_sent != member.assigned or (
                reported is not None and reported != _nonempty(member.assigned)):
            assignment = _nonempty(member.assigned)
            member.last_sent = _nonempty(member.assigned)
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, member.member_epoch,
                               self.config.timeouts(group_id).consumer_heartbeat_interval_ms,
                               assignment)

    # -- leaving and timeouts --------------------------------------------------------
    def leave(self, group: ConsumerGroup | None, req: HeartbeatRequest
              ) -> HeartbeatResult | PendingHeartbeat:
        """A heartbeat with epoch -1 (LEAVE_EPOCH) or -2 (a static member leaves for now)."""
        member = None if group is None else group.members.get(req.member_id)
        if member is None and group is not None and req.instance_id is not None:
            member = next((m for m in group.members.values()
                           if m.instance_id == req.instance_id), None)
        if group is None or member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id,
                                   member_epoch=req.member_epoch)
        answer: list[HeartbeatResult] = []
        done = HeartbeatResult(ErrorCode.NONE, None, req.member_id, req.member_epoch,
                               self.config.timeouts(req.group_id).consumer_heartbeat_interval_ms)
        if req.member_epoch != STATIC_LEAVE_EPOCH:
            write = self._removal(group, member, "left the group")
            return PendingHeartbeat(_answered(write, done, answer), answer)
        # It keeps its assignment until its session times out or it comes back.
        current = dataclasses.replace(member.current(), member_epoch=STATIC_LEAVE_EPOCH,
                                      previous_member_epoch=member.member_epoch)
        group_id, member_id = group.group_id, member.member_id

        def left(error: ErrorCode) -> list[Write]:
            g = self.lookup(group_id)
            if error is ErrorCode.NONE and g is not None and member_id in g.members:
                self._touch(group_id, g.members[member_id])
            return []

        write = Write([(rec.consumer_key(T.CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
                        rec.current_assignment_value(current))], left)
        return PendingHeartbeat(_answered(self._locked(group_id, write), done, answer), answer)

    def _touch(self, group_id: str, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member_id = member.member_id
        member.session_timer = self.timers.schedule(
            self.config.timeouts(group_id).consumer_session_timeout_ms,
            lambda: self._expired(group_id, member, member_id, revocation=False))

    def _arm_revocation(self, group_id: str, member: ConsumerMember) -> None:
        if member.revocation_timer is not None:
            member.revocation_timer.cancel()
            member.revocation_timer = None
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            member_id = member.member_id
            member.revocation_timer = self.timers.schedule(
                member.rebalance_timeout_ms,
                lambda: self._expired(group_id, member, member_id, revocation=True))

    def _expired(self, group_id: str, member: ConsumerMember, member_id: str,
                 revocation: bool) -> list[Write]:
        """Its session, or its time to revoke partitions, ended: it is removed."""
        if self.after_write(group_id, lambda: self._expired(group_id, member, member_id,
                                                            revocation)):
            return []  # decided once the group's write on its way is in
        group = self.lookup(group_id)
        if group is None or group.members.get(member_id) is not member:
            return []
        if not revocation:
            return [self._removal(group, member, "session timed out")]
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            return []
        return [self._removal(group, member, "did not revoke its partitions in time")]

    def _removal(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> Write:
        """The records that remove a member, and a new group epoch."""
        group_id, member_id = group.group_id, member.member_id
        records = _member_tombstones(group_id, member_id)
        unused = _unused_regex(group, member.subscribed_topic_regex,
                               (m for m in group.members.values() if m is not member))
        if unused is not None:
            records.append((rec.consumer_key(T.REGULAR_EXPRESSION, group_id, unused), None))
        records.append((rec.consumer_key(T.GROUP_METADATA, group_id),
                        rec.epoch_value(group.group_epoch + 1)))

        def removed(error: ErrorCode) -> list[Write]:
            if error is not ErrorCode.NONE:
                return []
            log.info("consumer group %s: removed member %s: %s", group_id, member_id, reason)
            g = self.lookup(group_id)
            if g is not None:
                g.subscription_metadata = self._subscription_metadata(g.members.values())
            return []

        return self._locked(group_id, Write(records, removed))

    @staticmethod
    def _drop_timers(member: ConsumerMember) -> None:
        for timer in (member.session_timer, member.revocation_timer):
            if timer is not None:
                timer.cancel()

    def remove_all(self, group: ConsumerGroup) -> None:
        """Drops every timer of a group (its partition is unloaded)."""
        for member in group.members.values():
            self._drop_timers(member)

    def unloaded(self) -> None:
        """The partition is unloaded: what waits for a write is woken (and finds the
        partition gone); timers waiting so are dropped with their writes."""
        writing, self._writing = self._writing, {}
        for actions in writing.values():
            for action in actions:
                action()

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


def _answered(write: Write, done: HeartbeatResult, answer: list[HeartbeatResult]) -> Write:
    """`write`, whose continuation also sets the answer `done` once it is committed."""
    inner = write.then

    def then(error: ErrorCode) -> list[Write]:
        follow = list(inner(error)) if inner is not None else []
        answer.append(done if error is ErrorCode.NONE else HeartbeatResult(error))
        return follow

    return dataclasses.replace(write, then=then)


def _nonempty(owned: Owned) -> Owned:
    return {t: set(p) for t, p in owned.items() if p}
