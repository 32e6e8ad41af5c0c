"""ACLs against the permission table (`ads.broker.permissions`): every API the broker serves
has an allowed and a denied case (and a denied-but-described one where the table says what
DESCRIBE alone gives), driven by confluent-kafka, kafka-python and kcat where they expose
the API and by raw requests otherwise. One broker for the module, prepared as a super user
and restarted without super users (`acl_support`), so the ACLs also survive a restart.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResourceType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ConfigResource as KConfig
from kafka.admin import ResourceType as KRType
from kafka.errors import KafkaError as KPError

from acl_support import (
    ALLOWED,
    AUTH_ERRORS,
    AUTHORIZER,
    CLUSTER_ONLY_APIS,
    DENIED,
    DESCRIBED,
    OPEN_TXNS,
    Row,
    acl,
    cluster_rows,
    prepared_data,
    raw,
)
from ads.broker.handlers import all_handlers
from ads.broker.permissions import PERMISSIONS
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker
from kafka_wire import RawConnection
from share_support import share_state_request

E = ErrorCode
K = m.ApiKey
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = prepared_data(tmp_path_factory.mktemp("acl"))
    with EmbeddedBroker(data, config={**AUTHORIZER, "group.share.enable": "true"}) as b:
        yield b.bootstrap_servers


# -- calls: each returns the Kafka error code it met (0: none) ------------------------------
def _code(fn: Callable[[], Any]) -> int:
    """The error code a client call fails with (confluent-kafka or kafka-python), or 0."""
    try:
        fn()
    except KafkaException as exc:
        return int(exc.args[0].code())
    except KPError as exc:
        return int(exc.errno)
    return 0


def _admin(bs: str, fn: Callable[[AdminClient], Any]) -> int:
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until its futures are done
    return _code(lambda: fn(admin))


def _kp_admin(bs: str, fn: Callable[[KafkaAdminClient], Any]) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        return _code(lambda: fn(admin))
    finally:
        admin.close()


def _produce(bs: str, topic: str, **extra: Any) -> int:
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 5000, **extra})
    errors: list[KafkaError] = []
    p.produce(topic, b"v", on_delivery=lambda err, _: errors.append(err))
    p.flush(10)
    return int(errors[0].code()) if errors and errors[0] else 0


def _kp_produce(bs: str, topic: str) -> int:
    p = KafkaProducer(bootstrap_servers=bs)
    try:
        return _code(lambda: p.send(topic, b"v").get(10))
    finally:
        p.close(5)


def _consume(bs: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": "g-ok-reader",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        for _ in range(50):
            msg = c.poll(0.2)
            if msg is not None:
                return int(msg.error().code()) if msg.error() else 0
        return -1  # neither a record nor an error: fails every expectation
    finally:
        c.close()


def _kp_consume(bs: str, topic: str) -> int:
    c = KafkaConsumer(bootstrap_servers=bs, group_id=None)
    try:
        c.assign([KTP(topic, 0)])
        c.seek_to_beginning()
        for _ in range(20):
            try:
                if c.poll(500):
                    return 0
            except KPError as exc:
                return int(exc.errno)
        return -1  # neither a record nor an error: fails every expectation
    finally:
        c.close()


def _kcat(bs: str, *args: str) -> str:
    assert KCAT, "kcat is installed by `make test` (Debian package kcat)"
    r = subprocess.run([KCAT, "-b", bs, *args], capture_output=True, text=True, timeout=60)
    return f"{r.returncode} {r.stdout} {r.stderr}"


def _parts(topics: list[Any], parts: str, code: str = "error_code") -> int:
    """The first nonzero error code of a response's topics' partitions (or 0)."""
    return next((int(getattr(p, code)) for t in topics for p in getattr(t, parts)
                 if getattr(p, code)), 0)


def _fetch(bs: str, topic: str, replica_id: int = -1, admin: bool = False) -> int:
    F = m.FetchRequest  # noqa: N806
    r = raw(bs, K.FETCH, 12, F(replica_id=replica_id, max_wait_ms=0, topics=[F.FetchTopic(
        topic=topic, partitions=[F.FetchTopic.FetchPartition(partition=0, fetch_offset=0)])]),
        admin)
    return _parts(r.responses, "partitions")


def _raw_produce(bs: str, txn: str | None, transactional: bool = True) -> int:
    """One batch to ok-a, transactional or not, under a transactional id or none."""
    P = m.ProduceRequest  # noqa: N806
    batch = build_batch([(None, b"v")], producer_id=99, producer_epoch=0, base_sequence=0,
                        is_transactional=transactional)
    r = raw(bs, K.PRODUCE, 9, P(transactional_id=txn, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name="ok-a", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=batch)])]))
    return _parts(r.responses, "partition_responses")


def _metadata(bs: str, topic: str, auto_create: bool = False) -> int:
    r = raw(bs, K.METADATA, 12, m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=auto_create))
    return int(r.topics[0].error_code)


def _dtp(bs: str, topic: str) -> int:
    Q = m.DescribeTopicPartitionsRequest  # noqa: N806
    r = raw(bs, K.DESCRIBE_TOPIC_PARTITIONS, 0, Q(topics=[Q.TopicRequest(name=topic)]))
    return int(r.topics[0].error_code)


def _dtp_all(bs: str) -> set[str]:
    r = raw(bs, K.DESCRIBE_TOPIC_PARTITIONS, 0, m.DescribeTopicPartitionsRequest(topics=[]))
    return {t.name for t in r.topics}


def _cluster_ops(bs: str, admin: bool) -> int:
    r = raw(bs, K.DESCRIBE_CLUSTER, 0, m.DescribeClusterRequest(
        include_cluster_authorized_operations=True), admin)
    return int(r.cluster_authorized_operations)


def _list_offsets(bs: str, topic: str) -> int:
    return _admin(bs, lambda a: a.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()})[
        TopicPartition(topic, 0)].result(10))


def _raw_list_offsets(bs: str, topic: str) -> int:
    L = m.ListOffsetsRequest  # noqa: N806
    r = raw(bs, K.LIST_OFFSETS, 7, L(replica_id=-1, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, timestamp=-1)])]))
    return _parts(r.topics, "partitions")


def _leader_epoch(bs: str, topic: str, replica_id: int = -1, admin: bool = False) -> int:
    L = m.OffsetForLeaderEpochRequest  # noqa: N806
    r = raw(bs, K.OFFSET_FOR_LEADER_EPOCH, 4, L(replica_id=replica_id, topics=[
        L.OffsetForLeaderTopic(topic=topic, partitions=[
            L.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, leader_epoch=0)])]),
        admin)
    return _parts(r.topics, "partitions")


def _describe_configs(bs: str, rtype: ConfigResource.Type, name: str) -> int:
    res = ConfigResource(rtype, name)
    return _admin(bs, lambda a: a.describe_configs([res])[res].result(10))


def _raw_broker_configs(bs: str, admin: bool) -> int:
    D = m.DescribeConfigsRequest  # noqa: N806
    r = raw(bs, K.DESCRIBE_CONFIGS, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=4, resource_name="1", configuration_keys=None)]), admin)
    return int(r.results[0].error_code)


def _log_dirs(bs: str, admin: bool) -> int:
    r = raw(bs, K.DESCRIBE_LOG_DIRS, 4, m.DescribeLogDirsRequest(topics=None), admin)
    if r.error_code == 0 and not r.results:
        return -1  # allowed must list the directories
    if r.error_code != 0 and r.results:
        return -1  # denied must list nothing
    return int(r.error_code)


def _alter_log_dirs(bs: str, admin: bool) -> int:
    """Into the directory the replica is in: NONE when allowed, nothing moves."""
    here = raw(bs, K.DESCRIBE_LOG_DIRS, 4, m.DescribeLogDirsRequest(topics=None), True)
    req = m.AlterReplicaLogDirsRequest(dirs=[m.AlterReplicaLogDirsRequest.AlterReplicaLogDir(
        path=here.results[0].log_dir, topics=[
            m.AlterReplicaLogDirsRequest.AlterReplicaLogDir.AlterReplicaLogDirTopic(
                name="ok-a", partitions=[0])])])
    r = raw(bs, K.ALTER_REPLICA_LOG_DIRS, 2, req, admin)
    return int(r.results[0].partitions[0].error_code)


def _incremental_alter(bs: str, topic: str) -> int:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[ConfigEntry(
        "retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    return _admin(bs, lambda a: a.incremental_alter_configs([res])[res].result(10))


def _kp_alter_configs(bs: str, topic: str) -> int:
    res = KConfig(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "86400000"})
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        # kafka-python answers {"topic": {name: "OK" or "[Error N] Name: ..."}}.
        outcome = admin.alter_configs([res], raise_on_unknown=False)["topic"][topic]
    finally:
        admin.close()
    found = re.match(r"\[Error (\d+)\]", outcome)
    return int(found.group(1)) if found else (0 if outcome == "OK" else -1)


def _find_coordinator(bs: str, key: str, key_type: int) -> int:
    r = raw(bs, K.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(key_type=key_type,
                                                               coordinator_keys=[key]))
    return int(r.coordinators[0].error_code)


def _init_txn(bs: str, txn: str) -> int:
    p = Producer({"bootstrap.servers": bs, "transactional.id": txn})
    return _code(lambda: p.init_transactions(10))


def _join(bs: str, group: str) -> int:
    r = raw(bs, K.JOIN_GROUP, 9, m.JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
        protocol_type="consumer", protocols=[
            m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    return int(r.error_code)


def _group_call(bs: str, api: int, group: str) -> int:
    body = {K.SYNC_GROUP: m.SyncGroupRequest(group_id=group, generation_id=1, member_id="x"),
            K.HEARTBEAT: m.HeartbeatRequest(group_id=group, generation_id=1, member_id="x"),
            K.LEAVE_GROUP: m.LeaveGroupRequest(group_id=group, members=[
                m.LeaveGroupRequest.MemberIdentity(member_id="x")])}[api]
    return int(raw(bs, api, 3, body).error_code)


def _commit(bs: str, group: str, topic: str) -> int:
    C = m.OffsetCommitRequest.OffsetCommitRequestTopic  # noqa: N806
    r = raw(bs, K.OFFSET_COMMIT, 8, m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            C(name=topic, partitions=[C.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=0, committed_metadata="")])]))
    return _parts(r.topics, "partitions")


def _offset_fetch(bs: str, group: str, topic: str) -> int:
    F = m.OffsetFetchRequest  # noqa: N806
    r = raw(bs, K.OFFSET_FETCH, 7, F(group_id=group, topics=[F.OffsetFetchRequestTopic(
        name=topic, partition_indexes=[0])]))
    return int(r.error_code) or _parts(r.topics, "partitions")


def _groups_listed(bs: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bs})
    return {g.group_id for g in admin.list_consumer_groups().result(10).valid}


def _kp_groups_listed(bs: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        return {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()


def _txns_listed(bs: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        return {t.transactional_id for ts in admin.list_transactions().values() for t in ts}
    finally:
        admin.close()


def _offsets_listed(bs: str, group: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bs})
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    return {tp.topic for tp in got[group].result(10).topic_partitions}


def _kp_delete_offsets(bs: str, group: str, topic: str) -> int:
    def call(a: KafkaAdminClient) -> None:
        for err in a.delete_group_offsets(group, [KTP(topic, 0)]).values():
            if err.errno:
                raise err()
    return _kp_admin(bs, call)


def _txn_offset_commit(bs: str, txn: str, group: str, topic: str) -> int:
    T = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic  # noqa: N806
    r = raw(bs, K.TXN_OFFSET_COMMIT, 3, m.TxnOffsetCommitRequest(
        transactional_id=txn, group_id=group, producer_id=99, producer_epoch=0, topics=[
            T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=0)])]))
    return _parts(r.topics, "partitions")


def _transaction(bs: str) -> int:
    """confluent-kafka's transactional producer: InitProducerId, AddPartitionsToTxn,
    AddOffsetsToTxn, TxnOffsetCommit and EndTxn, all as tx-ok (WRITE) with group g-ok-txn."""
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-ok"})
    c = Consumer({"bootstrap.servers": bs, "group.id": "g-ok-txn"})

    def run() -> None:
        p.init_transactions(10)
        p.begin_transaction()
        p.produce("ok-a", b"in-txn")
        p.send_offsets_to_transaction([TopicPartition("ok-a", 0, 1)],
                                      c.consumer_group_metadata(), 10)
        p.commit_transaction(10)
    try:
        return _code(run)
    finally:
        c.close()


def _add_partitions(bs: str, txn: str, topics: list[str], version: int = 3,
                    admin: bool = False) -> int:
    A = m.AddPartitionsToTxnRequest  # noqa: N806
    topic_list = [A.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics]
    if version >= 4:
        r = raw(bs, K.ADD_PARTITIONS_TO_TXN, version, A(transactions=[
            A.AddPartitionsToTxnTransaction(transactional_id=txn, producer_id=99,
                                            producer_epoch=0, verify_only=True,
                                            topics=topic_list)]), admin)
        return int(r.error_code) or _parts(
            [tr for t in r.results_by_transaction for tr in t.topic_results],
            "results_by_partition", "partition_error_code")
    r = raw(bs, K.ADD_PARTITIONS_TO_TXN, version, A(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=99,
        v3_and_below_producer_epoch=0, v3_and_below_topics=topic_list))
    codes = {t.name: {p.partition_error_code for p in t.results_by_partition}
             for t in r.results_by_topic_v3_and_below}
    denied = [c for cs in codes.values() for c in cs if c in AUTH_ERRORS]
    if denied:  # the topics allowed are not attempted, as in Kafka
        assert all(cs <= {*AUTH_ERRORS, E.OPERATION_NOT_ATTEMPTED} for cs in codes.values())
        return denied[0]
    return next((c for cs in codes.values() for c in cs if c), 0)


def _add_offsets(bs: str, txn: str, group: str) -> int:
    return int(raw(bs, K.ADD_OFFSETS_TO_TXN, 3, m.AddOffsetsToTxnRequest(
        transactional_id=txn, producer_id=99, producer_epoch=0, group_id=group)).error_code)


def _end_txn(bs: str, txn: str) -> int:
    return int(raw(bs, K.END_TXN, 3, m.EndTxnRequest(
        transactional_id=txn, producer_id=1, producer_epoch=0, committed=True)).error_code)


def _markers(bs: str, admin: bool) -> int:
    W = m.WriteTxnMarkersRequest.WritableTxnMarker  # noqa: N806
    r = raw(bs, K.WRITE_TXN_MARKERS, 1, m.WriteTxnMarkersRequest(markers=[W(
        producer_id=99, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[W.WritableTxnMarkerTopic(name="no-such-topic", partition_indexes=[0])])]),
        admin)
    return _parts([t for mk in r.markers for t in mk.topics], "partitions")


def _describe_txn(bs: str, txn: str) -> tuple[int, set[str]]:
    r = raw(bs, K.DESCRIBE_TRANSACTIONS, 0, m.DescribeTransactionsRequest(
        transactional_ids=[txn]))
    state = r.transaction_states[0]
    return int(state.error_code), {t.topic for t in state.topics}


def _elect(bs: str, admin: bool) -> int:
    r = raw(bs, K.ELECT_LEADERS, 2, m.ElectLeadersRequest(
        election_type=0, timeout_ms=5000, topic_partitions=[
            m.ElectLeadersRequest.TopicPartitions(topic="ok-a", partitions=[0])]), admin)
    return int(r.error_code) or _parts(r.replica_election_results, "partition_result")


def _consumer_group_heartbeat(bs: str, group: str) -> int:
    return int(raw(bs, K.CONSUMER_GROUP_HEARTBEAT, 0, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=10000,
        subscribed_topic_names=["ok-a"], topic_partitions=[])).error_code)


def _share_group_heartbeat(bs: str, group: str) -> int:
    return int(raw(bs, K.SHARE_GROUP_HEARTBEAT, 1, m.ShareGroupHeartbeatRequest(
        group_id=group, member_id="m-acl", member_epoch=0,
        subscribed_topic_names=["ok-a"])).error_code)


def _share_group_describe(bs: str, group: str) -> int:
    r = raw(bs, K.SHARE_GROUP_DESCRIBE, 1, m.ShareGroupDescribeRequest(group_ids=[group]))
    return int(r.groups[0].error_code)


def _share_offsets(bs: str, group: str, topic: str) -> int:
    """DescribeShareGroupOffsets of one partition: the group's error, else the partition's."""
    Q = m.DescribeShareGroupOffsetsRequest  # noqa: N806
    r = raw(bs, K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, Q(groups=[
        Q.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            Q.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic(
                topic_name=topic, partitions=[0])])]))
    g = r.groups[0]
    # A topic that may not be described is answered whatever the group's answer.
    return int(g.topics[0].partitions[0].error_code if g.topics else g.error_code)


def _share_alter(bs: str, group: str, topic: str) -> int:
    """AlterShareGroupOffsets of one partition: the group's error, else the partition's."""
    Q = m.AlterShareGroupOffsetsRequest  # noqa: N806
    T = Q.AlterShareGroupOffsetsRequestTopic  # noqa: N806
    r = raw(bs, K.ALTER_SHARE_GROUP_OFFSETS, 0, Q(group_id=group, topics=[T(
        topic_name=topic, partitions=[T.AlterShareGroupOffsetsRequestPartition(
            partition_index=0, start_offset=0)])]))
    return int(r.error_code or r.responses[0].partitions[0].error_code)


def _share_delete_offsets(bs: str, group: str, topic: str) -> int:
    """DeleteShareGroupOffsets of one topic: the group's error, else the topic's."""
    Q = m.DeleteShareGroupOffsetsRequest  # noqa: N806
    r = raw(bs, K.DELETE_SHARE_GROUP_OFFSETS, 0, Q(group_id=group, topics=[
        Q.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]))
    return int(r.error_code or r.responses[0].error_code)


def _topic_id(bs: str, topic: str) -> Any:
    r = raw(bs, K.METADATA, 12, m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)]))
    return r.topics[0].topic_id


def _share_fetch(bs: str, group: str, topic: str) -> int:
    """The request's error, else the partition's."""
    Q = m.ShareFetchRequest  # noqa: N806
    r = raw(bs, K.SHARE_FETCH, 1, Q(
        group_id=group, member_id="m-acl", share_session_epoch=0, max_wait_ms=0,
        min_bytes=1, max_records=10, batch_size=10, topics=[Q.FetchTopic(
            topic_id=_topic_id(bs, topic), partitions=[Q.FetchTopic.FetchPartition(
                partition_index=0)])]))
    if r.error_code:
        return int(r.error_code)
    return _parts(r.responses, "partitions")


def _share_acknowledge(bs: str, group: str) -> int:
    Q = m.ShareAcknowledgeRequest  # noqa: N806
    return int(raw(bs, K.SHARE_ACKNOWLEDGE, 1, Q(
        group_id=group, member_id="m-acl", share_session_epoch=1)).error_code)


def _share_state(bs: str, api: int, admin: bool) -> int:
    """An internal share-state request (brokers send them: CLUSTER_ACTION)."""
    r = raw(bs, api, 0, share_state_request(api, "g-acl", uuid.uuid4(), 0), admin)
    return _parts(r.results, "partitions")


def _consumer_group_describe(bs: str, group: str) -> int:
    r = raw(bs, K.CONSUMER_GROUP_DESCRIBE, 0, m.ConsumerGroupDescribeRequest(
        group_ids=[group]))
    return int(r.groups[0].error_code)


SHARE_STATE_APIS = (K.INITIALIZE_SHARE_GROUP_STATE, K.READ_SHARE_GROUP_STATE,
                    K.WRITE_SHARE_GROUP_STATE, K.DELETE_SHARE_GROUP_STATE,
                    K.READ_SHARE_GROUP_STATE_SUMMARY)
TOPIC_DENIED, GROUP_DENIED = E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED
TXN_DENIED, CLUSTER_DENIED = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED
TYPE_TOPIC, TYPE_BROKER = ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER

TABLE: list[Row] = [
    (K.PRODUCE, ALLOWED, "confluent WRITE", lambda bs: _produce(bs, "ok-a"), None),
    (K.PRODUCE, ALLOWED, "kafka-python WRITE", lambda bs: _kp_produce(bs, "ok-a"), None),
    (K.PRODUCE, ALLOWED, "idempotent: WRITE on a topic stands for IDEMPOTENT_WRITE",
     lambda bs: _produce(bs, "ok-a", **{"enable.idempotence": True}), None),
    (K.PRODUCE, DESCRIBED, "confluent", lambda bs: _produce(bs, "seen"), TOPIC_DENIED),
    (K.PRODUCE, DESCRIBED, "kafka-python", lambda bs: _kp_produce(bs, "seen"), TOPIC_DENIED),
    (K.PRODUCE, DENIED, "confluent", lambda bs: _produce(bs, "hidden"), TOPIC_DENIED),
    (K.PRODUCE, DENIED, "transactional batch", lambda bs: _raw_produce(bs, "tx-no"),
     TXN_DENIED),
    (K.PRODUCE, DENIED, "transactional batch without a transactional id",
     lambda bs: _raw_produce(bs, None), TXN_DENIED),
    (K.PRODUCE, ALLOWED, "a transactional id on plain batches asks nothing of it",
     lambda bs: _raw_produce(bs, "tx-no", transactional=False), None),
    (K.FETCH, ALLOWED, "confluent READ", lambda bs: _consume(bs, "ok-a"), None),
    (K.FETCH, ALLOWED, "kafka-python READ", lambda bs: _kp_consume(bs, "ok-a"), None),
    (K.FETCH, ALLOWED, "follower with CLUSTER_ACTION",
     lambda bs: _fetch(bs, "hidden", replica_id=5, admin=True), None),
    (K.FETCH, DESCRIBED, "confluent", lambda bs: _consume(bs, "seen"), TOPIC_DENIED),
    (K.FETCH, DESCRIBED, "kafka-python", lambda bs: _kp_consume(bs, "seen"), TOPIC_DENIED),
    (K.FETCH, DENIED, "raw", lambda bs: _fetch(bs, "hidden"), TOPIC_DENIED),
    (K.FETCH, DENIED, "follower without CLUSTER_ACTION",
     lambda bs: _fetch(bs, "ok-a", replica_id=5), TOPIC_DENIED),
    (K.METADATA, ALLOWED, "DESCRIBE", lambda bs: _metadata(bs, "seen"), None),
    (K.METADATA, ALLOWED, "auto-creation with CREATE on the topic",
     lambda bs: _metadata(bs, "ok-auto", auto_create=True), None),
    (K.METADATA, DENIED, "named", lambda bs: _metadata(bs, "hidden"), TOPIC_DENIED),
    (K.METADATA, DENIED, "auto-creation", lambda bs: _metadata(bs, "nope-auto", True),
     TOPIC_DENIED),
    (K.DESCRIBE_CLUSTER, ALLOWED, "operations shown with DESCRIBE",
     lambda bs: 0 if _cluster_ops(bs, admin=True) > 0 else -1, None),
    (K.DESCRIBE_CLUSTER, DENIED, "operations hidden (0) without DESCRIBE",
     lambda bs: int(CLUSTER_DENIED) if _cluster_ops(bs, admin=False) == 0 else -1,
     CLUSTER_DENIED),
    (K.DESCRIBE_TOPIC_PARTITIONS, ALLOWED, "DESCRIBE", lambda bs: _dtp(bs, "seen"), None),
    (K.DESCRIBE_TOPIC_PARTITIONS, DENIED, "named", lambda bs: _dtp(bs, "hidden"),
     TOPIC_DENIED),
    (K.DESCRIBE_TOPIC_PARTITIONS, DENIED, "left out of all topics",
     lambda bs: int(TOPIC_DENIED) if "hidden" not in _dtp_all(bs) and "seen" in _dtp_all(bs)
     else -1, TOPIC_DENIED),
    (K.LIST_OFFSETS, ALLOWED, "DESCRIBE", lambda bs: _list_offsets(bs, "seen"), None),
    (K.LIST_OFFSETS, DENIED, "raw", lambda bs: _raw_list_offsets(bs, "hidden"), TOPIC_DENIED),
    (K.OFFSET_FOR_LEADER_EPOCH, ALLOWED, "DESCRIBE", lambda bs: _leader_epoch(bs, "seen"),
     None),
    (K.OFFSET_FOR_LEADER_EPOCH, ALLOWED, "follower with CLUSTER_ACTION",
     lambda bs: _leader_epoch(bs, "hidden", 5, admin=True), None),
    (K.OFFSET_FOR_LEADER_EPOCH, DENIED, "raw", lambda bs: _leader_epoch(bs, "hidden", 5),
     TOPIC_DENIED),
    (K.DELETE_RECORDS, ALLOWED, "kafka-python DELETE", lambda bs: _kp_admin(
        bs, lambda a: a.delete_records({KTP("ok-c", 0): 1})), None),
    (K.DELETE_RECORDS, DESCRIBED, "kafka-python", lambda bs: _kp_admin(
        bs, lambda a: a.delete_records({KTP("seen", 0): 1})), TOPIC_DENIED),
    (K.CREATE_TOPICS, ALLOWED, "CREATE on the topic", lambda bs: _admin(
        bs, lambda a: a.create_topics([NewTopic("ok-new", 1, 1)])["ok-new"].result(15)), None),
    (K.CREATE_TOPICS, DENIED, "confluent", lambda bs: _admin(
        bs, lambda a: a.create_topics([NewTopic("nope", 1, 1)])["nope"].result(15)),
     TOPIC_DENIED),
    (K.DELETE_TOPICS, ALLOWED, "DELETE", lambda bs: _admin(
        bs, lambda a: a.delete_topics(["ok-del"])["ok-del"].result(15)), None),
    (K.DELETE_TOPICS, DESCRIBED, "confluent", lambda bs: _admin(
        bs, lambda a: a.delete_topics(["seen"])["seen"].result(15)), TOPIC_DENIED),
    (K.CREATE_PARTITIONS, ALLOWED, "ALTER", lambda bs: _admin(bs, lambda a: a.create_partitions(
        [NewPartitions("ok-parts", 2)])["ok-parts"].result(15)), None),
    (K.CREATE_PARTITIONS, DESCRIBED, "confluent", lambda bs: _admin(
        bs, lambda a: a.create_partitions([NewPartitions("seen", 2)])["seen"].result(15)),
     TOPIC_DENIED),
    (K.DESCRIBE_LOG_DIRS, ALLOWED, "DESCRIBE on the cluster", lambda bs: _log_dirs(bs, True),
     None),
    (K.DESCRIBE_LOG_DIRS, DENIED, "whole request", lambda bs: _log_dirs(bs, False),
     CLUSTER_DENIED),
    (K.ALTER_REPLICA_LOG_DIRS, ALLOWED, "ALTER on the cluster",
     lambda bs: _alter_log_dirs(bs, True), None),
    (K.ALTER_REPLICA_LOG_DIRS, DENIED, "whole request", lambda bs: _alter_log_dirs(bs, False),
     CLUSTER_DENIED),
    (K.DESCRIBE_CONFIGS, ALLOWED, "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
     lambda bs: _describe_configs(bs, TYPE_TOPIC, "ok-a"), None),
    (K.DESCRIBE_CONFIGS, ALLOWED, "broker, with ALTER_CONFIGS on the cluster",
     lambda bs: _raw_broker_configs(bs, admin=True), None),
    (K.DESCRIBE_CONFIGS, DESCRIBED, "topic", lambda bs: _describe_configs(
        bs, TYPE_TOPIC, "seen"), TOPIC_DENIED),
    (K.DESCRIBE_CONFIGS, DENIED, "broker", lambda bs: _describe_configs(bs, TYPE_BROKER, "1"),
     CLUSTER_DENIED),
    (K.ALTER_CONFIGS, ALLOWED, "kafka-python ALTER_CONFIGS",
     lambda bs: _kp_alter_configs(bs, "ok-a"), None),
    (K.ALTER_CONFIGS, DESCRIBED, "kafka-python", lambda bs: _kp_alter_configs(bs, "seen"),
     TOPIC_DENIED),
    (K.INCREMENTAL_ALTER_CONFIGS, ALLOWED, "confluent", lambda bs: _incremental_alter(
        bs, "ok-a"), None),
    (K.INCREMENTAL_ALTER_CONFIGS, DESCRIBED, "confluent", lambda bs: _incremental_alter(
        bs, "seen"), TOPIC_DENIED),
    (K.INIT_PRODUCER_ID, ALLOWED, "transactional", lambda bs: _init_txn(bs, "tx-ok"), None),
    (K.INIT_PRODUCER_ID, DESCRIBED, "transactional", lambda bs: _init_txn(bs, "tx-seen"),
     TXN_DENIED),
    (K.INIT_PRODUCER_ID, DENIED, "transactional", lambda bs: _init_txn(bs, "tx-no"),
     TXN_DENIED),
    (K.FIND_COORDINATOR, ALLOWED, "group", lambda bs: _find_coordinator(bs, "g-seen", 0), None),
    (K.FIND_COORDINATOR, ALLOWED, "transaction", lambda bs: _find_coordinator(
        bs, "tx-seen", 1), None),
    (K.FIND_COORDINATOR, DENIED, "group", lambda bs: _find_coordinator(bs, "g-no", 0),
     GROUP_DENIED),
    (K.FIND_COORDINATOR, DENIED, "transaction", lambda bs: _find_coordinator(bs, "tx-no", 1),
     TXN_DENIED),
    (K.JOIN_GROUP, ALLOWED, "READ", lambda bs: _join(bs, "g-ok-join"), None),
    (K.JOIN_GROUP, DESCRIBED, "raw", lambda bs: _join(bs, "g-seen"), GROUP_DENIED),
    (K.JOIN_GROUP, DENIED, "raw", lambda bs: _join(bs, "g-no"), GROUP_DENIED),
    *((api, case, "raw", (lambda api, g: lambda bs: _group_call(bs, api, g))(api, group),
       code) for api in (K.SYNC_GROUP, K.HEARTBEAT, K.LEAVE_GROUP)
      for case, group, code in ((ALLOWED, "g-ok-x", None), (DESCRIBED, "g-seen", GROUP_DENIED),
                                (DENIED, "g-no", GROUP_DENIED))),
    (K.DESCRIBE_GROUPS, ALLOWED, "confluent, DESCRIBE only", lambda bs: _admin(
        bs, lambda a: a.describe_consumer_groups(["g-seen"])["g-seen"].result(10)), None),
    (K.DESCRIBE_GROUPS, ALLOWED, "kafka-python", lambda bs: _kp_admin(
        bs, lambda a: a.describe_groups(["g-seen"])), None),
    (K.DESCRIBE_GROUPS, DENIED, "confluent", lambda bs: _admin(
        bs, lambda a: a.describe_consumer_groups(["g-no"])["g-no"].result(10)), GROUP_DENIED),
    (K.LIST_GROUPS, ALLOWED, "groups described listed (confluent)",
     lambda bs: 0 if {"g-ok-1", "g-seen"} <= _groups_listed(bs) else -1, None),
    (K.LIST_GROUPS, DENIED, "others left out (kafka-python)", lambda bs: int(GROUP_DENIED)
     if "g-hidden" not in _kp_groups_listed(bs) else -1, GROUP_DENIED),
    (K.DELETE_GROUPS, ALLOWED, "confluent DELETE", lambda bs: _admin(
        bs, lambda a: a.delete_consumer_groups(["g-ok-del"])["g-ok-del"].result(10)), None),
    (K.DELETE_GROUPS, DESCRIBED, "confluent", lambda bs: _admin(
        bs, lambda a: a.delete_consumer_groups(["g-seen"])["g-seen"].result(10)), GROUP_DENIED),
    (K.OFFSET_COMMIT, ALLOWED, "READ group and topic", lambda bs: _commit(bs, "g-ok-2", "ok-a"),
     None),
    (K.OFFSET_COMMIT, DESCRIBED, "group", lambda bs: _commit(bs, "g-seen", "ok-a"),
     GROUP_DENIED),
    (K.OFFSET_COMMIT, DESCRIBED, "topic", lambda bs: _commit(bs, "g-ok-1", "seen"),
     TOPIC_DENIED),
    (K.OFFSET_FETCH, ALLOWED, "confluent: undescribed topics left out",
     lambda bs: 0 if _offsets_listed(bs, "g-ok-1") == {"ok-a"} else -1, None),
    (K.OFFSET_FETCH, ALLOWED, "kafka-python", lambda bs: _kp_admin(
        bs, lambda a: a.list_group_offsets({"g-seen": None})), None),
    (K.OFFSET_FETCH, DENIED, "group", lambda bs: _offset_fetch(bs, "g-no", "ok-a"),
     GROUP_DENIED),
    (K.OFFSET_FETCH, DENIED, "topic named", lambda bs: _offset_fetch(bs, "g-ok-1", "hidden"),
     TOPIC_DENIED),
    (K.OFFSET_DELETE, ALLOWED, "kafka-python DELETE group, READ topic",
     lambda bs: _kp_delete_offsets(bs, "g-ok-offdel", "ok-a"), None),
    (K.OFFSET_DELETE, DESCRIBED, "group", lambda bs: _kp_delete_offsets(bs, "g-seen", "ok-a"),
     GROUP_DENIED),
    (K.OFFSET_DELETE, DESCRIBED, "topic", lambda bs: _kp_delete_offsets(
        bs, "g-ok-offdel", "seen"), TOPIC_DENIED),
    (K.TXN_OFFSET_COMMIT, ALLOWED, "confluent transaction", _transaction, None),
    (K.TXN_OFFSET_COMMIT, DENIED, "transactional id", lambda bs: _txn_offset_commit(
        bs, "tx-no", "g-ok-1", "ok-a"), TXN_DENIED),
    (K.TXN_OFFSET_COMMIT, DENIED, "group", lambda bs: _txn_offset_commit(
        bs, "tx-ok", "g-no", "ok-a"), GROUP_DENIED),
    (K.TXN_OFFSET_COMMIT, DESCRIBED, "topic", lambda bs: _txn_offset_commit(
        bs, "tx-ok", "g-ok-1", "seen"), TOPIC_DENIED),
    (K.ADD_PARTITIONS_TO_TXN, ALLOWED, "confluent transaction", _transaction, None),
    (K.ADD_PARTITIONS_TO_TXN, ALLOWED, "v4 from a broker (CLUSTER_ACTION)",
     lambda bs: _add_partitions(bs, "tx-ok", ["ok-a"], 4, admin=True), None),
    (K.ADD_PARTITIONS_TO_TXN, DESCRIBED, "transactional id", lambda bs: _add_partitions(
        bs, "tx-seen", ["ok-a"]), TXN_DENIED),
    (K.ADD_PARTITIONS_TO_TXN, DESCRIBED, "topic; the others not attempted",
     lambda bs: _add_partitions(bs, "tx-ok", ["ok-a", "seen"]), TOPIC_DENIED),
    (K.ADD_PARTITIONS_TO_TXN, DENIED, "v4 without CLUSTER_ACTION",
     lambda bs: _add_partitions(bs, "tx-ok", ["ok-a"], 4), CLUSTER_DENIED),
    (K.ADD_OFFSETS_TO_TXN, ALLOWED, "confluent transaction", _transaction, None),
    (K.ADD_OFFSETS_TO_TXN, DESCRIBED, "transactional id", lambda bs: _add_offsets(
        bs, "tx-seen", "g-ok-1"), TXN_DENIED),
    (K.ADD_OFFSETS_TO_TXN, DENIED, "group", lambda bs: _add_offsets(bs, "tx-ok", "g-no"),
     GROUP_DENIED),
    (K.END_TXN, ALLOWED, "confluent transaction", _transaction, None),
    (K.END_TXN, DESCRIBED, "raw", lambda bs: _end_txn(bs, "tx-seen"), TXN_DENIED),
    (K.END_TXN, DENIED, "raw", lambda bs: _end_txn(bs, "tx-no"), TXN_DENIED),
    (K.WRITE_TXN_MARKERS, ALLOWED, "ALTER on the cluster", lambda bs: _markers(bs, True), None),
    (K.WRITE_TXN_MARKERS, DENIED, "raw", lambda bs: _markers(bs, False), CLUSTER_DENIED),
    (K.DESCRIBE_TRANSACTIONS, ALLOWED, "DESCRIBE; undescribed topics left out",
     lambda bs: 0 if _describe_txn(bs, "tx-seen") == (0, {"ok-txn"}) else -1, None),
    (K.DESCRIBE_TRANSACTIONS, ALLOWED, "kafka-python", lambda bs: _kp_admin(
        bs, lambda a: a.describe_transactions(["tx-seen"])), None),
    (K.DESCRIBE_TRANSACTIONS, DENIED, "raw", lambda bs: _describe_txn(bs, "tx-no")[0],
     TXN_DENIED),
    (K.DESCRIBE_PRODUCERS, ALLOWED, "kafka-python READ", lambda bs: _kp_admin(
        bs, lambda a: a.describe_producers([KTP("ok-a", 0)])), None),
    (K.DESCRIBE_PRODUCERS, DESCRIBED, "kafka-python", lambda bs: _kp_admin(
        bs, lambda a: a.describe_producers([KTP("seen", 0)])), TOPIC_DENIED),
    (K.DESCRIBE_PRODUCERS, DENIED, "raw", lambda bs: _parts(raw(
        bs, K.DESCRIBE_PRODUCERS, 0, m.DescribeProducersRequest(topics=[
            m.DescribeProducersRequest.TopicRequest(name="hidden", partition_indexes=[0])]))
        .topics, "partitions"), TOPIC_DENIED),
    (K.LIST_TRANSACTIONS, ALLOWED, "kafka-python: described ones listed, others left out",
     lambda bs: 0 if "tx-seen" in (listed := _txns_listed(bs)) and "tx-hidden" not in listed
     else -1, None),
    (K.ELECT_LEADERS, ALLOWED, "ALTER on the cluster", lambda bs: _elect(bs, True), None),
    (K.ELECT_LEADERS, DENIED, "kafka-python", lambda bs: _kp_admin(
        bs, lambda a: a.elect_leaders(0, [KTP("ok-a", 0)])), CLUSTER_DENIED),
    (K.ELECT_LEADERS, DENIED, "raw: every partition", lambda bs: _parts(raw(
        bs, K.ELECT_LEADERS, 2, m.ElectLeadersRequest(election_type=0, timeout_ms=5000,
                                                      topic_partitions=[
            m.ElectLeadersRequest.TopicPartitions(topic="ok-a", partitions=[0])]))
        .replica_election_results, "partition_result"), CLUSTER_DENIED),
    *cluster_rows((K.DESCRIBE_ACLS, K.CREATE_ACLS, K.DELETE_ACLS,
                   K.DESCRIBE_USER_SCRAM_CREDENTIALS, K.ALTER_USER_SCRAM_CREDENTIALS,
                   K.DESCRIBE_CLIENT_QUOTAS, K.ALTER_CLIENT_QUOTAS)),
    (K.DESCRIBE_USER_SCRAM_CREDENTIALS, DENIED, "kafka-python", lambda bs: _kp_admin(
        bs, lambda a: a.describe_user_scram_credentials()), CLUSTER_DENIED),
    # (confluent-kafka 2.16 crashes, SIGSEGV, on this refusal: not driven with it.)
    # confluent-kafka 2.16 (librdkafka) answers a refused DescribeAcls as an empty list.
    (K.DESCRIBE_ACLS, DENIED, "kafka-python", lambda bs: _kp_admin(bs, _kp_describe_acls),
     CLUSTER_DENIED),
    (K.CREATE_ACLS, DENIED, "confluent", lambda bs: _admin(bs, lambda a: list(a.create_acls(
        [acl(ResourceType.TOPIC, "x", AclOperation.READ)]).values())[0].result(10)),
     CLUSTER_DENIED),
    (K.DELETE_ACLS, DENIED, "kafka-python", lambda bs: _kp_admin(bs, lambda a: _kp_delete_acls(
        a)), CLUSTER_DENIED),
    (K.CONSUMER_GROUP_HEARTBEAT, ALLOWED, "READ", lambda bs: _consumer_group_heartbeat(
        bs, "g-ok-848"), None),
    (K.CONSUMER_GROUP_HEARTBEAT, DESCRIBED, "raw", lambda bs: _consumer_group_heartbeat(
        bs, "g-seen"), GROUP_DENIED),
    (K.CONSUMER_GROUP_DESCRIBE, ALLOWED, "DESCRIBE", lambda bs: _consumer_group_describe(
        bs, "g-seen"), None),
    (K.CONSUMER_GROUP_DESCRIBE, DENIED, "raw", lambda bs: _consumer_group_describe(
        bs, "g-no"), GROUP_DENIED),
    (K.SHARE_GROUP_HEARTBEAT, ALLOWED, "READ", lambda bs: _share_group_heartbeat(
        bs, "g-ok-share"), None),
    (K.SHARE_GROUP_HEARTBEAT, DESCRIBED, "raw", lambda bs: _share_group_heartbeat(
        bs, "g-seen"), GROUP_DENIED),
    (K.SHARE_GROUP_DESCRIBE, ALLOWED, "DESCRIBE", lambda bs: _share_group_describe(
        bs, "g-seen"), None),
    (K.SHARE_GROUP_DESCRIBE, DENIED, "raw", lambda bs: _share_group_describe(
        bs, "g-no"), GROUP_DENIED),
    (K.DESCRIBE_SHARE_GROUP_OFFSETS, ALLOWED, "DESCRIBE group and topic",
     lambda bs: _share_offsets(bs, "g-ok-share", "ok-a"), None),
    (K.DESCRIBE_SHARE_GROUP_OFFSETS, DENIED, "group", lambda bs: _share_offsets(
        bs, "g-no", "ok-a"), GROUP_DENIED),
    (K.DESCRIBE_SHARE_GROUP_OFFSETS, DESCRIBED, "topic", lambda bs: _share_offsets(
        bs, "g-ok-share", "no-a"), TOPIC_DENIED),
    (K.ALTER_SHARE_GROUP_OFFSETS, ALLOWED, "READ group and topic",
     lambda bs: _share_alter(bs, "g-ok-share-alt", "ok-a"), None),
    (K.ALTER_SHARE_GROUP_OFFSETS, DESCRIBED, "group", lambda bs: _share_alter(
        bs, "g-seen", "ok-a"), GROUP_DENIED),
    (K.ALTER_SHARE_GROUP_OFFSETS, DESCRIBED, "topic", lambda bs: _share_alter(
        bs, "g-ok-share-alt", "seen"), TOPIC_DENIED),
    (K.DELETE_SHARE_GROUP_OFFSETS, ALLOWED, "DELETE group, READ topic",
     lambda bs: _share_delete_offsets(bs, "g-ok-share-alt", "ok-a"), None),
    (K.DELETE_SHARE_GROUP_OFFSETS, DESCRIBED, "group", lambda bs: _share_delete_offsets(
        bs, "g-seen", "ok-a"), GROUP_DENIED),
    (K.DELETE_SHARE_GROUP_OFFSETS, DESCRIBED, "topic", lambda bs: _share_delete_offsets(
        bs, "g-ok-share-alt", "seen"), TOPIC_DENIED),
    (K.SHARE_FETCH, ALLOWED, "READ group and topic", lambda bs: _share_fetch(
        bs, "g-ok-share-f", "ok-a"), None),
    (K.SHARE_FETCH, DESCRIBED, "group", lambda bs: _share_fetch(bs, "g-seen", "ok-a"),
     GROUP_DENIED),
    (K.SHARE_FETCH, DESCRIBED, "topic", lambda bs: _share_fetch(bs, "g-ok-share-f", "seen"),
     TOPIC_DENIED),
    (K.SHARE_ACKNOWLEDGE, ALLOWED, "READ", lambda bs: _share_acknowledge(bs, "g-ok-share-a"),
     None),
    (K.SHARE_ACKNOWLEDGE, DESCRIBED, "group", lambda bs: _share_acknowledge(bs, "g-seen"),
     GROUP_DENIED),
    *[row for api in SHARE_STATE_APIS for row in (
        (api, ALLOWED, "CLUSTER_ACTION", lambda bs, a=api: _share_state(bs, a, True), None),
        (api, DENIED, "raw", lambda bs, a=api: _share_state(bs, a, False), CLUSTER_DENIED))],
]


def _kp_describe_acls(a: KafkaAdminClient) -> None:
    a.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                              permission_type=ACLPermissionType.ANY,
                              resource_pattern=ResourcePatternFilter(
                                  KRType.ANY, None, ACLResourcePatternType.ANY)))


def _kp_delete_acls(a: KafkaAdminClient) -> None:
    flt = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(KRType.TOPIC, "x",
                                                           ACLResourcePatternType.LITERAL))
    for _, _, error in a.delete_acls([flt]):
        if error.errno:
            raise error()


@pytest.mark.parametrize(("api", "case", "what", "call", "expected"), TABLE,
                         ids=[f"{K(r[0]).name}-{r[1]}-{r[2]}" for r in TABLE])
def test_acl_permissions_table(bootstrap: str, api: int, case: str, what: str,
                               call: Callable[[str], int], expected: ErrorCode | None) -> None:
    outcome = call(bootstrap)
    if expected is None:
        assert outcome >= 0 and outcome not in AUTH_ERRORS, (
            outcome, E(outcome).name if outcome > 0 else outcome)
    else:
        assert outcome == expected, (outcome, E(outcome).name if outcome > 0 else outcome)


def test_acl_permissions_table_covers_every_api() -> None:
    """Every API has its rules, and cases here or, for the APIs only a ZooKeeper cluster
    serves, in tests/controller/test_cluster_acls.py (`cluster_rows`)."""
    served = {h.api_key for h in all_handlers(cluster=True, share=True)}
    assert served == set(PERMISSIONS)
    assert CLUSTER_ONLY_APIS == served - {h.api_key for h in all_handlers(share=True)}
    cases: dict[int, set[str]] = {}
    for api, case, *_ in [*TABLE, *cluster_rows(CLUSTER_ONLY_APIS)]:
        cases.setdefault(api, set()).add(case)
    for api, rules in PERMISSIONS.items():
        if not rules:
            continue  # nothing required (ApiVersions)
        assert ALLOWED in cases.get(api, set()), K(api).name
        # A listing that leaves out what may not be described "denies" by leaving it out.
        assert cases[api] & {DENIED, DESCRIBED} or all(
            r.scope == "filtered" for r in rules), K(api).name


def test_acl_permissions_denied_fetch_answers_at_once(bootstrap: str) -> None:
    """A long poll of denied topics only is not parked: with max_wait_ms far beyond the
    connection's timeout, the answer still comes."""
    F = m.FetchRequest  # noqa: N806
    req = F(max_wait_ms=600000, min_bytes=1, topics=[F.FetchTopic(topic=t, partitions=[
        F.FetchTopic.FetchPartition(partition=0, fetch_offset=3)]) for t in ("seen", "hidden")])
    with RawConnection(bootstrap, timeout=20) as conn:
        r = conn.request(K.FETCH, 12, req)
    assert {p.error_code for t in r.responses for p in t.partitions} == {TOPIC_DENIED}


