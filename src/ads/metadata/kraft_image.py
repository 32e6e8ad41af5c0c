"""The cluster model rebuilt from KRaft metadata records: ADS's topics and brokers as the
controller's log says they are.

`MetadataImage.replay` applies one record, in log order, and says what it touched. The
rules follow the controller's own (what a record means is Kafka's definition):

- TopicRecord makes a topic without partitions; PartitionRecord adds (or replaces) one
  partition of it; RemoveTopicRecord drops the topic with its configs.
- PartitionChangeRecord changes only what it carries: a null replicas or ISR, leader -2
  (no change) and an empty directories list leave the value as it was. A new leader
  (any value but -2, even the same broker) bumps the leader epoch by one; every change bumps
  the partition epoch, which AlterPartition must quote.
- RegisterBrokerRecord (re)registers a broker with its listeners, rack and fencing;
  BrokerRegistrationChangeRecord's `fenced` is 1 (fence), -1 (unfence) or 0 (no change);
  FenceBrokerRecord and UnfenceBrokerRecord are the older way to say the same; a change
  whose broker epoch is not the registered one is about a registration that is gone and is
  ignored; UnregisterBrokerRecord removes the broker.
- ConfigRecord sets (or, with a null value, removes) a config key of a topic (resource
  type 2), a broker (4; name "" for the cluster default) or a group (32). Broker and group
  configs, client quotas (ClientQuotaRecord, for users, client ids or both; "ip" entities
  are not modelled) and SCRAM credentials (UserScramCredentialRecord and its removal) make
  ADS's entity configs (`ads.metadata.entity_config`), as the ZooKeeper store's
  `/config/...` znodes do.
- Records between BeginTransactionRecord and EndTransactionRecord apply together at the
  end; AbortTransactionRecord drops them.
- AccessControlEntryRecord adds one ACL entry under its id; RemoveAccessControlEntryRecord
  removes the entry of that id. `acls` is the view the ACL authorizer reads
  (`ads.metadata.acl`), changed in place; `acl_version` counts its changes.
- Records for what ADS's model does not hold yet (delegation tokens, controller
  registrations, eligible leader replicas) are counted by type and otherwise ignored.

Not thread-safe: owned by the store, on the broker's event loop.
"""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ads.metadata import kraft_records as r
from ads.metadata.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from ads.metadata.entity_config import (
    DEFAULT,
    broker_entity_path,
    entity_path,
    group_entity_path,
)
from ads.metadata.model import BrokerEndpoint, ListenerEndpoint, PartitionState, TopicState
from ads.protocol.base import Message

NO_LEADER_CHANGE = -2
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
USER, CLIENT_ID = "user", "client-id"  # ClientQuotaRecord's entity types
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
FENCE, UNFENCE = 1, -1
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


@dataclass(slots=True)
class BrokerRegistration:
    """A broker as its last registration record says, with its fencing."""

    broker_id: int
    epoch: int
    endpoint: BrokerEndpoint
    fenced: bool
    in_controlled_shutdown: bool = False


@dataclass(slots=True)
class Changes:
    """What a run of records touched: the topics by name, and whether brokers changed."""

    topics: set[str] = field(default_factory=set)
    brokers: bool = False
    entities: set[str] = field(default_factory=set)  # entity config paths

    def __bool__(self) -> bool:
        return bool(self.topics) or self.brokers or bool(self.entities)


def _set(configs: dict[str, str], key: str, value: str | None) -> None:
    if value is None:
        configs.pop(key, None)
    else:
        configs[key] = value


def _b64(data: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(bytes(data)).decode()


def _endpoint(record: r.RegisterBrokerRecord) -> BrokerEndpoint:
    endpoints = tuple(
        ListenerEndpoint(e.name, SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT"),
                         e.host, e.port) for e in record.end_points)
    first = endpoints[0] if endpoints else ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "", -1)
    return BrokerEndpoint(record.broker_id, first.host, first.port, record.rack or None,
                          endpoints)


