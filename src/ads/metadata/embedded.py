"""The embedded metadata store: the single-node cluster model kept in the data directory.

File `ads-metadata.json` in the first log directory holds the cluster id and every topic
(name, topic id, partitions with leader, leader epoch, replicas, ISR, and topic config
overrides). It is rewritten whole on every change: write a temporary file, fsync, rename,
fsync the directory, so a crash leaves either the old or the new file, never a mix.
Topic changes are rare (create, delete, add partitions, alter configs), so rewriting the
whole file is cheap next to the clarity it buys.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from ads.common.files import atomic_write
from ads.metadata import acl
from ads.metadata.entity_config import apply_changes
from ads.metadata.model import BrokerEndpoint, PartitionState, TopicState
from ads.metadata.store import EntityListener, MetadataListener

METADATA_FILE = "ads-metadata.json"
FORMAT_VERSION = 1


def new_cluster_id() -> str:
    """A cluster id the way Kafka makes them: a random UUID in URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class MetadataCorruptError(RuntimeError):
    pass


class EmbeddedMetadataStore:
    """Cluster model for one broker. Not thread-safe: used from the broker's event loop."""

    def __init__(self, directory: Path, node_id: int) -> None:
        self._path = directory / METADATA_FILE
        self.node_id = node_id
        self.cluster_id = new_cluster_id()
        self.topics: dict[str, TopicState] = {}
        self._by_id: dict[uuid.UUID, TopicState] = {}
        # Producer ids are handed out in blocks; the end of the last block is stored before
        # any id of it is used, so ids are never reused after a crash.
        self.producer_id_block_end = 0
        self.version = 0  # counts changes, so derived data can tell when it is stale
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.controller_id = node_id  # the one broker decides everything
        self.fenced = False
        self._listeners: list[MetadataListener] = []
        # User and client-id configs by entity path (`ads.metadata.entity_config`).
        self.entity_configs: dict[str, dict[str, str]] = {}
        self._entity_listeners: list[EntityListener] = []
        # ACLs by resource pattern, kept in the same file (`ads.metadata.acl_stores`).
        self.acls: dict[acl.ResourcePattern, frozenset[acl.AccessControlEntry]] = {}

    def load(self) -> None:
        if not self._path.exists():
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._save()
            return
        self._read()

    def _read(self) -> None:
        try:
            data = json.loads(self._path.read_bytes())
            self.cluster_id = str(data["cluster_id"])
            self.producer_id_block_end = int(data.get("producer_id_block_end", 0))
            topics = [TopicState.from_json(t) for t in data["topics"]]
            self.entity_configs = {str(path): {str(k): str(v) for k, v in configs.items()}
                                   for path, configs in data.get("entity_configs", {}).items()}
            self.acls = acl.view_from_json(data.get("acls", []))
        except (ValueError, KeyError, TypeError) as exc:
            raise MetadataCorruptError(f"cannot read {self._path}: {exc}") from exc
        self.topics = {t.name: t for t in topics}
        self._by_id = {t.topic_id: t for t in topics}

    def register(self, endpoint: BrokerEndpoint) -> None:
        self.brokers = {endpoint.node_id: endpoint}
        self.version += 1

    def close(self) -> None:
        pass

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def add_entity_listener(self, listener: EntityListener) -> None:
        self._entity_listeners.append(listener)

    async def read_entity_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self.entity_configs

    async def read_topic_configs(self, name: str) -> Mapping[str, str] | None:
        topic = self.topics.get(name)
        return None if topic is None else topic.configs

    async def alter_entity_configs(self, path: str, changes: Mapping[str, str | None]) -> None:
        configs = apply_changes(self.entity_configs.get(path, {}), dict(changes))
        if configs:
            self.entity_configs[path] = configs
        else:
            self.entity_configs.pop(path, None)
        self._save()
        for listener in self._entity_listeners:
            listener(path)

    def _changed(self, name: str) -> None:
        for listener in self._listeners:
            listener(name)

    def save(self) -> None:
        """Writes the file after a change made to a public attribute (`acls`)."""
        self._save()

    def _save(self) -> None:
        self.version += 1  # every change goes through here: caches compare it
        data = {
            "version": FORMAT_VERSION,
            "cluster_id": self.cluster_id,
            "producer_id_block_end": self.producer_id_block_end,
            "topics": [t.to_json() for t in self.topics.values()],
            "entity_configs": self.entity_configs,
            "acls": acl.view_to_json(self.acls),
        }
        try:
            atomic_write(self._path, json.dumps(data, indent=1, sort_keys=True).encode())
        except OSError:
            # A change that could not be written (a full disk) did not happen: the state
            # goes back to the file's, and the caller's request fails.
            if self._path.exists():
                self._read()
            raise

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._by_id.get(topic_id)

    async def create_topic(self, name: str, configs: dict[str, str],
                           assignment: Mapping[int, list[int]],
                           topic_id: uuid.UUID | None = None) -> TopicState:
        topic = TopicState(
            name=name,
            topic_id=topic_id or uuid.uuid4(),
            partitions=[self._new_partition(p, assignment[p]) for p in sorted(assignment)],
            configs=dict(configs),
        )
        self.topics[name] = topic
        self._by_id[topic.topic_id] = topic
        self._save()
        self._changed(name)
        return topic

    def _new_partition(self, index: int, replicas: list[int]) -> PartitionState:
        # One broker: the first replica (this broker) leads from the start.
        return PartitionState(partition=index, leader=replicas[0], leader_epoch=0,
                              replicas=list(replicas), isr=list(replicas))

    async def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name)
        self._by_id.pop(topic.topic_id, None)
        self._save()
        self._changed(name)

    async def add_partitions(self, name: str, assignment: Mapping[int, list[int]]) -> None:
        topic = self.topics[name]
        topic.partitions.extend(self._new_partition(p, assignment[p]) for p in sorted(assignment))
        self._save()
        self._changed(name)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save()
        self._changed(name)

    async def update_isr(self, name: str, partition: int, leader_epoch: int,
                         isr: list[int]) -> bool:
        topic = self.topics.get(name)
        if topic is None or partition >= len(topic.partitions):
            return False
        state = topic.partitions[partition]
        if state.leader != self.node_id or state.leader_epoch != leader_epoch:
            return False
        state.isr = list(isr)
        self._save()
        self._changed(name)
        return True

    async def allocate_producer_id_block(self, size: int) -> tuple[int, int]:
        """Reserve `size` producer ids; returns [start, end)."""
        start = self.producer_id_block_end
        self.producer_id_block_end = start + size
        self._save()
        return start, start + size

    async def wait(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        # Changes here are made by this broker, complete when their call returns.
        return ready()
