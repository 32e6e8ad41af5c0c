"""What request handlers and the coordinators' wiring may use of the broker.

Handlers depend on this narrow interface, not on `ads.broker.server.Broker`, which
implements it: the broker imports its handlers, so a handler that imported the broker would
close an import circle, and a handler's needs stay visible in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ads.broker.authentication import Authenticator
from ads.broker.authorized_operations import OperationsAuthorizer
from ads.broker.config import BrokerConfig
from ads.broker.fetch_sessions import FetchSessionCache
from ads.broker.listeners import InterBroker
from ads.broker.quotas import ClientQuotas
from ads.broker.settings import RequestSettings
from ads.broker.share_partitions import SharePartitionManager, StatePersister
from ads.broker.share_sessions import ShareSessionCache
from ads.broker.topic_admin import TopicAdmin
from ads.common.clock import Clock
from ads.common.partitions import TopicPartition
from ads.controller.controller import Controller
from ads.coordinator.group.coordinator import GroupCoordinator
from ads.coordinator.share.coordinator import ShareCoordinator
from ads.coordinator.transaction.coordinator import MarkerWriter, TransactionCoordinator
from ads.metadata.acl import AclStore
from ads.metadata.cache import TopicCache
from ads.metadata.store import MetadataStore
from ads.protocol.errors import ErrorCode
from ads.protocol.messages import MetadataResponse
from ads.replication.replica_manager import ReplicaManager


class TxnRequests(MarkerWriter, Protocol):
    async def verify(self, txn_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        ...


class ShareStates(StatePersister, Protocol):
    """How share-partition leaders, DeleteGroups and the share-group offset APIs reach the
    share coordinator (`ads.broker.share_state.ShareStatePersister`)."""

    async def delete_group(self, group_id: str) -> ErrorCode:
        ...

    async def summary(self, group_id: str, tp: TopicPartition) -> tuple[int, int] | ErrorCode:
        """(start offset, leader epoch) of a share-partition's state; DescribeShareGroupOffsets."""
        ...

    async def reset(self, group_id: str, tp: TopicPartition, start_offset: int) -> ErrorCode:
        """A share-partition started over at `start_offset`; AlterShareGroupOffsets."""
        ...

    async def delete(self, group_id: str, topics: list[str]) -> ErrorCode:
        """The state of the group's share-partitions of `topics`; DeleteShareGroupOffsets."""
        ...

    async def close(self) -> None:
        """Closes its connections to other brokers."""
        ...


class BrokerContext(Protocol):
    config: BrokerConfig
    # What handlers read of the configuration, typed once (`ads.broker.settings`).
    settings: RequestSettings
    clock: Clock
    node_id: int
    metadata: MetadataStore
    # The controller candidate in cluster mode (None without ZooKeeper).
    controller: Controller | None
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    # Requests of the transaction machinery to other brokers: markers, verifications
    # (`ads.broker.markers.BrokerMarkerWriter`).
    txn_requests: TxnRequests
    fetch_sessions: FetchSessionCache
    # Share groups (KIP-932, with group.share.enable): sessions and share-partitions.
    share_sessions: ShareSessionCache
    share_partitions: SharePartitionManager
    # Their durable state (`__share_group_state`), for the share-partitions whose key
    # hashes to a partition of it led here.
    share_coordinator: ShareCoordinator
    # How this broker's share-partition leaders reach the share coordinator.
    share_state: ShareStates
    # How this broker reaches the others (the inter-broker listener, TLS or not).
    inter_broker: InterBroker
    # Client quotas (`ads.broker.quotas`), kept current from the entity configs.
    quotas: ClientQuotas
    # Decides what the principal may do (everything, without `authorizer.class.name`).
    operations_authorizer: OperationsAuthorizer
    # Where ACLs live; None without an authorizer.
    acl_store: AclStore | None
    # SASL settings of the listeners and the mechanism exchanges (handlers/sasl.py).
    authenticator: Authenticator
    # Metadata's per-topic response entries (handlers/metadata.py).
    metadata_entries: TopicCache[MetadataResponse.MetadataResponseTopic]

    # Topics recorded in the metadata, then their partitions served (`topic_admin.py`).
    topics: TopicAdmin

    async def next_producer_id(self) -> int: ...

    # -- background work, cancelled when the broker stops --------------------------------
    def schedule(self, name: str, interval_ms: int, job: Callable[[], object],
                 off_loop: bool = False) -> None: ...

