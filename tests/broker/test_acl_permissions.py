"""ACLs against the permission table (`ads.broker.permissions`), driven by confluent-kafka
and, where no client call exposes an API alone, raw requests.

Phase one runs with `super.users=User:ANONYMOUS` and creates topics, groups and ACLs with
the admin client; phase two restarts the broker on the same data directory without super
users, so the ACLs must have survived the restart and User:ANONYMOUS (every PLAINTEXT
connection) is an ordinary principal with exactly those ACLs:

    topics   "ok-*"   (PREFIXED)  READ, WRITE, DELETE, ALTER, ALTER_CONFIGS, CREATE
             "seen"   (LITERAL)   DESCRIBE only         -> denied but described
             "hidden"             nothing               -> denied and not listed
    groups   "g-ok*"  (PREFIXED)  READ, DELETE
    txn id   "tx-ok"              WRITE
    cluster                       DESCRIBE (ACLs may be listed, not changed)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ads.broker.handlers import all_handlers
from ads.broker.permissions import PERMISSIONS
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_wire import RawConnection

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}
ANON = "User:ANONYMOUS"


def allow(rtype: ResourceType, name: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, ANON, "*", op, AclPermissionType.ALLOW)


ACLS = [
    *(allow(ResourceType.TOPIC, "ok-", op, ResourcePatternType.PREFIXED)
      for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                 AclOperation.ALTER, AclOperation.ALTER_CONFIGS, AclOperation.CREATE)),
    allow(ResourceType.TOPIC, "seen", AclOperation.DESCRIBE),
    allow(ResourceType.GROUP, "g-ok", AclOperation.READ, ResourcePatternType.PREFIXED),
    allow(ResourceType.GROUP, "g-ok", AclOperation.DELETE, ResourcePatternType.PREFIXED),
    allow(ResourceType.TRANSACTIONAL_ID, "tx-ok", AclOperation.WRITE),
    allow(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
]


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("acl")
    with EmbeddedBroker(data, config={**AUTHORIZER, "super.users": ANON}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in
                                      ("ok-a", "ok-b", "seen", "hidden")]).values():
            f.result(15)
        for f in admin.create_acls(ACLS).values():
            assert f.result(10) is None
    with EmbeddedBroker(data, config=AUTHORIZER) as b:
        yield b.bootstrap_servers


def _admin(bs: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bs})


def _error(fn: Callable[[], Any]) -> str | None:
    """The Kafka error name a client call fails with, or None when it succeeds."""
    try:
        fn()
    except KafkaException as exc:
        return str(exc.args[0].name())
    return None


def _call(bs: str, fn: Callable[[AdminClient], Any]) -> str | None:
    admin = _admin(bs)  # kept alive until its futures are done
    return _error(lambda: fn(admin))


def _produce(bs: str, topic: str, **extra: Any) -> str | None:
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 5000, **extra})
    errors: list[KafkaError] = []
    p.produce(topic, b"v", on_delivery=lambda err, _: errors.append(err))
    p.flush(10)
    return errors[0].name() if errors and errors[0] else None


def _raw(bs: str, api: int, version: int, body: Any) -> Any:
    with RawConnection(bs) as conn:
        return conn.request(api, version, body)


def _join(bs: str, group: str) -> int:
    r = _raw(bs, m.ApiKey.JOIN_GROUP, 9, m.JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
        protocol_type="consumer", protocols=[
            m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    return int(r.error_code)


def _commit(bs: str, group: str, topic: str) -> int:
    part = m.OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=0, committed_metadata="")
    r = _raw(bs, m.ApiKey.OFFSET_COMMIT, 8, m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[part])]))
    return int(r.topics[0].partitions[0].error_code)


def _end_txn(bs: str, txn: str) -> int:
    return int(_raw(bs, m.ApiKey.END_TXN, 3, m.EndTxnRequest(
        transactional_id=txn, producer_id=1, producer_epoch=0, committed=True)).error_code)


def _list_offsets(bs: str, topic: str) -> int:
    L = m.ListOffsetsRequest  # noqa: N806
    r = _raw(bs, m.ApiKey.LIST_OFFSETS, 7, L(replica_id=-1, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, timestamp=-1)])]))
    return int(r.topics[0].partitions[0].error_code)


def _describe_configs(bs: str, topic: str) -> str | None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return _call(bs, lambda a: a.describe_configs([res])[res].result(10))


AUTH = {e: e.name for e in (ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            ErrorCode.GROUP_AUTHORIZATION_FAILED,
                            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}

# (API, what is done, allowed call, denied call, the error the denied call gets). Each call
# returns an error name or code (None / 0: success or a non-authorization outcome).
TABLE: list[tuple[str, Callable[[str], Any], Callable[[str], Any], ErrorCode]] = [
    ("PRODUCE WRITE topic", lambda bs: _produce(bs, "ok-a"),
     lambda bs: _produce(bs, "seen"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("PRODUCE idempotent (WRITE on a topic)", lambda bs: _produce(bs, "ok-a",
                                                                  **{"enable.idempotence": True}),
     lambda bs: _produce(bs, "hidden"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("LIST_OFFSETS DESCRIBE topic", lambda bs: _list_offsets(bs, "seen"),
     lambda bs: _list_offsets(bs, "hidden"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("CREATE_TOPICS CREATE", lambda bs: _call(bs, lambda a: a.create_topics(
        [NewTopic("ok-new", 1, 1)])["ok-new"].result(15)),
     lambda bs: _call(bs, lambda a: a.create_topics(
         [NewTopic("nope", 1, 1)])["nope"].result(15)), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("CREATE_PARTITIONS ALTER", lambda bs: _call(bs, lambda a: a.create_partitions(
        [NewPartitions("ok-b", 2)])["ok-b"].result(15)),
     lambda bs: _call(bs, lambda a: a.create_partitions(
         [NewPartitions("seen", 2)])["seen"].result(15)), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("DESCRIBE_CONFIGS (ALTER_CONFIGS implies it)", lambda bs: _describe_configs(bs, "ok-a"),
     lambda bs: _describe_configs(bs, "seen"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("JOIN_GROUP READ group", lambda bs: _join(bs, "g-ok-1"), lambda bs: _join(bs, "g-no"),
     ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("OFFSET_COMMIT READ group", lambda bs: _commit(bs, "g-ok-2", "ok-a"),
     lambda bs: _commit(bs, "g-no", "ok-a"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("OFFSET_COMMIT READ topic", lambda bs: _commit(bs, "g-ok-1", "ok-a"),
     lambda bs: _commit(bs, "g-ok-1", "seen"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("END_TXN WRITE transactional id", lambda bs: _end_txn(bs, "tx-ok"),
     lambda bs: _end_txn(bs, "tx-no"), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("DELETE_TOPICS DELETE", lambda bs: _call(bs, lambda a: a.delete_topics(
        ["ok-new"])["ok-new"].result(15)),
     lambda bs: _call(bs, lambda a: a.delete_topics(["seen"])["seen"].result(15)),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("DESCRIBE_CLIENT_QUOTAS DESCRIBE_CONFIGS cluster", None,  # type: ignore[list-item]
     lambda bs: _raw(bs, m.ApiKey.DESCRIBE_CLIENT_QUOTAS, 1,
                     m.DescribeClientQuotasRequest()).error_code,
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("ALTER_CLIENT_QUOTAS ALTER_CONFIGS cluster", None,  # type: ignore[list-item]
     lambda bs: _raw(bs, m.ApiKey.ALTER_CLIENT_QUOTAS, 1, m.AlterClientQuotasRequest(
         entries=[m.AlterClientQuotasRequest.EntryData(
             entity=[m.AlterClientQuotasRequest.EntryData.EntityData(
                 entity_type="client-id", entity_name="app")],
             ops=[m.AlterClientQuotasRequest.EntryData.OpData(
                 key="producer_byte_rate", value=1024.0)])])).entries[0].error_code,
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("CREATE_ACLS ALTER cluster", None,  # type: ignore[list-item]
     lambda bs: _call(bs, lambda a: list(a.create_acls(
         [allow(ResourceType.TOPIC, "x", AclOperation.READ)]).values())[0].result(10)),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
]


def _is(outcome: Any, code: ErrorCode) -> bool:
    return outcome == code.name or outcome == int(code)


@pytest.mark.parametrize(("name", "allowed", "denied", "code"), TABLE,
                         ids=[row[0] for row in TABLE])
def test_acl_permissions_table(bootstrap: str, name: str, allowed: Callable[[str], Any] | None,
                               denied: Callable[[str], Any], code: ErrorCode) -> None:
    if allowed is not None:
        outcome = allowed(bootstrap)
        assert not any(_is(outcome, c) for c in AUTH), (name, outcome)
    assert _is(denied(bootstrap), code), name


def test_acl_permissions_metadata_lists_only_described_topics(bootstrap: str) -> None:
    listed = _admin(bootstrap).list_topics(timeout=10).topics
    assert {"ok-a", "ok-b", "seen"} <= set(listed)
    assert "hidden" not in listed
    # Named explicitly: refused, whether or not it exists.
    r = _raw(bootstrap, m.ApiKey.METADATA, 12, m.MetadataRequest(topics=[
        m.MetadataRequest.MetadataRequestTopic(name=n) for n in ("hidden", "no-such")],
        allow_auto_topic_creation=False))
    assert [t.error_code for t in r.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED] * 2


def test_acl_permissions_consumer_group_and_list_groups(bootstrap: str) -> None:
    _produce(bootstrap, "ok-b")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-ok-consumer",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["ok-b"])
        got = None
        for _ in range(100):
            got = c.poll(0.2)
            if got is not None and got.error() is None:
                break
        assert got is not None and got.value() == b"v"
        c.commit(asynchronous=False)
        # ok-b may have grown to two partitions (the CreatePartitions row).
        committed = c.committed([TopicPartition("ok-b", p) for p in (0, 1)], timeout=10)
        assert max(tp.offset for tp in committed) >= 1
    finally:
        c.close()
    denied = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-no"})
    try:
        denied.subscribe(["ok-b"])
        errors = []
        for _ in range(50):
            msg = denied.poll(0.2)
            if msg is not None and msg.error():
                errors.append(msg.error().code())
                break
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    finally:
        denied.close()
    admin = _admin(bootstrap)
    groups = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    # DESCRIBE on the cluster lists every group.
    assert "g-ok-consumer" in groups


def test_acl_permissions_describe_acls_and_authorized_operations(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    flt = AclBindingFilter(ResourceType.TOPIC, "ok-a", ResourcePatternType.MATCH, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(flt).result(10)
    assert {b.operation for b in found} == {AclOperation.READ, AclOperation.WRITE,
                                            AclOperation.DELETE, AclOperation.ALTER,
                                            AclOperation.ALTER_CONFIGS, AclOperation.CREATE}
    from confluent_kafka import TopicCollection  # noqa: PLC0415
    d = admin.describe_topics(TopicCollection(["seen"]), include_authorized_operations=True)
    assert {op.name for op in d["seen"].result(10).authorized_operations} == {"DESCRIBE"}
    # The cluster: DESCRIBE only; DescribeCluster reports it.
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert {op.name for op in cluster.authorized_operations} == {"DESCRIBE"}


def test_acl_permissions_table_covers_every_api() -> None:
    served = {h.api_key for h in all_handlers(cluster=True)}
    assert served == set(PERMISSIONS)


def test_acl_permissions_no_authorizer_security_disabled(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path) as b:
        r = _raw(b.bootstrap_servers, m.ApiKey.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1,
            resource_name_filter=None, principal_filter=None, host_filter=None))
        assert r.error_code == ErrorCode.SECURITY_DISABLED


def test_acl_permissions_unknown_authorizer_refused() -> None:
    from ads.broker.config import ConfigError, load_broker_config  # noqa: PLC0415
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        load_broker_config(None, {}, ["authorizer.class.name=com.example.Mine"])