class MetadataImage:
    """Topics, brokers, features and configs as of the last record replayed."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicState] = {}
        self.by_id: dict[uuid.UUID, TopicState] = {}
        # Partition epochs, which ADS's PartitionState does not carry, by (topic id, index).
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.features: dict[str, int] = {}
        # Broker and group configs, client quotas and SCRAM credentials by entity path.
        self.entity_configs: dict[str, dict[str, str]] = {}
        self.next_producer_id = 0
        self._acls_by_id: dict[uuid.UUID, tuple[ResourcePattern, AccessControlEntry]] = {}
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self.acl_version = 0
        self.ignored: Counter[str] = Counter()
        self._transaction: list[Message] | None = None

    def unfenced_brokers(self) -> dict[int, BrokerEndpoint]:
        return {b.broker_id: b.endpoint for b in self.brokers.values() if not b.fenced}

    def replay(self, record: Message, changes: Changes) -> None:
        """Applies `record`, noting in `changes` what it touched."""
        if isinstance(record, r.BeginTransactionRecord):
            self._transaction = []
        elif isinstance(record, r.EndTransactionRecord):
            pending, self._transaction = self._transaction or [], None
            for buffered in pending:
                self._apply(buffered, changes)
        elif isinstance(record, r.AbortTransactionRecord):
            self._transaction = None
        elif self._transaction is not None:
            self._transaction.append(record)
        else:
            self._apply(record, changes)

    def _apply(self, record: Message, changes: Changes) -> None:
        handler = _HANDLERS.get(type(record))
        if handler is None:
            self.ignored[type(record).__name__] += 1
            return
        handler(self, record, changes)

    # -- topics ----------------------------------------------------------------------------
    def _topic_record(self, record: r.TopicRecord, changes: Changes) -> None:
        topic = TopicState(record.name, record.topic_id, [])
        self.topics[record.name] = topic
        self.by_id[record.topic_id] = topic
        changes.topics.add(record.name)

    def _partition_record(self, record: r.PartitionRecord, changes: Changes) -> None:
        topic = self.by_id.get(record.topic_id)
        if topic is None:
            return
        state = PartitionState(record.partition_id, record.leader, record.leader_epoch,
                               list(record.replicas), list(record.isr))
        parts = [p for p in topic.partitions if p.partition != record.partition_id]
        parts.append(state)
        topic.partitions = sorted(parts, key=lambda p: p.partition)
        self.partition_epochs[(topic.topic_id, record.partition_id)] = record.partition_epoch
        changes.topics.add(topic.name)

    def _partition_change(self, record: r.PartitionChangeRecord, changes: Changes) -> None:
        topic = self.by_id.get(record.topic_id)
        state = None if topic is None else next(
            (p for p in topic.partitions if p.partition == record.partition_id), None)
        if topic is None or state is None:
            return
        if record.replicas is not None:
            state.replicas = list(record.replicas)
        if record.isr is not None:
            state.isr = list(record.isr)
        if record.leader != NO_LEADER_CHANGE:
            state.leader = record.leader
            state.leader_epoch += 1
        key = (topic.topic_id, record.partition_id)
        self.partition_epochs[key] = self.partition_epochs.get(key, 0) + 1
        changes.topics.add(topic.name)

    def _remove_topic(self, record: r.RemoveTopicRecord, changes: Changes) -> None:
        topic = self.by_id.pop(record.topic_id, None)
        if topic is None:
            return
        self.topics.pop(topic.name, None)
        for key in [k for k in self.partition_epochs if k[0] == record.topic_id]:
            del self.partition_epochs[key]
        changes.topics.add(topic.name)

    def _config(self, record: r.ConfigRecord, changes: Changes) -> None:
        if record.resource_type == TOPIC_RESOURCE:
            topic = self.topics.get(record.resource_name)
            if topic is None:
                return
            _set(topic.configs, record.name, record.value)
            changes.topics.add(topic.name)
        elif record.resource_type == BROKER_RESOURCE and (
                record.resource_name == "" or record.resource_name.isdigit()):
            name = record.resource_name
            self._set_entity(broker_entity_path(int(name) if name else None), record.name,
                             record.value, changes)
        elif record.resource_type == GROUP_RESOURCE:
            self._set_entity(group_entity_path(record.resource_name), record.name,
                             record.value, changes)
        else:
            self.ignored[f"ConfigRecord({record.resource_type})"] += 1

    def _set_entity(self, path: str, key: str, value: str | None, changes: Changes) -> None:
        configs = self.entity_configs.setdefault(path, {})
        _set(configs, key, value)
        if not configs:
            del self.entity_configs[path]
        changes.entities.add(path)

    def _client_quota(self, record: r.ClientQuotaRecord, changes: Changes) -> None:
        names = {e.entity_type: DEFAULT if e.entity_name is None else e.entity_name
                 for e in record.entity}
        if not names or set(names) - {USER, CLIENT_ID}:
            self.ignored["ClientQuotaRecord(ip)"] += 1
            return
        value = record.value
        text = str(int(value)) if value.is_integer() else repr(value)
        self._set_entity(entity_path(names.get(USER), names.get(CLIENT_ID)), record.key,
                         None if record.remove else text, changes)

    def _scram_credential(self, record: r.UserScramCredentialRecord, changes: Changes) -> None:
        mechanism = SCRAM_MECHANISMS.get(record.mechanism)
        if mechanism is None:
            self.ignored[f"UserScramCredentialRecord({record.mechanism})"] += 1
            return
        # ADS's form of a stored credential (`ads.security.scram.ScramCredential`).
        text = (f"salt={_b64(record.salt)},stored_key={_b64(record.stored_key)},"
                f"server_key={_b64(record.server_key)},iterations={record.iterations}")
        self._set_entity(entity_path(user=record.name), mechanism, text, changes)

    def _remove_scram_credential(self, record: r.RemoveUserScramCredentialRecord,
                                 changes: Changes) -> None:
        mechanism = SCRAM_MECHANISMS.get(record.mechanism)
        if mechanism is not None:
            self._set_entity(entity_path(user=record.name), mechanism, None, changes)

    # -- ACLs ------------------------------------------------------------------------------
    def _acl(self, record: r.AccessControlEntryRecord, _: Changes) -> None:
        try:
            binding = (ResourcePattern(ResourceType(record.resource_type), record.resource_name,
                                       PatternType(record.pattern_type)),
                       AccessControlEntry(record.principal, record.host,
                                          AclOperation(record.operation),
                                          AclPermissionType(record.permission_type)))
        except ValueError:
            self.ignored["AccessControlEntryRecord(unknown type)"] += 1
            return
        self._acls_by_id[record.id] = binding
        pattern, entry = binding
        self.acls[pattern] = self.acls.get(pattern, frozenset()) | {entry}
        self.acl_version += 1

    def _remove_acl(self, record: r.RemoveAccessControlEntryRecord, _: Changes) -> None:
        binding = self._acls_by_id.pop(record.id, None)
        if binding is None:
            return
        # The controller refuses a second entry equal to one it holds, so one id per entry.
        pattern, entry = binding
        entries = self.acls.get(pattern, frozenset()) - {entry}
        if entries:
            self.acls[pattern] = entries
        else:
            self.acls.pop(pattern, None)
        self.acl_version += 1

    # -- brokers ---------------------------------------------------------------------------
    def _register_broker(self, record: r.RegisterBrokerRecord, changes: Changes) -> None:
        self.brokers[record.broker_id] = BrokerRegistration(
            record.broker_id, record.broker_epoch, _endpoint(record), record.fenced,
            record.in_controlled_shutdown)
        changes.brokers = True

    def _registered(self, broker_id: int, epoch: int) -> BrokerRegistration | None:
        broker = self.brokers.get(broker_id)
        return broker if broker is not None and broker.epoch == epoch else None

    def _registration_change(self, record: r.BrokerRegistrationChangeRecord,
                             changes: Changes) -> None:
        broker = self._registered(record.broker_id, record.broker_epoch)
        if broker is None:
            return
        if record.fenced in (FENCE, UNFENCE):
            broker.fenced = record.fenced == FENCE
        if record.in_controlled_shutdown:
            broker.in_controlled_shutdown = True
        changes.brokers = True

    def _fence(self, record: r.FenceBrokerRecord, changes: Changes) -> None:
        broker = self._registered(record.id, record.epoch)
        if broker is not None:
            broker.fenced = True
            changes.brokers = True

    def _unfence(self, record: r.UnfenceBrokerRecord, changes: Changes) -> None:
        broker = self._registered(record.id, record.epoch)
        if broker is not None:
            broker.fenced = False
            changes.brokers = True

    def _unregister(self, record: r.UnregisterBrokerRecord, changes: Changes) -> None:
        broker = self.brokers.get(record.broker_id)
        if broker is not None and broker.epoch == record.broker_epoch:
            del self.brokers[record.broker_id]
            changes.brokers = True

    # -- cluster-wide ----------------------------------------------------------------------
    def _feature(self, record: r.FeatureLevelRecord, _: Changes) -> None:
        if record.feature_level == 0:
            self.features.pop(record.name, None)
        else:
            self.features[record.name] = record.feature_level

    def _producer_ids(self, record: r.ProducerIdsRecord, _: Changes) -> None:
        self.next_producer_id = record.next_producer_id

    def _no_op(self, record: r.NoOpRecord, _: Changes) -> None:
        """The controller's heartbeat in the log: it moves the offset, nothing else."""


