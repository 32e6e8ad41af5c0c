"""The metadata interface the broker uses, whichever store runs.

Two stores implement it: `EmbeddedMetadataStore` (one broker, a file in its data directory)
and `ZkMetadataStore` (a cluster, Kafka's layout in ZooKeeper). Reads are plain attributes
kept current on the broker's event loop; changes are coroutines, because in a cluster they
wait for ZooKeeper, which the event loop must never do. A change made anywhere (here, on
another broker, by the controller) reaches the listeners on the event loop with the name of
the topic it touched, or None when it may touch every topic (brokers came or went, this
broker's ZooKeeper session ended or began again).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from ads.metadata.model import BrokerEndpoint, TopicState

MetadataListener = Callable[[str | None], None]
# Told the path of an entity whose configs changed.
EntityListener = Callable[[str], None]


class MetadataUnavailableError(RuntimeError):
    """The store cannot be reached (ZooKeeper down at start-up)."""


class NodeIdInUseError(RuntimeError):
    """Another live broker is registered with this node id."""


class TopicExistsError(RuntimeError):
    pass


class MetadataRequestError(RuntimeError):
    """The store's authority (a KRaft controller) refused a change; `error_code` is the
    Kafka error code it answered."""

    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(message or f"error code {error_code}")
        self.error_code = error_code


class MetadataStore(Protocol):
    node_id: int
    cluster_id: str

    @property
    def topics(self) -> Mapping[str, TopicState]: ...

    # Counts changes, so derived data (the Metadata response cache) can tell it is stale.
    version: int
    # Live brokers, by node id, and the controller's id (-1 while there is none).
    @property
    def brokers(self) -> Mapping[int, BrokerEndpoint]: ...

    controller_id: int
    # True while this broker's session has ended: it must lead nothing until registered.
    fenced: bool

    def load(self) -> None:
        """Start-up, before serving: read the stored model (may block)."""

    def register(self, endpoint: BrokerEndpoint) -> None:
        """Announces this broker once it listens (may block, start-up only)."""

    def close(self) -> None: ...

    def add_listener(self, listener: MetadataListener) -> None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None: ...

    async def create_topic(self, name: str, configs: dict[str, str],
                           assignment: Mapping[int, list[int]],
                           topic_id: uuid.UUID | None = None) -> TopicState:
        """Records a topic whose partition `p` has the replicas `assignment[p]`."""

    async def delete_topic(self, name: str) -> None: ...

    async def add_partitions(self, name: str, assignment: Mapping[int, list[int]]) -> None: ...

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None: ...

    async def update_isr(self, name: str, partition: int, leader_epoch: int,
                         isr: list[int]) -> bool:
        """The partition's leader records a new ISR; False when the stored state no longer
        names this broker as leader at `leader_epoch` (the change is then dropped)."""

    # Kafka's user and client-id configs (quotas, SCRAM credentials), by entity path
    # (`ads.metadata.entity_config`); entities without configs are absent.
    @property
    def entity_configs(self) -> Mapping[str, Mapping[str, str]]: ...

    async def alter_entity_configs(self, path: str, changes: Mapping[str, str | None]) -> None:
        """Sets the entity's keys to the values given, removing those given None; returns
        once this broker's view shows the change."""

    async def read_entity_configs(self) -> Mapping[str, Mapping[str, str]]:
        """Every entity's configs as the store holds them now, read through rather than
        from this broker's view (which follows changes made through other brokers a moment
        later): what the describe requests answer, so a change made through any broker is
        described at once by every broker, as Kafka's ZooKeeper mode does."""

    async def read_topic_configs(self, name: str) -> Mapping[str, str] | None:
        """The topic's configs as the store holds them now (None: no such topic), read
        through as `read_entity_configs` is: what DescribeConfigs answers, so a change made
        through any broker is described at once by every broker, as Kafka's ZooKeeper mode
        does."""

    def add_entity_listener(self, listener: EntityListener) -> None:
        """`listener(path)` is called on the event loop after an entity's configs change."""

    async def allocate_producer_id_block(self, size: int) -> tuple[int, int]:
        """Reserves `size` producer ids no broker has used; returns [start, end)."""

    async def wait(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        """Waits until `ready()` holds after a change (False: `timeout_s` passed first)."""
