"""The data of a classic group: members, generation, chosen protocol and leader.

Transitions go through `ClassicGroup.transition`, which enforces `state.VALID_PREVIOUS`;
the rebalance logic that drives them is in `rebalance.py`. Not thread-safe: used from the
broker's event loop only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ads.coordinator.group.api import JoinCallback, SyncCallback
from ads.coordinator.group.state import (
    GroupState,
    check_transition,
    initial_state,
    member_error,
)
from ads.coordinator.timer import TimerHandle
from ads.protocol import messages as m
from ads.protocol.errors import DecodeError, ErrorCode


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    # Joined in the current rebalance and never completed one: gets a shorter leash.
    is_new: bool = False
    supports_skip_assignment: bool = False
    heartbeat_timer: TimerHandle | None = None
    last_heartbeat_ms: int = 0

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_callback is not None


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, TimerHandle | None] = field(default_factory=dict)
    pending_sync: set[str] = field(default_factory=set)
    current_state_timestamp: int = -1
    # The delayed join (initial delay or rebalance timeout) and the sync deadline.
    join_timer: TimerHandle | None = None
    join_deadline_ms: int = 0
    sync_timer: TimerHandle | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    group_type = "classic"

    def transition(self, new: GroupState, now_ms: int) -> None:
        check_transition(self.state, new)
        self.state = new
        self.current_state_timestamp = now_ms

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add_member(self, member: Member, callback: JoinCallback | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_callback = callback
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        if (member.group_instance_id is not None
                and self.static_members.get(member.group_instance_id) == member_id):
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def member_error(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """`state.member_error` for this group: is the request from a current member?"""
        return member_error(instance_id, self.static_member_id(instance_id), member_id,
                            member_id in self.members)

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(mem.protocol_names()) for mem in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(
            self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its first-preferred candidate protocol."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for mem in self.members.values():
            choice = next(p for p in mem.protocol_names() if p in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # Ties go to the protocol the first member listed first, as in Kafka's maxBy.
        order = {p: i for i, p in enumerate(next(iter(self.members.values())).protocol_names())}
        return max(votes, key=lambda p: (votes[p], -order.get(p, 0)))

    def all_members_joined(self) -> bool:
        return (all(mem.awaiting_join for mem in self.members.values())
                and not self.pending_members)

    def max_rebalance_timeout_ms(self) -> int:
        return max((mem.rebalance_timeout_ms for mem in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, None if the protocol type is not "consumer"."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for mem in self.members.values():
            try:
                metadata = mem.metadata_for(self.protocol_name)
                topics.update(decode_subscription(metadata).topics)
            except Exception:  # noqa: BLE001 - opaque metadata is the client's business
                return None
        return topics

    @classmethod
    def from_record(cls, group_id: str, value: m.GroupMetadataValue) -> ClassicGroup:
        """The group its metadata record describes: Stable with its members, or Empty."""
        group = cls(group_id, initial_state(bool(value.members)), value.generation,
                    value.protocol_type or None, value.protocol, value.leader,
                    current_state_timestamp=value.current_state_timestamp)
        for mm in value.members:
            member = Member(
                mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                mm.rebalance_timeout, mm.session_timeout, value.protocol_type,
                [(value.protocol or "", bytes(mm.subscription))], bytes(mm.assignment))
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        return group

    def to_record_value(self) -> m.GroupMetadataValue:
        MM = m.GroupMetadataValue.MemberMetadata  # noqa: N806
        members = []
        if self.protocol_name is not None:
            for mem in self.members.values():
                members.append(MM(
                    member_id=mem.member_id, group_instance_id=mem.group_instance_id,
                    client_id=mem.client_id, client_host=mem.client_host,
                    rebalance_timeout=mem.rebalance_timeout_ms,
                    session_timeout=mem.session_timeout_ms,
                    subscription=mem.metadata_for(self.protocol_name),
                    assignment=mem.assignment))
        return m.GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation_id,
            protocol=self.protocol_name, leader=self.leader_id,
            current_state_timestamp=self.current_state_timestamp, members=members)


def _schema_version(data: bytes, top: int) -> int:
    if len(data) < 2:
        raise DecodeError("consumer protocol data without a version")
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        raise DecodeError(f"negative consumer protocol version {version}")
    # Newer versions only append fields, which an older reader ignores.
    return min(version, top)


def decode_subscription(metadata: bytes) -> m.ConsumerProtocolSubscription:
    """A consumer's subscription, whatever version (int16 prefix) it was written at."""
    cls = m.ConsumerProtocolSubscription
    return cls.decode(memoryview(metadata)[2:], _schema_version(metadata, cls.VALID_VERSIONS[1]))


def decode_assignment(data: bytes) -> m.ConsumerProtocolAssignment:
    cls = m.ConsumerProtocolAssignment
    return cls.decode(memoryview(data)[2:], _schema_version(data, cls.VALID_VERSIONS[1]))
