"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

The rules are those of `state.py`; this module applies them. JoinGroup and SyncGroup may
be answered later (when the join phase completes or the leader's assignment arrives), so
they take a callback; Heartbeat and LeaveGroup answer at once. Timers (session, join
delay, rebalance and sync timeouts) run from `Timers.run_due` against the injected clock,
at their deadlines.
The caller (`shard.py`) has already checked the group id, that the group's partition is
loaded, and found the group.

Nothing here writes: the group metadata record is returned as a `Write` (from every public
method, and from every timer) for the runtime to append, and the step that depends on it
(the leader's SyncGroup completing the rebalance, a static member taking its place back)
is that write's continuation, run once the record is committed. A continuation first
checks that the group is still where the write left it; if a rebalance overtook it, the
parked members were answered already and it does nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from ads.coordinator.group import records as rec
from ads.coordinator.group.api import (
    GroupConfig,
    JoinCallback,
    JoinRequest,
    JoinResult,
    SyncCallback,
    SyncResult,
)
from ads.coordinator.group.classic import ClassicGroup, Member
from ads.coordinator.group.state import HEARTBEAT, SYNC, GroupState
from ads.coordinator.runtime import Write
from ads.coordinator.timer import TimerHandle, Timers
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")

E, PR, CR, ST, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                    GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)

# A new member parked in JoinGroup cannot heartbeat; if its client gave up and retried,
# the defunct member would hold every rebalance for its whole rebalance timeout.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class ClassicRebalancer:
    """Not thread-safe: the broker's event loop only."""

    def __init__(self, timers: Timers[Write], config: GroupConfig) -> None:
        self.timers = timers
        self.config = config
        # The writes of the call (or timer) under way, handed back when it returns.
        self._writes: list[Write] = []

    def _now(self) -> int:
        return self.timers.clock.time_ms()

    def _take(self) -> list[Write]:
        writes, self._writes = self._writes, []
        return writes

    def _schedule(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        def run() -> list[Write]:
            fn()
            return self._take()

        return self.timers.schedule(delay_ms, run)

    def _store(self, group: ClassicGroup,
               then: Callable[[ErrorCode], list[Write]] | None = None) -> None:
        """Asks for the group metadata record (generation, members and assignments)."""
        value = rec.group_value(group.to_record_value())
        self._writes.append(Write([(rec.group_key(group.group_id), value)], then))

    # -- JoinGroup -------------------------------------------------------------------
    def join_error(self, req: JoinRequest) -> ErrorCode:
        """What a join gets before its group is looked at."""
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return ErrorCode.INVALID_SESSION_TIMEOUT
        if not req.protocol_type or not req.protocols:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def join(self, group: ClassicGroup, req: JoinRequest, callback: JoinCallback
             ) -> list[Write]:
        if group.is_(D):
            callback(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id))
            return self._take()
        if not group.supports(req.protocol_type, [n for n, _ in req.protocols]):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
            return self._take()
        if req.member_id:
            self._join_known(group, req, callback)
        else:
            self._join_unknown(group, req, callback)
        if group.is_(PR):
            self._try_complete_join(group)
        return self._take()

    def _join_unknown(self, group: ClassicGroup, req: JoinRequest, callback: JoinCallback
                      ) -> None:
        new_id = f"{req.client_id}-{uuid.uuid4()}"
        old_id = group.static_member_id(req.group_instance_id)
        if old_id is not None:
            self._update_static_member(group, old_id, new_id, req, callback)
            return
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            callback(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=req.member_id))
            return
        if req.group_instance_id is None and req.require_known_member_id:
            # KIP-394: the member learns its id first, so a retried join after a lost
            # response does not leave a defunct member behind.
            group.pending_members[new_id] = self._schedule(
                req.session_timeout_ms, lambda: self._expire_pending(group, new_id))
            callback(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
            return
        self._add_member_and_rebalance(group, new_id, req, callback)

    def _join_known(self, group: ClassicGroup, req: JoinRequest, callback: JoinCallback
                    ) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            self._add_member_and_rebalance(group, member_id, req, callback)
            return
        error = group.member_error(member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            callback(JoinResult(error, member_id=member_id))
            return
        member = group.members[member_id]
        if group.is_(PR):
            self._update_member_and_rebalance(group, member, req, callback)
        elif group.is_(CR):
            if member.matches(req.protocols):
                # A retried join of the current generation: answer it again.
                callback(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, callback)
        elif group.is_(ST):
            if member_id == group.leader_id or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, callback)
            else:
                callback(JoinResult(
                    ErrorCode.NONE, group.generation_id, group.protocol_type,
                    group.protocol_name, group.leader_id or "", member_id))
        else:
            callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, req: JoinRequest,
                                  callback: JoinCallback) -> None:
        member = Member(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
            list(req.protocols), is_new=True,
            supports_skip_assignment=req.supports_skip_assignment)
        if group.is_(PR) and group.generation_id == 0:
            group.extra["new_member_added"] = True
        group.add_member(member, callback)
        self.touch(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"{member_id} joined")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member,
                                     req: JoinRequest, callback: JoinCallback) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.supports_skip_assignment = req.supports_skip_assignment
        if member.join_callback is not None and member.join_callback is not callback:
            # A retried join replaces the parked one, whose connection is likely gone.
            member.join_callback(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS,
                                            member_id=member.member_id))
        member.join_callback = callback
        self.touch(group, member)
        self._maybe_prepare_rebalance(group, f"{member.member_id} rejoined")

    def _update_static_member(self, group: ClassicGroup, old_id: str, new_id: str,
                              req: JoinRequest, callback: JoinCallback) -> None:
        old = group.members[old_id]
        if old.join_callback is not None:
            old.join_callback(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
            old.join_callback = None
        if old.sync_callback is not None:
            old.sync_callback(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            old.sync_callback = None
        current_leader = group.leader_id or ""
        old_protocols = old.protocols
        member = group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        member.protocols = list(req.protocols)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.supports_skip_assignment = req.supports_skip_assignment
        self.touch(group, member)
        if group.is_(ST):
            if group.protocol_name == group.select_protocol():
                instance_id = req.group_instance_id or ""

                def stored(error: ErrorCode) -> list[Write]:
                    if error is not ErrorCode.NONE:
                        if group.static_member_id(instance_id) == new_id:
                            group.replace_static_member(instance_id, new_id, old_id)
                            member.protocols = old_protocols
                        callback(JoinResult(error, member_id=""))
                        return self._take()
                    # The static member takes its place back without a rebalance. The
                    # old leader id is returned so that a rejoining leader does not
                    # recompute an assignment a Stable group would never distribute
                    # (unless the client can skip the assignment, JoinGroup v9).
                    leader = new_id == group.leader_id and req.supports_skip_assignment
                    callback(JoinResult(
                        ErrorCode.NONE, group.generation_id, group.protocol_type,
                        group.protocol_name, new_id if leader else current_leader, new_id,
                        self._member_metadata(group) if leader else (),
                        skip_assignment=leader))
                    return self._take()

                self._store(group, stored)
                return
            member.join_callback = callback
            self._maybe_prepare_rebalance(group, f"static member {new_id} changed protocols")
        elif group.is_(CR):
            # The leader may have been sent the old member id; its assignment would miss
            # the new one.
            member.join_callback = callback
            self._prepare_rebalance(group, f"static member {new_id} rejoined during sync")
        else:
            member.join_callback = callback

    # -- join phase ------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state in (ST, CR, E):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(CR):
            self._reset_and_propagate(group, ErrorCode.REBALANCE_IN_PROGRESS)
        was_empty = group.is_(E)
        group.transition(PR, self._now())
        log.info("group %s preparing to rebalance (generation %d): %s",
                 group.group_id, group.generation_id, reason)
        delay = self.config.initial_rebalance_delay_ms
        rebalance_timeout = group.max_rebalance_timeout_ms()
        if was_empty and delay > 0:
            group.extra["new_member_added"] = False
            group.extra["remaining_ms"] = max(rebalance_timeout - delay, 0)
            self._schedule_join(group, delay, self._initial_join_expired)
        else:
            group.extra.pop("remaining_ms", None)
            self._schedule_join(group, rebalance_timeout, self._complete_join)
            self._try_complete_join(group)

    def _schedule_join(self, group: ClassicGroup, delay_ms: int,
                       fn: Callable[[ClassicGroup], None]) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_timer = self._schedule(delay_ms, lambda: fn(group))

    def _initial_join_expired(self, group: ClassicGroup) -> None:
        remaining = int(group.extra.get("remaining_ms", 0))
        if group.extra.get("new_member_added") and remaining > 0:
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.extra["new_member_added"] = False
            group.extra["remaining_ms"] = max(remaining - delay, 0)
            self._schedule_join(group, delay, self._initial_join_expired)
        else:
            self._complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        # The initial delay waits out its timer even when everyone has joined.
        if "remaining_ms" in group.extra:
            return
        if group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if not group.is_(PR):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.extra.pop("remaining_ms", None)
        for member in list(group.members.values()):
            # Static members keep their place while they are away (KIP-345).
            if not member.awaiting_join and member.group_instance_id is None:
                self._remove_member(group, member, "did not rejoin in time", rebalance=False)
        now = self._now()
        group.generation_id += 1
        if group.is_empty:
            group.protocol_name = None
            group.transition(E, now)
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self._store(group)
            return
        group.protocol_name = group.select_protocol()
        leader = group.members.get(group.leader_id or "")
        if leader is None or not leader.awaiting_join:
            # An absent static leader would never send the assignment.
            joined = [mid for mid, mem in group.members.items() if mem.awaiting_join]
            group.leader_id = joined[0] if joined else next(iter(group.members))
        group.transition(CR, now)
        log.info("group %s completing rebalance: generation %d, protocol %s, %d members",
                 group.group_id, group.generation_id, group.protocol_name, len(group.members))
        group.pending_sync = set(group.members)
        for member in group.members.values():
            callback = member.join_callback
            member.join_callback = None
            member.is_new = False
            self.touch(group, member)
            if callback is not None:
                callback(self._join_result(group, member))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
        generation = group.generation_id
        group.sync_timer = self._schedule(
            group.max_rebalance_timeout_ms(), lambda: self._sync_expired(group, generation))

    def _join_result(self, group: ClassicGroup, member: Member) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        return JoinResult(
            ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id or "", member.member_id,
            self._member_metadata(group) if is_leader else ())

    @staticmethod
    def _member_metadata(group: ClassicGroup) -> tuple[tuple[str, str | None, bytes], ...]:
        name = group.protocol_name or ""
        return tuple((mem.member_id, mem.group_instance_id, mem.metadata_for(name))
                     for mem in group.members.values())

    def _sync_expired(self, group: ClassicGroup, generation: int) -> None:
        if generation != group.generation_id or group.state not in (CR, ST):
            return
        late = [group.members[mid] for mid in group.pending_sync if mid in group.members]
        group.pending_sync.clear()
        for member in late:
            self._remove_member(group, member, "sent no SyncGroup in time", rebalance=False)
        if late:
            self._prepare_rebalance(group, "members missed the sync deadline")

    # -- SyncGroup -------------------------------------------------------------------
    def sync(self, group: ClassicGroup | None, generation_id: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], callback: SyncCallback) -> list[Write]:
        self._sync(group, generation_id, member_id, instance_id, protocol_type, protocol_name,
                   assignments, callback)
        return self._take()

    def _sync(self, group: ClassicGroup | None, generation_id: int, member_id: str,
              instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
              assignments: dict[str, bytes], callback: SyncCallback) -> None:
        error = self._sync_error(group, generation_id, member_id, instance_id, protocol_type,
                                 protocol_name)
        if group is None or error is not ErrorCode.NONE:
            callback(SyncResult(error))
            return
        member = group.members[member_id]
        self._sync_received(group, member)
        if group.is_(ST):
            callback(SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                                group.protocol_name))
            return
        if member.sync_callback is not None and member.sync_callback is not callback:
            # A retried SyncGroup replaces the parked one, whose connection is likely gone.
            member.sync_callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_callback = callback
        if member_id == group.leader_id:
            self._store_assignment(group, assignments)

    def _sync_error(self, group: ClassicGroup | None, generation_id: int, member_id: str,
                    instance_id: str | None, protocol_type: str | None,
                    protocol_name: str | None) -> ErrorCode:
        """The error a SyncGroup is answered with at once, checked in Kafka's order; NONE if
        it goes on."""
        if group is None or group.is_empty:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._generation_error(group, generation_id, member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return SYNC[group.state] or ErrorCode.NONE

    @staticmethod
    def _generation_error(group: ClassicGroup, generation_id: int, member_id: str,
                          instance_id: str | None) -> ErrorCode:
        """SyncGroup's and Heartbeat's checks of the group, the member and its generation."""
        if group.is_(D):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.member_error(member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def _sync_received(self, group: ClassicGroup, member: Member) -> None:
        """A valid SyncGroup counts as a heartbeat; the sync deadline is dropped once every
        member has sent one."""
        self.touch(group, member)
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _store_assignment(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        """The leader's assignment: set on the members and stored; the rebalance completes
        once the record is committed (`_assignment_stored`)."""
        previous = {mid: mem.assignment for mid, mem in group.members.items()}
        for mid, mem in group.members.items():
            mem.assignment = bytes(assignments.get(mid, b""))
        generation = group.generation_id

        def stored(error: ErrorCode) -> list[Write]:
            if group.is_(CR) and group.generation_id == generation:
                self._assignment_stored(group, previous, error)
            return self._take()

        self._store(group, stored)

    def _assignment_stored(self, group: ClassicGroup, previous: dict[str, bytes],
                           error: ErrorCode) -> None:
        if error is not ErrorCode.NONE:
            for mid, mem in group.members.items():
                mem.assignment = previous.get(mid, b"")
            self._reset_and_propagate(group, error)
            self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for mem in group.members.values():
            if mem.sync_callback is not None:
                mem.sync_callback(SyncResult(ErrorCode.NONE, mem.assignment,
                                             group.protocol_type, group.protocol_name))
                mem.sync_callback = None
        group.transition(ST, self._now())
        log.info("group %s stable at generation %d", group.group_id, group.generation_id)

    def _reset_and_propagate(self, group: ClassicGroup, error: ErrorCode) -> None:
        for mem in group.members.values():
            mem.assignment = b""
            if mem.sync_callback is not None:
                mem.sync_callback(SyncResult(error))
                mem.sync_callback = None
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    # -- Heartbeat -------------------------------------------------------------------
    def heartbeat(self, group: ClassicGroup | None, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._generation_error(group, generation_id, member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        self.touch(group, group.members[member_id])
        return HEARTBEAT[group.state]

    # -- LeaveGroup ------------------------------------------------------------------
    def leave(self, group: ClassicGroup | None, leaving: list[tuple[str, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode], list[Write]]:
        """The group's error, one error per leaving member, and the writes to perform."""
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, [], []
        if group.is_(D):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        results = []
        for member_id, instance_id in leaving:
            if not member_id and instance_id is not None:
                member_id = group.static_member_id(instance_id) or ""
                if not member_id:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
            if member_id in group.pending_members:
                timer = group.pending_members.pop(member_id)
                if timer is not None:
                    timer.cancel()
                if group.is_(PR):
                    self._try_complete_join(group)
                results.append(ErrorCode.NONE)
                continue
            error = group.member_error(member_id, instance_id)
            if error is ErrorCode.NONE:
                self._remove_member(group, group.members[member_id], "left the group")
            results.append(error)
        return ErrorCode.NONE, results, self._take()

    # -- membership ------------------------------------------------------------------
    def touch(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        """Restarts the member's session timer."""
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        member.last_heartbeat_ms = self._now()
        member_id = member.member_id
        member.heartbeat_timer = self._schedule(
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._session_expired(group, member, member_id))

    def _session_expired(self, group: ClassicGroup, member: Member, member_id: str) -> None:
        if group.members.get(member_id) is not member:
            return
        if (member.awaiting_join and not member.is_new) or member.awaiting_sync:
            self.touch(group, member)  # a parked member is alive
            return
        self._remove_member(group, member, "session timed out")

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None and group.is_(PR):
            self._try_complete_join(group)

    def _remove_member(self, group: ClassicGroup, member: Member, reason: str,
                       rebalance: bool = True) -> None:
        log.info("group %s: removing member %s: %s", group.group_id, member.member_id, reason)
        if member.join_callback is not None:
            member.join_callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                            member_id=member.member_id))
            member.join_callback = None
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            member.sync_callback = None
        group.remove_member(member.member_id)
        if not rebalance:
            return
        if group.state in (ST, CR):
            self._prepare_rebalance(group, f"{member.member_id} {reason}")
        elif group.is_(PR):
            self._try_complete_join(group)

    def restore(self, group: ClassicGroup) -> None:
        """A group loaded from `__consumer_offsets`: its members must heartbeat in time."""
        for member in group.members.values():
            self.touch(group, member)

    def remove_all(self, group: ClassicGroup) -> None:
        """Drops every member and timer of a group (the group is unloaded or deleted)."""
        for member in list(group.members.values()):
            if member.join_callback is not None:
                member.join_callback(JoinResult(ErrorCode.NOT_COORDINATOR,
                                                member_id=member.member_id))
            if member.sync_callback is not None:
                member.sync_callback(SyncResult(ErrorCode.NOT_COORDINATOR))
            member.join_callback = member.sync_callback = None
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
        for timer in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            if timer is not None:
                timer.cancel()
