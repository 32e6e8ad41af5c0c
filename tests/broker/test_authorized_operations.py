"""Authorized operations (KIP-430) as admin clients read them: Metadata (topics and
cluster), DescribeCluster, DescribeGroups and ConsumerGroupDescribe report every operation
that applies when asked (no authorizer), and -2147483648 when not asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient
from kafka.admin import KafkaAdminClient

from ads.broker.authorized_operations import (
    ALLOW_ALL,
    NOT_REQUESTED,
    ResourceType,
    authorized_operations,
    bit_set,
)
from ads.broker.authorized_operations import AclOperation as Op
from ads.metadata.acl import AccessControlEntry, AclPermissionType, PatternType, ResourcePattern
from ads.metadata.acl_stores import EmbeddedAclStore
from ads.metadata.embedded import EmbeddedMetadataStore
from ads.net.server import ConnectionInfo
from ads.protocol import messages as m
from ads.security.authorizer import AclAuthorizer
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
             "ALTER_CONFIGS"}
CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
               "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE"}
CONFIG = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}


def names(ops: list[AclOperation] | None) -> set[str]:
    assert ops is not None
    return {op.name for op in ops}


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=CONFIG) as b:
        create_topic(b.bootstrap_servers, "t")
        yield b


def test_authorized_operations_confluent_topics_and_cluster(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    described = admin.describe_topics(TopicCollection(["t"]),
                                      include_authorized_operations=True)["t"].result(10)
    assert names(described.authorized_operations) == TOPIC_OPS
    plain = admin.describe_topics(TopicCollection(["t"]))["t"].result(10)
    assert not plain.authorized_operations
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert names(cluster.authorized_operations) == CLUSTER_OPS
    assert not admin.describe_cluster().result(10).authorized_operations


def test_authorized_operations_confluent_groups(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    consumers = {
        "classic": Consumer({"bootstrap.servers": bs, "group.id": "classic"}),
        "modern": Consumer({"bootstrap.servers": bs, "group.id": "modern",
                            "group.protocol": "consumer"}),
    }
    try:
        for c in consumers.values():
            c.subscribe(["t"])
        for _ in range(100):
            for c in consumers.values():
                c.poll(0.1)
            if all(c.assignment() for c in consumers.values()):
                break
        admin = AdminClient({"bootstrap.servers": bs})
        for group in consumers:
            d = admin.describe_consumer_groups(
                [group], include_authorized_operations=True)[group].result(10)
            assert names(d.authorized_operations) == GROUP_OPS, group
            plain = admin.describe_consumer_groups([group])[group].result(10)
            assert not plain.authorized_operations
    finally:
        for c in consumers.values():
            c.close()


def test_authorized_operations_kafka_python(broker: EmbeddedBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        cluster = admin.describe_cluster()
        assert set(cluster["authorized_operations"]) == CLUSTER_OPS
        topic = admin.describe_topics(["t"])[0]
        assert set(topic["authorized_operations"]) == TOPIC_OPS
    finally:
        admin.close()


def test_authorized_operations_not_requested_by_version(broker: EmbeddedBroker) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        topic = [m.MetadataRequest.MetadataRequestTopic(name="t")]
        asked = conn.request(3, 10, m.MetadataRequest(
            topics=topic, include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True))
        assert asked.topics[0].topic_authorized_operations == bit_set(
            Op[n] for n in TOPIC_OPS)
        assert asked.cluster_authorized_operations == bit_set(Op[n] for n in CLUSTER_OPS)
        for version in (7, 12):  # before KIP-430, and after the cluster field left Metadata
            r = conn.request(3, version, m.MetadataRequest(
                topics=topic, include_cluster_authorized_operations=True))
            assert r.cluster_authorized_operations == NOT_REQUESTED
            assert r.topics[0].topic_authorized_operations == NOT_REQUESTED
        # The cached topic entry shared with other responses is left as it was.
        again = conn.request(3, 12, m.MetadataRequest(topics=topic))
        assert again.topics[0].topic_authorized_operations == NOT_REQUESTED


def test_authorized_operations_authorizer_replaces_the_bits(tmp_path: Path) -> None:
    store = EmbeddedMetadataStore(tmp_path, 1)
    store.acls[ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)] = frozenset({
        AccessControlEntry("User:alice", "*", Op.READ, AclPermissionType.ALLOW)})
    authorizer = AclAuthorizer(EmbeddedAclStore(store))
    alice = ConnectionInfo(1, "127.0.0.1:1", principal="User:alice")
    bob = ConnectionInfo(2, "127.0.0.1:2", principal="User:bob")
    # READ implies DESCRIBE.
    assert authorized_operations(authorizer, alice, ResourceType.TOPIC, "t") == (
        1 << 3 | 1 << 8)
    assert authorized_operations(authorizer, bob, ResourceType.TOPIC, "t") == 0
    assert authorized_operations(ALLOW_ALL, bob, ResourceType.GROUP, "g") == (
        1 << 3 | 1 << 6 | 1 << 8)
