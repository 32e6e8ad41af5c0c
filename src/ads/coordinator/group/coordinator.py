"""The group coordinator: the one object the broker's group handlers call.

It routes each group to its `__consumer_offsets` partition (`abs(java hash(group id)) %
partitions`) and that partition's shard (`shard.py`) through the coordinator runtime
(`ads.coordinator.runtime`), which loads the partitions this broker leads and answers
COORDINATOR_LOAD_IN_PROGRESS for a partition still loading and NOT_COORDINATOR for one it
does not lead. The writes a shard asks for go through the runtime: the requests that wait
for theirs (OffsetCommit, OffsetDelete, DeleteGroups, ConsumerGroupHeartbeat) are
coroutines, JoinGroup and
SyncGroup answer through a callback (their answer may wait for other members too), and the
others answer at once.

Its values (requests, results, descriptions, `GroupConfig`) are in `api.py`. The broker
wires it (`ads.broker.coordinators`): it hands it the `__consumer_offsets` topic and the
topic metadata, tells `runtime` which partitions it leads, and runs `tick` at
`next_deadline_ms` (the runtime's `wakeup` tells it of earlier deadlines).
Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable

from ads.common.clock import Clock
from ads.common.partitions import TopicPartition
from ads.coordinator.group.api import (
    ConsumerGroupDescription,
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
    SyncResult,
)
from ads.coordinator.group.consumer_state import invalid_heartbeat
from ads.coordinator.group.shard import Group, GroupShard
from ads.coordinator.group.share import invalid_share_heartbeat
from ads.coordinator.runtime import CoordinatorRuntime, RuntimeCoordinator, Write
from ads.coordinator.timer import Timers
from ads.coordinator.topic import InternalTopic, TopicMetadata
from ads.protocol.errors import ErrorCode


class GroupCoordinator(RuntimeCoordinator[GroupShard]):
    def __init__(self, topic: InternalTopic, topics: TopicMetadata, clock: Clock,
                 config: GroupConfig | None = None) -> None:
        self.config = config or GroupConfig()
        self.topics = topics
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            topic, clock, self._new_shard)

    def _new_shard(self, partition: int, timers: Timers[Write]) -> GroupShard:
        return GroupShard(partition, timers, self.config, self.topics)

    def partition_of(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    @property
    def groups(self) -> dict[str, Group]:
        """The groups of every loaded partition, for inspection (tools and tests)."""
        return {gid: g for _, shard in self.runtime.shards() for gid, g in shard.groups.items()}

    def _route(self, group_id: str | None, allow_empty: bool = False
               ) -> tuple[int, GroupShard] | ErrorCode:
        """The partition and shard of a group, or the error its requests get."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_of(group_id)
        shard = self.runtime.shard(partition)
        return (partition, shard) if shard is not None else self.runtime.error(partition)

    # -- classic membership ----------------------------------------------------------
    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        routed = self._route(req.group_id)
        if isinstance(routed, ErrorCode):
            callback(JoinResult(routed, member_id=req.member_id))
            return
        partition, shard = routed
        self.runtime.submit(partition, shard.join(req, callback))

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes],
                   callback: SyncCallback) -> None:
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            callback(SyncResult(routed))
            return
        partition, shard = routed
        self.runtime.submit(partition, shard.sync(
            group_id, generation_id, member_id, instance_id, protocol_type, protocol_name,
            assignments, callback))

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return routed
        return routed[1].heartbeat(group_id, generation_id, member_id, instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """The group's error and one per leaving (member id, group instance id)."""
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return routed, []
        partition, shard = routed
        error, results, writes = shard.leave(group_id, members)
        self.runtime.submit(partition, writes)
        return error, results

    # -- KIP-848 consumer groups -----------------------------------------------------
    async def consumer_heartbeat(self, req: HeartbeatRequest, version: int) -> HeartbeatResult:
        """The answer once the records of what the heartbeat changed are committed."""
        message = invalid_heartbeat(req, version)
        if message is not None:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, message)
        while True:
            routed = self._route(req.group_id)
            if isinstance(routed, ErrorCode):
                return HeartbeatResult(routed)
            partition, shard = routed
            # One change of a group at a time: a heartbeat is computed from the state the
            # group's write on its way (with replicas, not yet committed) leaves.
            ready = asyncio.get_running_loop().create_future()
            if not shard.after_consumer_write(req.group_id, _waker(ready)):
                break
            await asyncio.wait([ready])
        out = shard.consumer_heartbeat(req)
        if isinstance(out, HeartbeatResult):
            return out
        return out.result(await self.runtime.write(partition, out.write))

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return ConsumerGroupDescription(group_id, routed)
        return routed[1].describe_consumer_group(group_id)

    # -- KIP-932 share groups --------------------------------------------------------
    def share_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        message = invalid_share_heartbeat(req)
        if message is not None:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, message)
        routed = self._route(req.group_id)
        if isinstance(routed, ErrorCode):
            return HeartbeatResult(routed)
        return routed[1].share_heartbeat(req)

    def describe_share_group(self, group_id: str) -> ConsumerGroupDescription:
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return ConsumerGroupDescription(group_id, routed)
        return routed[1].describe_share_group(group_id)

    def share_offsets_changeable(self, group_id: str, create: bool
                                 ) -> tuple[ErrorCode, str | None]:
        """AlterShareGroupOffsets (`create`) and DeleteShareGroupOffsets: see the shard's."""
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return routed, None
        return routed[1].share_offsets_changeable(group_id, create)

    def share_topics(self, group_id: str, added: Iterable[str] = (),
                     removed: Iterable[str] = ()) -> set[str]:
        """A share group's topics, after recording offsets altered or deleted."""
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return set()
        return routed[1].share_topics(group_id, added, removed)

    # -- offsets ---------------------------------------------------------------------
    async def commit_offsets(self, group_id: str, generation: int, member_id: str,
                             instance_id: str | None, retention_ms: int,
                             commits: list[OffsetCommit], api_version: int = 0
                             ) -> list[ErrorCode]:
        """Per-commit errors, in order, once the accepted commits are committed
        (`api_version`: OffsetCommit's, which decides the answer for an unknown group)."""
        routed = self._route(group_id, allow_empty=True)
        if isinstance(routed, ErrorCode):
            return [routed] * len(commits)
        partition, shard = routed
        results, write = shard.commit_offsets(group_id, generation, member_id, instance_id,
                                              retention_ms, commits, api_version)
        if write is not None:
            error = await self.runtime.write(partition, write)
            if error is not ErrorCode.NONE:
                return [error if r is ErrorCode.NONE else r for r in results]
        return results

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation: int, member_id: str, instance_id: str | None,
                                 commits: list[OffsetCommit], guard: object | None = None
                                 ) -> list[ErrorCode]:
        """TxnOffsetCommit: per-commit errors once the transactional batch is written; the
        offsets count once its marker is written (`complete_transaction`). `guard`: the
        KIP-890 verification of the transaction (INVALID_TXN_STATE if it ended since)."""
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return [routed] * len(commits)
        partition, shard = routed
        results, write = shard.txn_commit_offsets(group_id, producer_id, producer_epoch,
                                                  generation, member_id, instance_id, commits)
        if write is not None:
            write = dataclasses.replace(write, guard=guard)
            error = await self.runtime.write(partition, write)
            if error is not ErrorCode.NONE:
                return [error if r is ErrorCode.NONE else r for r in results]
        return results

    async def complete_transaction(self, partition: int, producer_id: int,
                                   producer_epoch: int, commit: bool, coordinator_epoch: int
                                   ) -> ErrorCode:
        """Writes the marker of `producer_id`'s transaction to the `__consumer_offsets`
        partition through the runtime: once it is committed, the transaction's offsets
        count (COMMIT) or go (ABORT). The error is the partition's, for the marker's
        sender: NOT_LEADER_OR_FOLLOWER while this broker does not serve the partition's
        shard (not led, or still loading), so that it is sent again."""
        error = await self.runtime.write_marker(partition, producer_id, producer_epoch, commit,
                                                coordinator_epoch)
        if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return error

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of the partitions (None: all the group has)."""
        routed = self._route(group_id, allow_empty=True)
        if isinstance(routed, ErrorCode):
            return routed, []
        return routed[1].fetch_offsets(group_id, partitions, member_id, member_epoch)

    def unstable_offsets(self, group_id: str, partitions: list[TopicPartition]
                         ) -> set[TopicPartition]:
        """OffsetFetch `require_stable`: the partitions whose offset an open transaction
        holds."""
        routed = self._route(group_id, allow_empty=True)
        if isinstance(routed, ErrorCode):
            return set()
        shard = routed[1]
        return {tp for tp in partitions if shard.unstable(group_id, tp)}

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> tuple[ErrorCode, list[ErrorCode]]:
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return routed, []
        partition, shard = routed
        error, results, write = shard.delete_offsets(group_id, partitions)
        if error is ErrorCode.NONE and write is not None:
            error = await self.runtime.write(partition, write)
        return (error, []) if error is not ErrorCode.NONE else (error, results)

    # -- describe, list, delete ------------------------------------------------------
    def describe_group(self, group_id: str) -> GroupDescription:
        routed = self._route(group_id, allow_empty=True)
        if isinstance(routed, ErrorCode):
            return GroupDescription(group_id, routed)
        return routed[1].describe_group(group_id)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> tuple[ErrorCode, list[GroupListing]]:
        """The groups of the loaded partitions; COORDINATOR_LOAD_IN_PROGRESS while others
        load (the listing may miss their groups)."""
        states_l = {s.lower() for s in states}
        types_l = {t.lower() for t in types}
        listed = [g for _, shard in self.runtime.shards()
                  for g in shard.list_groups(states_l, types_l)]
        error = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.loading()
                 else ErrorCode.NONE)
        return error, listed

    async def delete_groups(self, group_ids: list[str]) -> list[ErrorCode]:
        return [await self._delete_group(g) for g in group_ids]

    async def _delete_group(self, group_id: str) -> ErrorCode:
        routed = self._route(group_id)
        if isinstance(routed, ErrorCode):
            return routed
        partition, shard = routed
        error, write = shard.delete_group(group_id)
        if write is None:
            return error
        return await self.runtime.write(partition, write)

    # -- time and shutdown -----------------------------------------------------------


def _waker(ready: asyncio.Future[None]) -> Callable[[], None]:
    def wake() -> None:
        if not ready.done():
            ready.set_result(None)
    return wake
