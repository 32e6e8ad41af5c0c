"""Topic administration on one broker: topics recorded in the metadata, then served here.

`TopicAdmin` is what request handlers and the coordinators' internal topics call to create,
grow, delete and configure topics, and what keeps this broker's replicas in step with the
metadata (`metadata_changed`, the store's listener). A topic is first recorded in the
metadata (CreateTopics, CreatePartitions, an internal topic's first use); every broker then
learns of it and makes its own replicas' files in a worker thread (`open_new` awaits that,
`open_in_background` does not), and serves them through the replica manager
(`ReplicaManager.apply_delta`, the one place leadership and followers are set). Making a
partition costs a directory and checkpoint fsyncs (a 1,000-partition topic took seconds),
and the event loop must not wait on disks (DESIGN rule 6); meanwhile the topic is in the
metadata and its unserved partitions answer LEADER_NOT_AVAILABLE in Metadata, as a new
topic's do in Kafka until its leaders are elected. Each topic's configs are applied to its
logs whenever the metadata or the broker's dynamic configs change them (`apply_config`).
Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping

from ads.broker import config as bconfig
from ads.broker.configdefs import DEPRECATED_TOPIC_KEYS
from ads.broker.metrics import BrokerMetrics
from ads.broker.settings import log_config_from
from ads.metadata.assignment import assign_replicas
from ads.metadata.model import PartitionState, TopicState
from ads.metadata.store import MetadataStore
from ads.replication.replica_manager import MetadataDelta, ReplicaManager
from ads.storage.config import LogConfig
from ads.storage.errors import StorageError
from ads.storage.manager import LogManager

log = logging.getLogger("ads.broker")

# What making or writing a log's files raises when the machine cannot (a full disk, no
# inodes or file descriptors left, an I/O error); `PartitionError.of` gives its Kafka error.
STORAGE_FAILURES = (OSError, StorageError)

# How long admin requests wait for the controller to elect a new topic's leaders, or for a
# deleted topic to go.
LEADER_WAIT_S = 30.0


def log_failure(what: str) -> Callable[[asyncio.Future[None]], None]:
    """A done-callback that logs the error of a background job nobody awaits."""

    def report(done: asyncio.Future[None]) -> None:
        if done.cancelled() or (exc := done.exception()) is None:
            return
        if isinstance(exc, STORAGE_FAILURES):  # what ran out says it all: no traceback
            log.error("%s failed: %s", what, exc)
        else:
            log.error("%s failed", what, exc_info=exc)

    return report


class TopicAdmin:
    def __init__(self, node_id: int, metadata: MetadataStore, replica_manager: ReplicaManager,
                 log_manager: LogManager, config: Callable[[], bconfig.BrokerConfig],
                 metrics: BrokerMetrics) -> None:
        """`config` gives the broker's current configuration (dynamic configs change it)."""
        self.node_id = node_id
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self._config = config
        self._metrics = metrics
        # Whether metadata changes are applied (from start to stop).
        self.active = False
        # Topics whose new partitions' files are being made in a worker thread.
        self._opening: dict[str, asyncio.Future[None]] = {}
        # Each topic's configs as last applied to its logs (changes may come from anywhere).
        self._applied_configs: dict[str, dict[str, str]] = {}
        self._deprecated_warned: set[tuple[str, str]] = set()  # (topic, key) logged

    # -- following the metadata ------------------------------------------------------------
    def log_config(self, topic: TopicState) -> LogConfig:
        """The topic's effective settings for its logs (its configs over the broker's)."""
        self._warn_deprecated(topic)
        return log_config_from(bconfig.effective_topic_config(self._config(), topic.configs))

    def serve_all(self) -> None:
        """At start: serves the replicas of every topic the metadata names."""
        self._apply(list(self.metadata.topics.values()), [])

    def metadata_changed(self, name: str | None) -> None:
        """The store's listener (event loop): serve what the metadata says this broker
        holds, in the role it says, and drop what it no longer holds; topics with replicas
        new here are served once their files are made (`open_in_background`)."""
        if not self.active:
            return
        names = [name] if name is not None else [*self.metadata.topics, *self._served_topics()]
        served: list[TopicState] = []
        deleted: list[str] = []
        for topic_name in dict.fromkeys(names):
            topic = self.metadata.topics.get(topic_name)
            if topic is None:
                deleted.append(topic_name)
            elif any(self.replica_manager.get(topic_name, p.partition) is None
                     and self.node_id in p.replicas for p in topic.partitions):
                self.open_in_background(topic)
            else:
                served.append(topic)
        self._apply(served, deleted)
        for topic_name in dict.fromkeys(names):
            topic = self.metadata.topics.get(topic_name)
            if topic is not None and self._applied_configs.get(topic_name) != topic.configs:
                self._applied_configs[topic_name] = dict(topic.configs)
                self.apply_config(topic_name)

    def _apply(self, topics: list[TopicState], deleted: list[str]) -> None:
        """Hands the replica manager one batch of changes."""
        self.replica_manager.apply_delta(MetadataDelta(
            [(t, self.log_config(t)) for t in topics], deleted, self.metadata.fenced))
        for name in deleted:
            self._metrics.forget_topic(name)
            self._deprecated_warned = {w for w in self._deprecated_warned if w[0] != name}
            log.info("deleted topic %s", name)

    def apply_config(self, name: str) -> None:
        """Hands the topic's logs its effective configuration."""
        topic = self.metadata.topics.get(name)
        if topic is None:
            return
        cfg = self.log_config(topic)
        self.log_manager.update_config(name, cfg)
        self.replica_manager.update_config(name, cfg)

    def _served_topics(self) -> set[str]:
        return {part.topic for part in self.replica_manager}

    def _warn_deprecated(self, topic: TopicState) -> None:
        """Once per topic and key: a deprecated key Kafka 3.x ignores is set."""
        for key, reason in DEPRECATED_TOPIC_KEYS.items():
            if key in topic.configs and (topic.name, key) not in self._deprecated_warned:
                self._deprecated_warned.add((topic.name, key))
                log.warning("Topic configuration %s with value `%s` is ignored for `%s`: %s. "
                            "This configuration is deprecated (Kafka 4.0 removed it).",
                            key, topic.configs[key], topic.name, reason)

    # -- changes asked for -----------------------------------------------------------------
    async def record_topic(self, name: str, num_partitions: int, configs: dict[str, str],
                           replication_factor: int = 1,
                           assignment: Mapping[int, list[int]] | None = None,
                           topic_id: uuid.UUID | None = None) -> TopicState:
        """Puts a new topic in the metadata with its replicas placed over the live brokers
        (or as `assignment` says); `open_new` then waits until it is served."""
        if assignment is None:
            assignment = assign_replicas(list(self.metadata.brokers.values()), num_partitions,
                                         replication_factor)
        topic = await self.metadata.create_topic(name, configs, assignment, topic_id)
        log.info("created topic %s with %d partitions (id %s, configs %s)",
                 name, len(assignment), topic.topic_id, configs)
        return topic

    async def record_partitions(self, name: str, total: int,
                                assignment: Mapping[int, list[int]] | None = None
                                ) -> TopicState:
        """Grows a topic in the metadata; `open_new` then serves the new partitions."""
        topic = self.metadata.topics[name]
        if assignment is None:
            rf = len(topic.partitions[0].replicas) if topic.partitions else 1
            assignment = assign_replicas(list(self.metadata.brokers.values()),
                                         total - len(topic.partitions), rf,
                                         first_partition=len(topic.partitions))
        await self.metadata.add_partitions(name, assignment)
        return self.metadata.topics[name]

    async def delete_topic(self, name: str) -> None:
        """Deletes the topic everywhere; returns when this broker sees it gone."""
        await self.metadata.delete_topic(name)
        await self.metadata.wait(lambda: name not in self.metadata.topics, LEADER_WAIT_S)

    async def alter_configs(self, name: str, configs: dict[str, str]) -> None:
        """Sets the topic's configs; the logs take them when the metadata reports it."""
        await self.metadata.set_topic_configs(name, configs)

    # -- serving new replicas --------------------------------------------------------------
    async def open_new(self, topic: TopicState) -> None:
        """Waits until the topic's partitions are served: here, this broker's replicas'
        files are made in a worker thread, and every partition has a leader. The work
        belongs to the broker, not to the request that asked for it: a client that drops
        its connection cancels its wait, not the opening."""
        opening = self._opening.get(topic.name)
        if opening is None and any(
                self.replica_manager.get(topic.name, p.partition) is None
                and self.node_id in p.replicas for p in topic.partitions):
            opening = self._start_opening(topic)
        if opening is not None:
            await asyncio.shield(opening)
        await self.metadata.wait(lambda: self._led(topic.name), LEADER_WAIT_S)

    def _led(self, name: str) -> bool:
        topic = self.metadata.topics.get(name)
        return topic is None or all(p.leader >= 0 for p in topic.partitions)

    def open_in_background(self, topic: TopicState) -> None:
        """Makes this broker's new replicas of the topic without waiting for them."""
        self._start_opening(topic).add_done_callback(
            log_failure(f"making the partitions of topic {topic.name}"))

    def opening(self, name: str) -> bool:
        """Whether the topic's new partitions' files are being made."""
        return name in self._opening

    async def close(self) -> None:
        """Cancels the openings under way and waits for them to end."""
        for task in self._opening.values():
            task.cancel()
        await asyncio.gather(*self._opening.values(), return_exceptions=True)

    def _start_opening(self, topic: TopicState) -> asyncio.Future[None]:
        # Openings of one topic run one after another, each after the one before it.
        previous = self._opening.get(topic.name)
        task = asyncio.ensure_future(self._make_and_serve(topic.name, previous))
        self._opening[topic.name] = task

        def forget(done: asyncio.Future[None]) -> None:
            if self._opening.get(topic.name) is done:
                del self._opening[topic.name]

        task.add_done_callback(forget)
        return task

    async def _make_and_serve(self, name: str, previous: asyncio.Future[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        topic = self.metadata.topics.get(name)
        if topic is None:
            return
        todo = [p for p in topic.partitions if self.node_id in p.replicas
                and self.replica_manager.get(name, p.partition) is None]
        if todo:
            making = asyncio.ensure_future(
                asyncio.to_thread(self._make_logs, name, todo, self.log_config(topic)))
            try:
                await asyncio.shield(making)
            except asyncio.CancelledError:
                # A worker thread cannot be stopped: a stopping broker waits for the files
                # it makes, so nothing writes into the log dirs after stop() returns.
                await asyncio.wait([making])
                raise
        topic = self.metadata.topics.get(name)  # the newest state: it may have moved on
        if topic is not None:
            self._apply([topic], [])
        else:  # deleted while its files were made
            for p in todo:
                self.log_manager.delete_log(name, p.partition)

    def _make_logs(self, name: str, partitions: list[PartitionState], cfg: LogConfig) -> None:
        # Worker thread: only the log manager (thread-safe) and the new logs are touched.
        # All or nothing: a failure part-way removes the logs this call made.
        made: list[int] = []
        try:
            for p in partitions:
                plog = self.log_manager.create_log(name, p.partition, cfg)
                made.append(p.partition)
                # As Partition would on the loop: the epoch checkpoint's fsync happens here.
                if p.leader == self.node_id and (
                        plog.latest_epoch is None or plog.latest_epoch < p.leader_epoch):
                    plog.assign_epoch(p.leader_epoch, plog.log_end_offset)
        except BaseException:
            for partition in made:
                self.log_manager.delete_log(name, partition, at_once=True)
            raise