_HANDLERS: dict[type[Message], Callable[[MetadataImage, Any, Changes], None]] = {
    r.TopicRecord: MetadataImage._topic_record,
    r.PartitionRecord: MetadataImage._partition_record,
    r.PartitionChangeRecord: MetadataImage._partition_change,
    r.RemoveTopicRecord: MetadataImage._remove_topic,
    r.ConfigRecord: MetadataImage._config,
    r.AccessControlEntryRecord: MetadataImage._acl,
    r.RemoveAccessControlEntryRecord: MetadataImage._remove_acl,
    r.ClientQuotaRecord: MetadataImage._client_quota,
    r.UserScramCredentialRecord: MetadataImage._scram_credential,
    r.RemoveUserScramCredentialRecord: MetadataImage._remove_scram_credential,
    r.RegisterBrokerRecord: MetadataImage._register_broker,
    r.BrokerRegistrationChangeRecord: MetadataImage._registration_change,
    r.FenceBrokerRecord: MetadataImage._fence,
    r.UnfenceBrokerRecord: MetadataImage._unfence,
    r.UnregisterBrokerRecord: MetadataImage._unregister,
    r.FeatureLevelRecord: MetadataImage._feature,
    r.ProducerIdsRecord: MetadataImage._producer_ids,
    r.NoOpRecord: MetadataImage._no_op,
}
