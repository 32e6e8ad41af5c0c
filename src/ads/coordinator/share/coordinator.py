"""The share coordinator: the one object the share-state handlers and the share-partition
leaders on this broker call.

It routes a share-partition (group id, topic id, partition) to its `__share_group_state`
partition, `abs(java hash("groupId:topicId:partition")) % share.coordinator.state.topic.
num.partitions` as FindCoordinator with key type 2 computes it, and to that partition's
shard (`shard.py`) through the coordinator runtime, which answers
COORDINATOR_LOAD_IN_PROGRESS while the partition loads and NOT_COORDINATOR when this broker
does not lead it. Each call is one share-partition, as Kafka's share coordinator serves
them; the handlers split requests by share-partition. Every
`share.coordinator.state.topic.prune.interval.ms` each shard's records below the oldest
snapshot still needed are deleted (`ShareShard.prune_offset`, the topic's
`delete_records`).

Used from the broker's event loop only.
"""

from __future__ import annotations

from ads.common.clock import Clock
from ads.coordinator.runtime import CoordinatorRuntime, RuntimeCoordinator, Write
from ads.coordinator.share.records import ShareKey
from ads.coordinator.share.shard import Answer, ShareCoordinatorConfig, ShareShard, WriteRequest
from ads.coordinator.timer import Timers
from ads.coordinator.topic import InternalTopic, TopicMetadata
from ads.protocol.errors import ErrorCode


class ShareCoordinator(RuntimeCoordinator[ShareShard]):
    def __init__(self, topic: InternalTopic, topics: TopicMetadata, clock: Clock,
                 config: ShareCoordinatorConfig | None = None) -> None:
        self.config = config or ShareCoordinatorConfig()
        self.topics = topics
        self.runtime: CoordinatorRuntime[ShareShard] = CoordinatorRuntime(
            topic, clock, self._new_shard)
        # The offset each partition was last pruned below.
        self._pruned: dict[int, int] = {}

    def _new_shard(self, partition: int, timers: Timers[Write]) -> ShareShard:
        return ShareShard(partition, self.topics, self.config, timers, self._prune)

    def _prune(self, partition: int, offset: int) -> None:
        """Deletes the records of the partition below `offset` (the shard's timer)."""
        if offset > self._pruned.get(partition, 0):
            self.runtime.topic.delete_records(partition, offset)
            self._pruned[partition] = offset

    def partition_of(self, key: ShareKey) -> int:
        return self.runtime.partition_for(key.coordinator_key())

    def _route(self, key: ShareKey) -> tuple[int, ShareShard] | ErrorCode:
        if not key.group_id or key.partition < 0:
            return ErrorCode.INVALID_REQUEST
        partition = self.partition_of(key)
        shard = self.runtime.shard(partition)
        return (partition, shard) if shard is not None else self.runtime.error(partition)

    async def _perform(self, partition: int, write: Write | None, answer: Answer) -> Answer:
        if write is not None:
            await self.runtime.write(partition, write)
        return answer

    # -- the APIs ------------------------------------------------------------------------
    async def write(self, req: WriteRequest) -> Answer:
        routed = self._route(req.key)
        if isinstance(routed, ErrorCode):
            return Answer(routed)
        partition, shard = routed
        return await self._perform(partition, *shard.write(req))

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Answer:
        routed = self._route(key)
        if isinstance(routed, ErrorCode):
            return Answer(routed)
        partition, shard = routed
        return await self._perform(partition, *shard.initialize(key, state_epoch, start_offset))

    async def delete(self, key: ShareKey) -> Answer:
        routed = self._route(key)
        if isinstance(routed, ErrorCode):
            return Answer(routed)
        partition, shard = routed
        return await self._perform(partition, *shard.delete(key))

    def read(self, key: ShareKey, leader_epoch: int) -> Answer:
        routed = self._route(key)
        if isinstance(routed, ErrorCode):
            return Answer(routed)
        return routed[1].read(key, leader_epoch)

    def summary(self, key: ShareKey) -> Answer:
        routed = self._route(key)
        if isinstance(routed, ErrorCode):
            return Answer(routed)
        return routed[1].summary(key)

    # -- wiring --------------------------------------------------------------------------
    def is_local(self, key: ShareKey) -> bool:
        """Whether this broker serves the share-partition's state now (ACTIVE here)."""
        return self.runtime.shard(self.partition_of(key)) is not None