def test_acl_permissions_denied_partitions_do_not_end_a_long_poll(bootstrap: str) -> None:
    """Fetching a readable topic at its end with a denied one waits for the readable one's
    data (Kafka's erroneous partitions are answered, not read)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("ok-poll", 1, 1)])["ok-poll"].result(15)
    F = m.FetchRequest  # noqa: N806
    req = F(max_wait_ms=30000, min_bytes=1, topics=[F.FetchTopic(topic=t, partitions=[
        F.FetchTopic.FetchPartition(partition=0, fetch_offset=0)]) for t in ("ok-poll", "seen")])
    got: list[Any] = []
    with RawConnection(bootstrap, timeout=40) as conn:
        t = threading.Thread(target=lambda: got.append(conn.request(K.FETCH, 12, req)))
        t.start()
        time.sleep(0.5)  # the fetch is parked first (if it answered at once, it is empty)
        assert _produce(bootstrap, "ok-poll") == 0
        t.join(40)
    codes = {tr.topic: (p.error_code, len(p.records)) for tr in got[0].responses
             for p in tr.partitions}
    assert codes["seen"] == (TOPIC_DENIED, 0)
    assert codes["ok-poll"][0] == 0 and codes["ok-poll"][1] > 0


def test_acl_permissions_kcat(bootstrap: str) -> None:
    assert "Topic authorization failed" in _kcat(bootstrap, "-C", "-t", "seen", "-p", "0",
                                                 "-o", "beginning", "-e")
    out = _kcat(bootstrap, "-C", "-t", "ok-a", "-p", "0", "-o", "beginning", "-e")
    assert out.startswith("0 ") and "ok-a-0" in out
    listed = _kcat(bootstrap, "-L")
    assert "seen" in listed and "hidden" not in listed


def test_acl_permissions_metadata_lists_only_described_topics(bootstrap: str) -> None:
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    assert {"ok-a", "seen"} <= set(listed)
    assert "hidden" not in listed
    # Named explicitly: refused, whether or not it exists.
    r = raw(bootstrap, K.METADATA, 12, m.MetadataRequest(topics=[
        m.MetadataRequest.MetadataRequestTopic(name=n) for n in ("hidden", "no-such")],
        allow_auto_topic_creation=False))
    assert [t.error_code for t in r.topics] == [TOPIC_DENIED] * 2


def test_acl_permissions_consumer_group_with_both_clients(bootstrap: str) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-ok-consumer",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["ok-a"])
        got = None
        for _ in range(100):
            got = c.poll(0.2)
            if got is not None and got.error() is None:
                break
        assert got is not None and got.error() is None
        c.commit(asynchronous=False)
        assert c.committed([TopicPartition("ok-a", 0)], timeout=10)[0].offset >= 1
    finally:
        c.close()
    kc = KafkaConsumer("ok-a", bootstrap_servers=bootstrap, group_id="g-ok-kp",
                       auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        assert next(iter(kc)).topic == "ok-a"
        kc.commit()
    finally:
        kc.close()
    denied = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-no"})
    try:
        denied.subscribe(["ok-a"])
        errors = []
        for _ in range(50):
            msg = denied.poll(0.2)
            if msg is not None and msg.error():
                errors.append(msg.error().code())
                break
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    finally:
        denied.close()


def test_acl_permissions_open_transactions_survived_the_restart(bootstrap: str) -> None:
    # Made before the restart: the coordinator still knows them, DESCRIBE decides who sees.
    assert set(OPEN_TXNS) == {"tx-seen", "tx-hidden"}
    assert _describe_txn(bootstrap, "tx-seen")[0] == 0
    assert _describe_txn(bootstrap, "tx-hidden")[0] == TXN_DENIED


def test_acl_permissions_describe_acls_and_authorized_operations(bootstrap: str) -> None:
    r = raw(bootstrap, K.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
        resource_type_filter=2, resource_name_filter="ok-a", pattern_type_filter=2,
        principal_filter=None, host_filter=None, operation=1, permission_type=1),
        admin=True)  # TOPIC, MATCH, ANY, ANY
    ops = {a.operation for res in r.resources for a in res.acls}
    assert ops == {3, 4, 6, 7, 11, 5}  # READ WRITE DELETE ALTER ALTER_CONFIGS CREATE
    admin = AdminClient({"bootstrap.servers": bootstrap})
    d = admin.describe_topics(TopicCollection(["seen"]), include_authorized_operations=True)
    assert {op.name for op in d["seen"].result(10).authorized_operations} == {"DESCRIBE"}
    # The cluster's operations only to who may DESCRIBE it: the admin host.
    ops_bits = _cluster_ops(bootstrap, admin=True)
    assert {n for n, bit in (("DESCRIBE", 8), ("ALTER", 7), ("CLUSTER_ACTION", 9))
            if ops_bits & (1 << bit)} == {"DESCRIBE", "ALTER", "CLUSTER_ACTION"}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert not cluster.authorized_operations


def test_acl_permissions_no_authorizer_security_disabled(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path) as b:
        r = raw(b.bootstrap_servers, K.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1,
            resource_name_filter=None, principal_filter=None, host_filter=None))
        assert r.error_code == E.SECURITY_DISABLED


def test_acl_permissions_unknown_authorizer_refused() -> None:
    from ads.broker.config import ConfigError, load_broker_config  # noqa: PLC0415
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        load_broker_config(None, {}, ["authorizer.class.name=com.example.Mine"])
