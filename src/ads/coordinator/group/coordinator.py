"""The group coordinator and offset manager: the one object the broker's handlers call.

It owns the groups (classic and KIP-848) and the offset cache of the `__consumer_offsets`
partitions this broker leads, routes each group to its partition
(`abs(java hash(group id)) % partitions`), answers COORDINATOR_LOAD_IN_PROGRESS for groups
of a partition still being loaded, and writes every change (commits, group metadata,
tombstones) through the `CoordinatorLog` before acknowledging it.

Used from the broker's event loop only; `tick` runs the timers and offset expiry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ads.common.clock import Clock
from ads.coordinator import records as rec
from ads.coordinator.group.classic import (
    ClassicGroup,
    JoinCallback,
    JoinResult,
    Member,
    SyncCallback,
    SyncResult,
)
from ads.coordinator.group.consumer import ConsumerGroup, ConsumerGroupManager
from ads.coordinator.group.rebalance import ClassicRebalancer, JoinRequest
from ads.coordinator.group.state import MEMBER_COMMIT, GroupState, initial_state
from ads.coordinator.log import AppendError, CoordinatorLog, partition_for
from ads.coordinator.offsets import OffsetStore, TopicPartition, commit_records, tombstones
from ads.coordinator.timer import Timers
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch, decode_records, read_batch_header
from ads.records.errors import RecordError

log = logging.getLogger("ads.coordinator")

Group = ClassicGroup | ConsumerGroup
FetchedOffset = tuple[TopicPartition, rec.CommittedOffset | None]
_MAX_LOAD_BATCH_BYTES = 64 * 1024 * 1024

# How append failures reach the client (Kafka's GroupMetadataManager mapping).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[DescribedMember] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


class GroupCoordinator:
    def __init__(self, log_: CoordinatorLog, clock: Clock, config: GroupConfig | None = None
                 ) -> None:
        self.log = log_
        self.clock = clock
        self.config = config or GroupConfig()
        self.timers = Timers(clock)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.classic = ClassicRebalancer(self)
        self.consumer = ConsumerGroupManager(self)
        self._loading: set[int] = set()
        self._next_expiry_ms = clock.time_ms() + self.config.offsets_retention_check_interval_ms

    # -- partitions and loading ------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.log.partition_count())

    def startup(self) -> list[int]:
        """Marks every partition of an existing internal topic as loading; returns them."""
        if not self.log.exists():
            return []
        partitions = list(range(self.log.partition_count()))
        for p in partitions:
            self.mark_loading(p)
        return partitions

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def mark_loading(self, partition: int) -> None:
        """Becoming coordinator of `partition`: its groups answer LOAD_IN_PROGRESS."""
        self._loading.add(partition)
        self._drop_partition(partition)

    def _drop_partition(self, partition: int) -> None:
        for group_id in [g for g in self.groups if self.partition_of(g) == partition]:
            self._forget(group_id)
        for group_id in list(self.offsets.groups()):
            if self.partition_of(group_id) == partition:
                self.offsets.remove_group(group_id)

    def load_partition(self, partition: int) -> None:
        """Replays the partition into the cache and the groups, then serves its groups."""
        offsets: dict[tuple[str, TopicPartition], rec.CommittedOffset | None] = {}
        metadata: dict[str, object] = {}
        for batch in self.log.read_batches(partition):
            try:
                if read_batch_header(batch).is_control:
                    continue
                records = decode_records(batch, max_uncompressed_bytes=_MAX_LOAD_BATCH_BYTES)
            except RecordError as exc:
                log.warning("skipping a bad batch of __consumer_offsets-%d: %s", partition, exc)
                continue
            for r in records:
                if r.key is None:
                    continue
                try:
                    key = rec.parse_key(r.key)
                    if isinstance(key, rec.OffsetKey):
                        offsets[(key.group, (key.topic, key.partition))] = (
                            None if r.value is None else rec.parse_offset_value(r.value))
                    elif isinstance(key, rec.GroupKey):
                        metadata[key.group] = (
                            None if r.value is None else rec.parse_group_value(r.value))
                except rec.CoordinatorRecordError as exc:
                    log.warning("skipping a bad record at offset %d of __consumer_offsets-%d:"
                                " %s", r.offset, partition, exc)
        self._drop_partition(partition)
        for (group_id, tp), committed in offsets.items():
            if committed is not None:
                self.offsets.put(group_id, tp, committed)
        for group_id, value in metadata.items():
            if value is not None:
                self.groups[group_id] = self._restore(group_id, value)
        for group_id in self.offsets.groups():
            if group_id not in self.groups and self.partition_of(group_id) == partition:
                self.groups[group_id] = ClassicGroup(group_id)
        self._loading.discard(partition)
        log.info("loaded __consumer_offsets-%d", partition)

    def _restore(self, group_id: str, value: object) -> ClassicGroup:
        from ads.protocol.messages import GroupMetadataValue

        assert isinstance(value, GroupMetadataValue)
        group = ClassicGroup(
            group_id, initial_state(bool(value.members)), value.generation,
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
            self.classic.touch(group, member)
        return group

    def _forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if isinstance(group, ClassicGroup):
            self.classic.remove_all(group)
        elif group is not None:
            self.consumer.remove_all(group)

    def shutdown(self) -> None:
        for group_id in list(self.groups):
            self._forget(group_id)

    # -- checks shared by every group API --------------------------------------------
    def group_error(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode:
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        if self.partition_of(group_id) in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def new_classic_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, current_state_timestamp=self.clock.time_ms())
        self.groups[group_id] = group
        return group

    # -- writes ----------------------------------------------------------------------
    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                too_large: ErrorCode) -> ErrorCode:
        if not records:
            return ErrorCode.NONE
        try:
            self.log.ensure_created()
            batch = build_batch(records, timestamp=self.clock.time_ms())
            self.log.append(self.partition_of(group_id), batch)
        except AppendError as exc:
            code = _APPEND_ERRORS.get(exc.code, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code is ErrorCode.INVALID_COMMIT_OFFSET_SIZE:
                code = too_large
            log.warning("append for group %s failed: %s", group_id, exc)
            return code
        return ErrorCode.NONE

    def store_group(self, group: ClassicGroup) -> ErrorCode:
        """Writes the group metadata record (generation, members and assignments)."""
        value = rec.group_value(group.to_record_value())
        return self._append(group.group_id, [(rec.group_key(group.group_id), value)],
                            ErrorCode.UNKNOWN_SERVER_ERROR)

    # -- classic membership ----------------------------------------------------------
    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        error = self.group_error(req.group_id)
        if error is not ErrorCode.NONE:
            callback(JoinResult(error, member_id=req.member_id))
            return
        self.classic.join(req, callback)

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes],
                   callback: SyncCallback) -> None:
        error = self.group_error(group_id)
        if error is not ErrorCode.NONE:
            callback(SyncResult(error))
            return
        self.classic.sync(group_id, generation_id, member_id, instance_id, protocol_type,
                          protocol_name, assignments, callback)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        error = self.group_error(group_id)
        if error is not ErrorCode.NONE:
            return error
        return self.classic.heartbeat(group_id, generation_id, member_id, instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self.group_error(group_id)
        if error is not ErrorCode.NONE:
            return error, []
        return self.classic.leave(group_id, members)

    # -- offsets ---------------------------------------------------------------------
    def _commit_error(self, group: Group | None, generation: int, member_id: str,
                      instance_id: str | None) -> ErrorCode | None:
        """The error of a whole commit; None: commit (creating a simple group if needed)."""
        if group is None:
            return None if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if isinstance(group, ConsumerGroup):
            return self.consumer.commit_error(group, member_id, generation)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        static_id = group.static_member_id(instance_id)
        if static_id is not None and static_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if generation < 0 and group.is_(GroupState.EMPTY):
            return None
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        if not group.has_member(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return MEMBER_COMMIT[group.state]

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, retention_ms: int,
                       commits: list[OffsetCommit]) -> list[ErrorCode]:
        """Per-commit errors, in order; acknowledged only once the batch is appended."""
        error = self.group_error(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if error is ErrorCode.NONE:
            error = self._commit_error(group, generation, member_id, instance_id) or error
        if error is not ErrorCode.NONE:
            return [error] * len(commits)
        now = self.clock.time_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        results: list[ErrorCode] = []
        accepted: list[tuple[TopicPartition, rec.CommittedOffset]] = []
        for c in commits:
            count = self.log.topic_partitions(c.topic)
            metadata = c.metadata or ""
            if count is None or not 0 <= c.partition < count:
                results.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif len(metadata) > self.config.offset_metadata_max_bytes:
                results.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            else:
                results.append(ErrorCode.NONE)
                accepted.append(((c.topic, c.partition), rec.CommittedOffset(
                    c.offset, c.leader_epoch, metadata, now, expire)))
        error = self._append(group_id, commit_records(group_id, accepted),
                             ErrorCode.INVALID_COMMIT_OFFSET_SIZE)
        if error is not ErrorCode.NONE:
            return [error if r is ErrorCode.NONE else r for r in results]
        if group is None and accepted:
            group = self.new_classic_group(group_id)
        for tp, committed in accepted:
            self.offsets.put(group_id, tp, committed)
        if isinstance(group, ClassicGroup) and group.has_member(member_id):
            self.classic.touch(group, group.members[member_id])
        return results

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, list[FetchedOffset]]:
        error = self.group_error(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if error is ErrorCode.NONE and member_id is not None and isinstance(group, ConsumerGroup):
            error = self.consumer.fetch_error(group, member_id, member_epoch)
        if error is not ErrorCode.NONE:
            return error, []
        committed = self.offsets.get(group_id)
        if partitions is None:
            return ErrorCode.NONE, sorted(committed.items())
        return ErrorCode.NONE, [(tp, committed.get(tp)) for tp in partitions]

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                       ) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self.group_error(group_id)
        if error is not ErrorCode.NONE:
            return error, []
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.is_(GroupState.DEAD)):
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if isinstance(group, ClassicGroup) and not group.is_empty and group.protocol_type != (
                "consumer"):
            return ErrorCode.NON_EMPTY_GROUP, []
        subscribed = set() if group.is_empty else (group.subscribed_topics() or set())
        results, doomed = [], []
        for topic, partition in partitions:
            count = self.log.topic_partitions(topic)
            if count is None or not 0 <= partition < count:
                results.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif topic in subscribed:
                results.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            else:
                results.append(ErrorCode.NONE)
                if (topic, partition) in self.offsets.get(group_id):
                    doomed.append((topic, partition))
        error = self._append(group_id, tombstones(group_id, doomed),
                             ErrorCode.UNKNOWN_SERVER_ERROR)
        if error is not ErrorCode.NONE:
            return error, []
        for tp in doomed:
            self.offsets.remove(group_id, tp)
        return ErrorCode.NONE, results

    # -- describe, list, delete ------------------------------------------------------
    def describe_group(self, group_id: str) -> GroupDescription:
        error = self.group_error(group_id, allow_empty=True)
        if error is not ErrorCode.NONE:
            return GroupDescription(group_id, error)
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, ErrorCode.NONE)
        if isinstance(group, ConsumerGroup):
            return GroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND)
        stable = group.is_(GroupState.STABLE)
        members = [DescribedMember(
            mem.member_id, mem.group_instance_id, mem.client_id, mem.client_host,
            mem.metadata_for(group.protocol_name or "") if stable else b"",
            mem.assignment if stable else b"") for mem in group.members.values()]
        return GroupDescription(group_id, ErrorCode.NONE, group.state.value,
                                group.protocol_type or "",
                                (group.protocol_name or "") if stable else "", members)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> list[GroupListing]:
        states_l = {s.lower() for s in states}
        types_l = {t.lower() for t in types}
        out = []
        for group in self.groups.values():
            state = group.state.value if isinstance(group, ClassicGroup) else group.state_name
            if state == "Dead" or self.partition_of(group.group_id) in self._loading:
                continue
            if states_l and state.lower() not in states_l:
                continue
            if types_l and group.group_type not in types_l:
                continue
            out.append(GroupListing(group.group_id, group.protocol_type or "", state,
                                    group.group_type))
        return out

    def delete_groups(self, group_ids: list[str]) -> list[ErrorCode]:
        return [self._delete_group(g) for g in group_ids]

    def _delete_group(self, group_id: str) -> ErrorCode:
        error = self.group_error(group_id)
        if error is not ErrorCode.NONE:
            return error
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.is_(GroupState.DEAD)):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_empty:
            return ErrorCode.NON_EMPTY_GROUP
        return self._remove_group(group)

    def _remove_group(self, group: Group) -> ErrorCode:
        group_id = group.group_id
        records = tombstones(group_id, self.offsets.get(group_id))
        records.append((rec.group_key(group_id), None))
        error = self._append(group_id, records, ErrorCode.UNKNOWN_SERVER_ERROR)
        if error is not ErrorCode.NONE:
            return error
        if isinstance(group, ClassicGroup):
            group.transition(GroupState.DEAD, self.clock.time_ms())
        self._forget(group_id)
        self.offsets.remove_group(group_id)
        log.info("group %s deleted", group_id)
        return ErrorCode.NONE

    # -- time ------------------------------------------------------------------------
    def tick(self) -> None:
        """Runs due timers; expires offsets every `offsets.retention.check.interval.ms`."""
        self.timers.run_due()
        now = self.clock.time_ms()
        if now >= self._next_expiry_ms:
            self._next_expiry_ms = now + self.config.offsets_retention_check_interval_ms
            self.expire_offsets()

    def expire_offsets(self) -> int:
        """Tombstones expired offsets; removes empty groups left without any. Returns the
        number of offsets expired."""
        now = self.clock.time_ms()
        retention = self.config.offsets_retention_ms
        expired_total = 0
        for group_id in list(self.offsets.groups()):
            if self.partition_of(group_id) in self._loading:
                continue
            group = self.groups.get(group_id)
            empty_since: int | None
            if group is None or group.is_empty:
                empty_since = (group.current_state_timestamp
                               if group is not None and group.protocol_type else None)
                subscribed = None
            else:
                subscribed = group.subscribed_topics()
                if subscribed is None:
                    continue
                empty_since = None
            doomed = self.offsets.expired(group_id, now, retention, empty_since, subscribed)
            if not doomed:
                continue
            if self._append(group_id, tombstones(group_id, doomed),
                            ErrorCode.UNKNOWN_SERVER_ERROR) is not ErrorCode.NONE:
                continue
            for tp in doomed:
                self.offsets.remove(group_id, tp)
            expired_total += len(doomed)
            log.info("expired %d offsets of group %s", len(doomed), group_id)
        for group in list(self.groups.values()):
            if isinstance(group, ClassicGroup) and (
                    not group.is_(GroupState.EMPTY) or group.pending_members):
                continue
            if group.is_empty and not self.offsets.has_offsets(group.group_id) and (
                    self.partition_of(group.group_id) not in self._loading):
                self._remove_group(group)
        return expired_total

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> None:
        self.timers.schedule(delay_ms, fn)
