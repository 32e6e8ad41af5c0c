"""What the ACL tests share: a broker whose data directory holds topics, committed offsets,
open transactions and ACLs made as a super user, restarted without super users so that
User:ANONYMOUS (every PLAINTEXT connection) has exactly these ACLs:

    topics   "ok-*"     (PREFIXED)  READ, WRITE, DELETE, ALTER, ALTER_CONFIGS, CREATE
             "seen"     (LITERAL)   DESCRIBE only          -> denied but described
             "hidden"               nothing                -> denied and not listed
    groups   "g-ok*"    (PREFIXED)  READ, DELETE
             "g-seen"               DESCRIBE only
    txn ids  "tx-ok"                WRITE
             "tx-seen"              DESCRIBE only
    cluster  from ADMIN_HOST only   DESCRIBE, ALTER, CLUSTER_ACTION, ALTER_CONFIGS

Clients connect from 127.0.0.1; raw connections bound to ADMIN_HOST (127.0.0.2, also
loopback) show the cluster-level APIs allowed, so one principal covers both sides through
the ACLs' host field.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_wire import RawConnection

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
              "transaction.state.log.num.partitions": "1",
              "share.coordinator.state.topic.num.partitions": "1"}
ANON = "User:ANONYMOUS"
ADMIN_HOST = "127.0.0.2"
Op = AclOperation
PREFIXED = ResourcePatternType.PREFIXED

TOPICS = ("ok-a", "ok-c", "ok-del", "ok-parts", "ok-txn", "seen", "hidden")
# Groups with offsets committed before the restart: (group, topics).
COMMITTED = {"g-ok-1": ("ok-a", "hidden"), "g-seen": ("ok-a",), "g-ok-del": ("ok-a",),
             "g-ok-offdel": ("ok-a", "seen"), "g-hidden": ("ok-a",)}
# Transactions left open before the restart: (transactional id, topics).
OPEN_TXNS = {"tx-seen": ("ok-txn", "hidden"), "tx-hidden": ("ok-txn",)}
TXN_TIMEOUT_MS = 900000
_RETRIABLE = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.COORDINATOR_NOT_AVAILABLE)


def acl(rtype: ResourceType, name: str, op: AclOperation,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL, host: str = "*",
        principal: str = ANON,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


ACLS = [
    *(acl(ResourceType.TOPIC, "ok-", op, PREFIXED)
      for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS, Op.CREATE)),
    acl(ResourceType.TOPIC, "seen", Op.DESCRIBE),
    acl(ResourceType.GROUP, "g-ok", Op.READ, PREFIXED),
    acl(ResourceType.GROUP, "g-ok", Op.DELETE, PREFIXED),
    acl(ResourceType.GROUP, "g-seen", Op.DESCRIBE),
    acl(ResourceType.TRANSACTIONAL_ID, "tx-ok", Op.WRITE),
    acl(ResourceType.TRANSACTIONAL_ID, "tx-seen", Op.DESCRIBE),
    *(acl(ResourceType.BROKER, "kafka-cluster", op, host=ADMIN_HOST)
      for op in (Op.DESCRIBE, Op.ALTER, Op.CLUSTER_ACTION, Op.ALTER_CONFIGS)),
]


ALLOWED, DENIED, DESCRIBED = "allowed", "denied", "described"
# (API, case, what is done, call, expected): the call answers the error code it met (0:
# none); an allowed case must meet no authorization error, the others exactly `expected`.
Row = tuple[int, str, str, Callable[[str], int], "ErrorCode | None"]
AUTH_ERRORS = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
               ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
               ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
K = m.ApiKey
# Served by brokers on ZooKeeper only.
CLUSTER_ONLY_APIS = {K.CONTROLLED_SHUTDOWN, K.ALTER_PARTITION_REASSIGNMENTS,
                     K.LIST_PARTITION_REASSIGNMENTS}


def raw(bs: str, api: int, version: int, body: Any, admin: bool | str = False) -> Any:
    """One request on a fresh connection, from ADMIN_HOST when `admin` is True, from that
    address when it is one."""
    source = admin if isinstance(admin, str) else ADMIN_HOST if admin else None
    with RawConnection(bs, source_host=source) as conn:
        return conn.request(api, version, body)


def cluster_call(bs: str, api: int, admin: bool | str) -> int:
    body = {
        K.CONTROLLED_SHUTDOWN: (3, m.ControlledShutdownRequest(broker_id=7, broker_epoch=-1)),
        K.ALTER_PARTITION_REASSIGNMENTS: (0, m.AlterPartitionReassignmentsRequest(
            timeout_ms=5000, topics=[m.AlterPartitionReassignmentsRequest.ReassignableTopic(
                name="ok-a", partitions=[m.AlterPartitionReassignmentsRequest.
                                         ReassignableTopic.ReassignablePartition(
                                             partition_index=0, replicas=[1])])])),
        K.LIST_PARTITION_REASSIGNMENTS: (0, m.ListPartitionReassignmentsRequest(
            timeout_ms=5000, topics=None)),
        K.DESCRIBE_ACLS: (3, m.DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1)),
        K.CREATE_ACLS: (3, m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="acl-probe", resource_pattern_type=3,
            principal="User:nobody", host="*", operation=3, permission_type=3)])),
        K.DELETE_ACLS: (3, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=2, resource_name_filter="acl-probe", pattern_type_filter=3,
            principal_filter="User:nobody", host_filter=None, operation=3,
            permission_type=3)])),
        K.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, m.DescribeUserScramCredentialsRequest(
            users=None)),
        K.ALTER_USER_SCRAM_CREDENTIALS: (0, m.AlterUserScramCredentialsRequest(
            deletions=[m.AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                name="nobody", mechanism=1)], upsertions=[])),
        K.DESCRIBE_CLIENT_QUOTAS: (1, m.DescribeClientQuotasRequest(components=[])),
        K.ALTER_CLIENT_QUOTAS: (1, m.AlterClientQuotasRequest(validate_only=True, entries=[
            m.AlterClientQuotasRequest.EntryData(
                entity=[m.AlterClientQuotasRequest.EntryData.EntityData(
                    entity_type="client-id", entity_name="app")],
                ops=[m.AlterClientQuotasRequest.EntryData.OpData(
                    key="producer_byte_rate", value=1024.0)])])),
    }[api]
    r = raw(bs, api, body[0], body[1], admin)
    top = int(getattr(r, "error_code", 0))
    if top:
        return top
    nested = (getattr(r, "responses", None) or getattr(r, "results", None)
              or getattr(r, "filter_results", None) or getattr(r, "entries", None) or [])
    return next((int(x.error_code) for x in nested if getattr(x, "error_code", 0)), 0)


def cluster_rows(apis: Iterable[int], allowed_from: str = ADMIN_HOST,
                 denied_from: str = "127.0.0.1") -> list[Row]:
    """Raw requests needing a cluster permission: allowed from `allowed_from`, denied
    (CLUSTER_AUTHORIZATION_FAILED) from `denied_from`."""
    return [(api, case, f"raw from {host}",
             (lambda api, host: lambda bs: cluster_call(bs, api, host))(api, host),
             None if case == ALLOWED else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for api in apis
            for case, host in ((ALLOWED, allowed_from), (DENIED, denied_from))]


def _open_transaction(bs: str, txn_id: str, topics: tuple[str, ...]) -> None:
    """InitProducerId and AddPartitionsToTxn: the transaction is Ongoing, with no record
    written (so no partition's last stable offset is held back)."""
    # FindCoordinator creates __transaction_state; the coordinator answers once loaded.
    for _ in range(100):
        raw(bs, m.ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(key=txn_id, key_type=1))
        init = raw(bs, m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=TXN_TIMEOUT_MS))
        if init.error_code not in _RETRIABLE:
            break
        time.sleep(0.1)
    assert init.error_code == 0, init
    add = raw(bs, m.ApiKey.ADD_PARTITIONS_TO_TXN, 3, m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch, v3_and_below_topics=[
            m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=[0])
            for t in topics]))
    assert all(p.partition_error_code == 0 for t in add.results_by_topic_v3_and_below
               for p in t.results_by_partition), add


def prepare(bs: str) -> None:
    """As a super user: the topics, records, committed offsets, open transactions, ACLs."""
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        f.result(15)
    producer = Producer({"bootstrap.servers": bs})
    for topic in ("ok-a", "ok-c", "seen", "hidden"):
        for i in range(3):
            producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(15) == 0
    for group, topics in COMMITTED.items():
        c = Consumer({"bootstrap.servers": bs, "group.id": group})
        try:
            c.commit(offsets=[TopicPartition(t, 0, 1) for t in topics], asynchronous=False)
        finally:
            c.close()
    for txn_id, topics in OPEN_TXNS.items():
        _open_transaction(bs, txn_id, topics)
    for f in admin.create_acls(ACLS).values():
        assert f.result(10) is None


def prepared_data(tmp: Path) -> Path:
    """A data directory prepared by `prepare` on a broker with super.users=User:ANONYMOUS."""
    with EmbeddedBroker(tmp, config={**AUTHORIZER, "super.users": ANON}) as b:
        prepare(b.bootstrap_servers)
    return tmp
