"""The coordinators' internal topics, as the broker gives them to the coordinator runtime.

`InternalTopicLog` implements `ads.coordinator.topic.InternalTopic` for one internal topic,
named with its settings by an `InternalTopicSpec` (`OFFSETS_TOPIC_SPEC` for the group
coordinator, `TRANSACTION_STATE_TOPIC_SPEC` for the transaction coordinator,
`SHARE_GROUP_STATE_TOPIC_SPEC` for the share coordinator), and
`BrokerTopicMetadata` implements `TopicMetadata` over the broker's metadata. Both are used
from the event loop only.

The topic is created on first use: FindCoordinator awaits `create` (its partitions' files
are made in a worker thread), while an append to a topic that does not exist yet (a client
that commits without asking for its coordinator first) creates it on the loop. On one
broker every partition is led here and an appended batch is committed at once, so `append`
returns a completed future; otherwise the future completes when the replica manager's
produce purgatory sees the partition's high watermark pass the batch, or fails at
`offsets.commit.timeout.ms`. Appends go through the replica manager's one append path
(`append_records`, origin COORDINATOR, acks=all).
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ads.common.partitions import TopicPartition
from ads.coordinator.group.records import OFFSETS_TOPIC
from ads.coordinator.share.records import SHARE_GROUP_STATE_TOPIC
from ads.coordinator.topic import AppendError
from ads.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from ads.metadata.model import INTERNAL_TOPICS
from ads.metadata.store import TopicExistsError
from ads.records.batch import iter_batches
from ads.replication.partition import AppendOrigin, PartitionError, VerificationGuard

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext

log = logging.getLogger("ads.broker")


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    """An internal topic and the broker settings it is made and loaded with."""

    name: str
    partitions_key: str
    segment_bytes_key: str
    load_buffer_key: str
    replication_factor_key: str
    # Topic configs set whatever the broker's defaults are.
    configs: dict[str, str] = field(default_factory=dict)
    # The topic's min.insync.replicas (at most its replication factor); None: the default.
    min_isr_key: str | None = None


OFFSETS_TOPIC_SPEC = InternalTopicSpec(
    OFFSETS_TOPIC, "offsets.topic.num.partitions", "offsets.topic.segment.bytes",
    "offsets.load.buffer.size", "offsets.topic.replication.factor",
    {"cleanup.policy": "compact", "compression.type": "producer"})
TRANSACTION_STATE_TOPIC_SPEC = InternalTopicSpec(
    TRANSACTION_STATE_TOPIC, "transaction.state.log.num.partitions",
    "transaction.state.log.segment.bytes", "transaction.state.log.load.buffer.size",
    "transaction.state.log.replication.factor",
    {"cleanup.policy": "compact", "compression.type": "uncompressed"},
    min_isr_key="transaction.state.log.min.isr")
# Not compacted, as Kafka's: a share-partition's updates count only with every record since
# its last snapshot, and compaction would keep the last update of each key alone.
SHARE_GROUP_STATE_TOPIC_SPEC = InternalTopicSpec(
    SHARE_GROUP_STATE_TOPIC, "share.coordinator.state.topic.num.partitions",
    "share.coordinator.state.topic.segment.bytes", "share.coordinator.load.buffer.size",
    "share.coordinator.state.topic.replication.factor",
    {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1",
     "compression.type": "producer"},
    min_isr_key="share.coordinator.state.topic.min.isr")


class InternalTopicLog:
    """`InternalTopic` over this broker's partitions of one internal topic."""

    def __init__(self, broker: BrokerContext, spec: InternalTopicSpec) -> None:
        self.broker = broker
        self.spec = spec
        # The spec's settings, typed once.
        get = broker.config.get_int
        self._partitions = get(spec.partitions_key)
        self._segment_bytes = get(spec.segment_bytes_key)
        self._load_buffer_bytes = max(get(spec.load_buffer_key), 1)
        self._replication_factor = get(spec.replication_factor_key)
        self._min_isr = None if spec.min_isr_key is None else get(spec.min_isr_key)
        self._commit_timeout_ms = get("offsets.commit.timeout.ms")

    @property
    def name(self) -> str:
        return self.spec.name

    def partition_count(self) -> int:
        topic = self.broker.metadata.topics.get(self.name)
        if topic is not None:
            return len(topic.partitions)
        return self._partitions

    def ready(self) -> bool:
        """Whether the topic exists, its files here are made and every partition has had
        a leader elected. A partition offline since (its broker gone) does not count: its
        groups are COORDINATOR_NOT_AVAILABLE, the others' coordinators are named at once."""
        topic = self.broker.metadata.topics.get(self.name)
        return (topic is not None and not self.broker.topics.opening(self.name)
                and all(p.leader_epoch >= 0 for p in topic.partitions))

    async def create(self) -> None:
        """Creates the topic (or waits for its creation) with the files made off the loop:
        fifty partitions' fsyncs would stall every connection for tens of milliseconds."""
        topic = self.broker.metadata.topics.get(self.name)
        if topic is None:
            partitions, configs = self._spec()
            # Kafka refuses to create it with fewer live brokers than its replication
            # factor; ADS places it on the brokers there are, so one broker needs no setting.
            rf = min(self._replication_factor, max(len(self.broker.metadata.brokers), 1))
            if self._min_isr is not None:
                configs["min.insync.replicas"] = str(min(self._min_isr, rf))
            try:
                topic = await self.broker.topics.record_topic(self.name, partitions, configs, rf)
            except TopicExistsError:
                # Another broker created it meanwhile: serve it once this broker's metadata
                # has it (the caller answers COORDINATOR_NOT_AVAILABLE if it never comes).
                metadata = self.broker.metadata
                if not await metadata.wait(lambda: self.name in metadata.topics,
                                           self._commit_timeout_ms / 1000):
                    raise TimeoutError(f"{self.name} was created by another broker and has "
                                       "not reached this one's metadata yet") from None
                topic = metadata.topics[self.name]
        await self.broker.topics.open_new(topic)

    def _spec(self) -> tuple[int, dict[str, str]]:
        return self._partitions, {**self.spec.configs, "segment.bytes": str(self._segment_bytes)}

    def append(self, partition: int, batch: bytes, guard: object | None = None
               ) -> asyncio.Future[int]:
        """Appends as acks=all through the replica manager's one append path (checking
        `guard`, a `VerificationGuard`); the future is the batch's base offset once
        committed."""
        committed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        key = TopicPartition(self.name, partition)
        guards = {key: guard} if isinstance(guard, VerificationGuard) else None
        appended = self.broker.replica_manager.append_records(
            {key: batch}, AppendOrigin.COORDINATOR, -1, self._commit_timeout_ms, guards)
        result = appended.results[key]
        if isinstance(result, PartitionError):
            raise AppendError(result.code, str(result))

        def answer(_: object = None) -> None:
            errors = appended.errors()
            if committed.done():
                return
            if errors:
                committed.set_exception(AppendError(next(iter(errors.values()))))
            else:
                committed.set_result(result.base_offset)

        if appended.pending is None:
            answer()
        else:
            appended.pending.future.add_done_callback(answer)
        return committed

    async def read_batches(self, partition: int) -> AsyncIterator[bytes]:
        part = self.broker.replica_manager.get(self.name, partition)
        if part is None:
            return
        offset, end = part.log_start_offset, part.log_end_offset
        chunk = self._load_buffer_bytes
        while offset < end:
            try:
                region, _ = part.read(offset, chunk, True, end)
            except PartitionError as exc:
                raise AppendError(exc.code, str(exc)) from exc
            data = region.read_bytes() if region is not None else b""
            if not data:
                return
            next_offset = offset
            for pos, header in iter_batches(data):
                yield data[pos:pos + header.size]
                next_offset = header.next_offset
            if next_offset <= offset:
                return
            offset = next_offset
            await asyncio.sleep(0)  # requests for other partitions are served in between


    def delete_records(self, partition: int, offset: int) -> None:
        try:
            start = self.broker.replica_manager.delete_records(self.name, partition, offset)
        except PartitionError as exc:
            log.info("pruning %s-%d below %d: %s", self.name, partition, offset, exc.code.name)
            return
        log.debug("pruned %s-%d: log start offset %d", self.name, partition, start)


