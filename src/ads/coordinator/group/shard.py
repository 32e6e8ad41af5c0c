"""The groups and committed offsets of one `__consumer_offsets` partition.

A shard is the state machine the coordinator runtime keeps for each partition it leads
(`ads.coordinator.runtime`): rebuilt by replaying the partition's records when it is
loaded, it holds the classic and KIP-848 groups whose ids hash to the partition and their
committed offsets (`offsets.py`), and answers the group APIs for them. Every change to
`__consumer_offsets` (commits, group metadata, KIP-848 group records, tombstones) is
returned as a `Write`; the offset cache and the KIP-848 groups change when the write's
records are replayed (`replay`, as at load), classic groups in its continuation, once
the record is committed, so a reload rebuilds exactly what clients were told. The facade
(`coordinator.py`) has already checked the group id and that the partition is loaded.

Loading keeps the last record of each key (a tombstone deletes), then restores the groups:
a classic group whose metadata record has members comes back Stable with them, a KIP-848
group with its members, epochs and assignments (`consumer.py`), and their members must
heartbeat within their session timeout; a group with offsets but no metadata record comes
back as an Empty classic group. Not thread-safe: the broker's event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ads.common.partitions import TopicPartition
from ads.coordinator.group import consumer_state
from ads.coordinator.group import records as rec
from ads.coordinator.group.api import (
    CommittedOffset,
    ConsumerGroupDescription,
    DescribedMember,
    FetchedOffset,
    GroupConfig,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    HeartbeatResult,
    JoinCallback,
    JoinRequest,
    JoinResult,
    OffsetCommit,
    SyncCallback,
)
from ads.coordinator.group.classic import ClassicGroup
from ads.coordinator.group.consumer import (
    ConsumerGroup,
    ConsumerGroupManager,
    PendingHeartbeat,
)
from ads.coordinator.group.consumer_state import JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from ads.coordinator.group.offsets import OffsetStore, commit_records, tombstones
from ads.coordinator.group.rebalance import ClassicRebalancer
from ads.coordinator.group.share import ShareGroup, ShareGroupManager
from ads.coordinator.group.state import GroupState, commit_error
from ads.coordinator.group.txn_offsets import PendingTxnOffsets
from ads.coordinator.runtime import Record, Write
from ads.coordinator.timer import Timers
from ads.coordinator.topic import TopicMetadata
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")

Group = ClassicGroup | ConsumerGroup | ShareGroup


class GroupShard:
    def __init__(self, partition: int, timers: Timers[Write], config: GroupConfig,
                 topics: TopicMetadata) -> None:
        self.partition = partition
        self.timers = timers
        self.clock = timers.clock
        self.config = config
        self.topics = topics
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.pending_txn = PendingTxnOffsets()
        self.classic = ClassicRebalancer(timers, config)
        self.consumer = ConsumerGroupManager(timers, config, topics, self._consumer_group)
        self.share = ShareGroupManager(timers, config, topics)
        # While loading: the last group metadata record of each group, restored by
        # `on_loaded` (None once loaded).
        self._loaded_groups: dict[str, m.GroupMetadataValue | None] | None = {}

    # -- replaying records (loading, and each write once committed) ------------------
    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        try:
            parsed = rec.parse_key(key)
            if isinstance(parsed, rec.OffsetKey):
                tp = TopicPartition(parsed.topic, parsed.partition)
                if value is None:
                    self.offsets.remove(parsed.group, tp)
                else:
                    self.offsets.put(parsed.group, tp, rec.parse_offset_value(value))
            elif isinstance(parsed, rec.GroupKey) and self._loaded_groups is not None:
                # Live, a classic group's record is written from the group in memory, which
                # the rebalancer changes in the write's continuation: only a load reads it.
                self._loaded_groups[parsed.group] = (
                    None if value is None else rec.parse_group_value(value))
            elif isinstance(parsed, rec.ConsumerKey):
                self._replay_consumer(parsed, value)
        except rec.CoordinatorRecordError as exc:
            log.warning("skipping a bad record at offset %d of %s-%d: %s", offset,
                        rec.OFFSETS_TOPIC, self.partition, exc)

    def _replay_consumer(self, key: rec.ConsumerKey, value: bytes | None) -> None:
        """A KIP-848 group's record: its first record makes the group (in place of an
        empty group of another type, which it converts), its epoch's tombstone ends it."""
        group = self.groups.get(key.group)
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return
            group = ConsumerGroup(key.group, current_state_timestamp=self.clock.time_ms())
            self.groups[key.group] = group
        if self.consumer.replay(group, key, value):
            self.consumer.remove_all(group)
            del self.groups[key.group]

    def _consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def replay_transactional(self, producer_id: int, offset: int, key: bytes,
                             value: bytes | None) -> None:
        try:
            parsed = rec.parse_key(key)
            if isinstance(parsed, rec.OffsetKey) and value is not None:
                self.pending_txn.add(producer_id, parsed.group,
                                     TopicPartition(parsed.topic, parsed.partition),
                                     rec.parse_offset_value(value))
        except rec.CoordinatorRecordError as exc:
            log.warning("skipping a bad record at offset %d of %s-%d: %s", offset,
                        rec.OFFSETS_TOPIC, self.partition, exc)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """The transaction of `producer_id` ended: its offsets count (COMMIT) or go."""
        for (group_id, tp), committed in self.pending_txn.end(producer_id).items():
            if commit:
                self.offsets.put(group_id, tp, committed)
                if self._loaded_groups is None and group_id not in self.groups:
                    self._new_classic_group(group_id)

    def on_loaded(self) -> list[Write]:
        for group in list(self.groups.values()):
            if isinstance(group, ConsumerGroup):
                self.consumer.restore(group)
        for group_id, value in (self._loaded_groups or {}).items():
            if value is not None:
                group = ClassicGroup.from_record(group_id, value)
                self.classic.restore(group)
                self.groups[group_id] = group
        for group_id in self.offsets.groups():
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id)
        self._loaded_groups = None
        self._schedule_expiry()
        return []

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                self.classic.remove_all(group)
            elif isinstance(group, ShareGroup):
                self.share.remove_all(group)
            else:
                self.consumer.remove_all(group)
        self.groups.clear()
        self.consumer.unloaded()
        self.offsets = OffsetStore()
        self.pending_txn.clear()

    def _new_classic_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, current_state_timestamp=self.clock.time_ms())
        self.groups[group_id] = group
        return group

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    # -- classic membership ----------------------------------------------------------
    def join(self, req: JoinRequest, callback: JoinCallback) -> list[Write]:
        def fail(code: ErrorCode) -> list[Write]:
            callback(JoinResult(code, member_id=req.member_id))
            return []

        error = self.classic.join_error(req)
        if error is not ErrorCode.NONE:
            return fail(error)
        existing = self.groups.get(req.group_id)
        converted: list[Write] = []
        if isinstance(existing, ConsumerGroup | ShareGroup):
            if existing.members:
                return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            # An empty KIP-848 group (offsets only) becomes a classic group again; its
            # records go, so that a reload does not bring it back.
            if isinstance(existing, ConsumerGroup):
                converted.append(Write(existing.tombstones()))
            del self.groups[req.group_id]
            existing = None
        group = existing
        if group is None:
            if req.member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self._new_classic_group(req.group_id)
        return converted + self.classic.join(group, req, callback)

    def sync(self, group_id: str, generation_id: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], callback: SyncCallback) -> list[Write]:
        return self.classic.sync(self._classic(group_id), generation_id, member_id,
                                 instance_id, protocol_type, protocol_name, assignments,
                                 callback)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        return self.classic.heartbeat(self._classic(group_id), generation_id, member_id,
                                      instance_id)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode], list[Write]]:
        return self.classic.leave(self._classic(group_id), members)

    # -- KIP-848 consumer groups -----------------------------------------------------
    def consumer_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult | PendingHeartbeat:
        """The answer, or the write to perform first (its continuation sets the answer)."""
        checked = self.consumer.check(req)
        if checked is not None:
            return checked
        group = self.groups.get(req.group_id)
        before: list[Record] = []
        if group is not None and not isinstance(group, ConsumerGroup):
            if group.members or req.member_epoch != JOIN_EPOCH:
                return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Group {req.group_id} is not a consumer group.")
            # An empty classic group (only offsets) becomes a consumer group: the classic
            # record goes, so that a reload does not bring it back.
            if isinstance(group, ClassicGroup):
                before.append((rec.group_key(req.group_id), None))
            group = None
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self.consumer.leave(group, req)
        if group is None:
            if req.member_epoch != JOIN_EPOCH:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            # Not in the shard until its records are replayed.
            group = ConsumerGroup(req.group_id, current_state_timestamp=self.clock.time_ms())
        return self.consumer.heartbeat(group, req, before)

    def after_consumer_write(self, group_id: str, wake: Callable[[], None]) -> bool:
        """Calls `wake` once the consumer group's write on its way is committed; False:
        none is on its way (a heartbeat may be computed now)."""
        def action() -> list[Write]:
            wake()
            return []

        return self.consumer.after_write(group_id, action)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return ConsumerGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                            f"Group {group_id} is not a consumer group.")
        return self.consumer.describe(group)

    # -- KIP-932 share groups --------------------------------------------------------
    def share_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is not None and not isinstance(group, ShareGroup):
            if not group.is_empty or req.member_epoch != JOIN_EPOCH:
                return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Group {req.group_id} is not a share group.")
            group = None  # a group without members (only offsets) becomes a share group
        if req.member_epoch == LEAVE_EPOCH:
            return self.share.leave(group, req)
        if group is None:
            if req.member_epoch != JOIN_EPOCH:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            group = ShareGroup(req.group_id, current_state_timestamp=self.clock.time_ms())
            self.groups[req.group_id] = group
        return self.share.heartbeat(group, req)

    def describe_share_group(self, group_id: str) -> ConsumerGroupDescription:
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return ConsumerGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                            f"Group {group_id} is not a share group.")
        return self.share.describe(group)

    def share_offsets_changeable(self, group_id: str, create: bool
                                 ) -> tuple[ErrorCode, str | None]:
        """Whether a share group's offsets may be altered or deleted now: only without
        members (NON_EMPTY_GROUP), as Kafka's coordinator rules. `create`: an unknown id
        becomes an empty share group (AlterShareGroupOffsets, as Kafka)."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            self.groups[group_id] = ShareGroup(group_id,
                                               current_state_timestamp=self.clock.time_ms())
            return ErrorCode.NONE, None
        if not isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        if not group.is_empty:
            return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
        return ErrorCode.NONE, None

    def share_topics(self, group_id: str, added: Iterable[str] = (),
                     removed: Iterable[str] = ()) -> set[str]:
        """The share group's topics (`ShareGroup.topics`), after recording offsets altered
        (`added`) or deleted (`removed`); empty for an unknown group."""
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return set()
        group.topics.update(added)
        group.topics.difference_update(removed)
        return set(group.topics)

    # -- offsets ---------------------------------------------------------------------
    def _commit_error(self, group: Group | None, generation: int, member_id: str,
                      instance_id: str | None, api_version: int) -> ErrorCode | None:
        """The error of a whole commit (`state.py`'s order); None: commit (creating a
        simple group if needed)."""
        if group is None:
            if generation < 0:
                return None
            return (ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9
                    else ErrorCode.ILLEGAL_GENERATION)
        if isinstance(group, ShareGroup):  # share groups keep no committed offsets
            return ErrorCode.GROUP_ID_NOT_FOUND
        if isinstance(group, ConsumerGroup):
            error = consumer_state.commit_error(group.member_epoch(member_id), member_id,
                                                generation, group.is_empty)
            return None if error is ErrorCode.NONE else error
        return commit_error(group.state, generation, group.generation_id, member_id,
                            instance_id, group.member_error(member_id, instance_id))

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, retention_ms: int, commits: list[OffsetCommit],
                       api_version: int = 0) -> tuple[list[ErrorCode], Write | None]:
        """Per-commit errors, and the write of the accepted ones (None: nothing to write);
        the cache takes them once they are committed."""
        error = self._commit_error(self.groups.get(group_id), generation, member_id,
                                   instance_id, api_version)
        if error is not None:
            return [error] * len(commits), None
        now = self.clock.time_ms()
        results, accepted = self._accept(commits, now,
                                         now + retention_ms if retention_ms >= 0 else -1)
        if not accepted:
            return results, None

        def committed(error: ErrorCode) -> list[Write]:
            # The offsets entered the cache when the records were replayed.
            if error is not ErrorCode.NONE:
                return []
            group = self.groups.get(group_id) or self._new_classic_group(group_id)
            if isinstance(group, ClassicGroup) and group.has_member(member_id):
                self.classic.touch(group, group.members[member_id])
            return []

        return results, Write(commit_records(group_id, accepted), committed,
                              ErrorCode.INVALID_COMMIT_OFFSET_SIZE)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation: int, member_id: str, instance_id: str | None,
                           commits: list[OffsetCommit]) -> tuple[list[ErrorCode], Write | None]:
        """TxnOffsetCommit: as `commit_offsets`, but the offsets wait for the transaction's
        marker (`txn_offsets.py`); a group that is rebalancing takes them all the same, as
        in Kafka."""
        group = self.groups.get(group_id)
        error = None if group is None or generation < 0 else self._commit_error(
            group, generation, member_id, instance_id, 9)
        if error is not None and error is not ErrorCode.REBALANCE_IN_PROGRESS:
            return [error] * len(commits), None
        results, accepted = self._accept(commits, self.clock.time_ms(), -1)
        if not accepted:
            return results, None
        # Replayed once committed, the records leave the offsets pending until the marker.
        return results, Write(commit_records(group_id, accepted), None,
                              ErrorCode.INVALID_COMMIT_OFFSET_SIZE, producer_id, producer_epoch)

    def _accept(self, commits: list[OffsetCommit], now: int, expire: int
                ) -> tuple[list[ErrorCode], list[tuple[TopicPartition, CommittedOffset]]]:
        results: list[ErrorCode] = []
        accepted: list[tuple[TopicPartition, CommittedOffset]] = []
        for c in commits:
            count = self.topics.topic_partitions(c.topic)
            metadata = c.metadata or ""
            if count is None or not 0 <= c.partition < count:
                results.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif len(metadata) > self.config.offset_metadata_max_bytes:
                results.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            else:
                results.append(ErrorCode.NONE)
                accepted.append((TopicPartition(c.topic, c.partition), CommittedOffset(
                    c.offset, c.leader_epoch, metadata, now, expire)))
        return results, accepted

    def unstable(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction holds an offset of the partition not yet committed."""
        return self.pending_txn.pending(group_id, tp)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      member_id: str | None, member_epoch: int
                      ) -> tuple[ErrorCode, list[FetchedOffset]]:
        group = self.groups.get(group_id)
        if member_id is not None and isinstance(group, ConsumerGroup):
            error = consumer_state.fetch_error(group.member_epoch(member_id), member_epoch)
            if error is not ErrorCode.NONE:
                return error, []
        committed = self.offsets.get(group_id)
        if partitions is None:
            return ErrorCode.NONE, sorted(committed.items())
        return ErrorCode.NONE, [(tp, committed.get(tp)) for tp in partitions]

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                       ) -> tuple[ErrorCode, list[ErrorCode], Write | None]:
        """The group's error, one error per partition, and the tombstones to write."""
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.is_(GroupState.DEAD)):
            return ErrorCode.GROUP_ID_NOT_FOUND, [], None
        if isinstance(group, ClassicGroup) and not group.is_empty and group.protocol_type != (
                "consumer"):
            return ErrorCode.NON_EMPTY_GROUP, [], None
        subscribed = set() if group.is_empty else (group.subscribed_topics() or set())
        results, doomed = [], []
        for tp in partitions:
            topic, partition = tp
            count = self.topics.topic_partitions(topic)
            if count is None or not 0 <= partition < count:
                results.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif topic in subscribed:
                results.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            else:
                results.append(ErrorCode.NONE)
                if tp in self.offsets.get(group_id):
                    doomed.append(tp)
        if not doomed:
            return ErrorCode.NONE, results, None

        # The offsets leave the cache when the tombstones are replayed.
        return ErrorCode.NONE, results, Write(tombstones(group_id, doomed))

    # -- describe, list, delete ------------------------------------------------------
    def describe_group(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, ErrorCode.NONE)
        if isinstance(group, ConsumerGroup | ShareGroup):
            return GroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND)
        stable = group.is_(GroupState.STABLE)
        members = [DescribedMember(
            mem.member_id, mem.group_instance_id, mem.client_id, mem.client_host,
            mem.metadata_for(group.protocol_name or "") if stable else b"",
            mem.assignment if stable else b"") for mem in group.members.values()]
        return GroupDescription(group_id, ErrorCode.NONE, group.state.value,
                                group.protocol_type or "",
                                (group.protocol_name or "") if stable else "", members)

    def list_groups(self, states: set[str], types: set[str]) -> list[GroupListing]:
        """Groups whose state and type (lower case) are in the filters (empty: any)."""
        out = []
        for group in self.groups.values():
            state = group.state.value
            if state == "Dead":
                continue
            if states and state.lower() not in states:
                continue
            if types and group.group_type not in types:
                continue
            out.append(GroupListing(group.group_id, group.protocol_type or "", state,
                                    group.group_type))
        return out

    def delete_group(self, group_id: str) -> tuple[ErrorCode, Write | None]:
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.is_(GroupState.DEAD)):
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        if not group.is_empty or self.consumer.writing(group_id):
            return ErrorCode.NON_EMPTY_GROUP, None
        return ErrorCode.NONE, self._removal(group)

    def _removal(self, group: Group) -> Write:
        """The tombstones of an empty group and its offsets (the offsets leave the cache
        as they are replayed); it is dropped once they are committed, unless members joined
        or offsets were committed meanwhile (those are in the log: a reload keeps them)."""
        group_id = group.group_id
        records = tombstones(group_id, self.offsets.get(group_id))
        if isinstance(group, ConsumerGroup):
            records += group.tombstones()
        records.append((rec.group_key(group_id), None))

        def removed(error: ErrorCode) -> list[Write]:
            if error is not ErrorCode.NONE or self.groups.get(group_id) is not group or (
                    not group.is_empty) or self.offsets.has_offsets(group_id):
                return []
            if isinstance(group, ClassicGroup):
                group.transition(GroupState.DEAD, self.clock.time_ms())
                self.classic.remove_all(group)
            del self.groups[group_id]
            log.info("group %s deleted", group_id)
            return []

        return Write(records, removed)

    # -- expiry ----------------------------------------------------------------------
    def _schedule_expiry(self) -> None:
        def due() -> list[Write]:
            self._schedule_expiry()
            return self.expire_offsets()

        self.timers.schedule(self.config.offsets_retention_check_interval_ms, due)

    def expire_offsets(self) -> list[Write]:
        """Tombstones for expired offsets, and removals of empty groups left without any
        (`offsets.retention.minutes`; the rules are in the header of `offsets.py`)."""
        now = self.clock.time_ms()
        retention = self.config.offsets_retention_ms
        writes = []
        for group_id in list(self.offsets.groups()):
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
            if doomed:
                writes.append(Write(tombstones(group_id, doomed), self._expired(group_id, doomed)))
        for group in list(self.groups.values()):
            if self._removable(group):
                writes.append(self._removal(group))
        return writes

    def _expired(self, group_id: str, doomed: list[TopicPartition]
                 ) -> Callable[[ErrorCode], list[Write]]:
        def expired(error: ErrorCode) -> list[Write]:
            if error is not ErrorCode.NONE:
                return []
            log.info("expired %d offsets of group %s", len(doomed), group_id)
            group = self.groups.get(group_id)
            return [self._removal(group)] if group is not None and self._removable(group) else []

        return expired

    def _removable(self, group: Group) -> bool:
        """An empty group without offsets (nor members about to join) goes away."""
        if isinstance(group, ClassicGroup) and (
                not group.is_(GroupState.EMPTY) or group.pending_members):
            return False
        return group.is_empty and not self.offsets.has_offsets(group.group_id) and (
            not self.consumer.writing(group.group_id))