class BrokerTopicMetadata:
    """`TopicMetadata` over the broker's metadata store."""

    # Distinct regexes kept between metadata changes; past it, the kept ones are dropped.
    MATCHING_KEPT = 1000

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        # A consumer group's regex is resolved at every heartbeat of its members; the
        # answer changes only with the topics, so it is kept until the metadata's version
        # moves.
        self._matching: dict[str, tuple[str, ...]] = {}
        self._matching_version = -1

    def topic_partitions(self, topic: str) -> int | None:
        state = self.broker.metadata.topics.get(topic)
        return None if state is None else len(state.partitions)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        state = self.broker.metadata.topics.get(topic)
        return None if state is None else state.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        state = self.broker.metadata.topic_by_id(topic_id)
        return None if state is None else state.name

    def topic_names(self) -> list[str]:
        return [t for t in self.broker.metadata.topics if t not in INTERNAL_TOPICS]

    def topics_matching(self, regex: str) -> tuple[str, ...]:
        version = self.broker.metadata.version
        if version != self._matching_version or len(self._matching) >= self.MATCHING_KEPT:
            self._matching.clear()
            self._matching_version = version
        topics = self._matching.get(regex)
        if topics is None:
            pattern = re.compile(regex)
            topics = tuple(sorted(t for t in self.topic_names() if pattern.fullmatch(t)))
            self._matching[regex] = topics
        return topics
