"""ACLs in a ZooKeeper cluster of two broker processes: an ACL created through one broker
is enforced by the other within a bounded wait (the `/kafka-acl-changes` notifications),
a deleted one stops being enforced, and they survive a broker's restart; the APIs only a
cluster serves (ControlledShutdown, the reassignments) answer per the permission table.

No super users: the brokers talk to each other as User:ANONYMOUS, as the clients do. The
cluster permissions they need (CLUSTER_ACTION; ALTER, DESCRIBE and CREATE for the test's
administration) are seeded in ZooKeeper before the brokers start, in Kafka's layout, for
ANONYMOUS from 127.0.0.1 only: raw requests from 127.0.0.3 show the cluster APIs denied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from acl_support import (
    ALLOWED,
    ANON,
    AUTH_ERRORS,
    AUTHORIZER,
    CLUSTER_ONLY_APIS,
    cluster_rows,
    raw,
)
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing.zookeeper import zookeeper_available
from broker_process import MARKED_ENV
from cluster_support import Cluster

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(180)]

K = m.ApiKey
BROKER_HOST = "127.0.0.1"
OUTSIDER = "127.0.0.3"
# How long a change made through one broker may take to act on another.
PROPAGATION_S = 15.0
CLUSTER_OPS = ("ClusterAction", "Alter", "Describe", "Create")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    root: Path = tmp_path_factory.mktemp("acl-cluster")
    c = Cluster(root, 2, *(f"{k}={v}" for k, v in AUTHORIZER.items()),
                "transaction.state.log.replication.factor=2")
    try:
        c.zookeeper.start()
        with c.zk() as zk:
            zk.create("/kafka-acl/Cluster/kafka-cluster", json.dumps({
                "version": 1, "acls": [
                    {"principal": ANON, "permissionType": "Allow", "operation": op,
                     "host": BROKER_HOST} for op in CLUSTER_OPS]}).encode(), makepath=True)
        # This module is marked broker_process; the marker's variable is set per test
        # function, after module fixtures, so set it for this start too.
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(MARKED_ENV, "1")
            c.start_brokers()
        yield c
    finally:
        c.stop()


def _acl(bs: str, api: int, topic: str) -> int:
    """CreateAcls or DeleteAcls of ALLOW User:ANONYMOUS WRITE on the topic, sent to `bs`."""
    if api == K.CREATE_ACLS:
        r = raw(bs, api, 3, m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
            resource_type=2, resource_name=topic, resource_pattern_type=3, principal=ANON,
            host="*", operation=4, permission_type=3)]))
        return int(r.results[0].error_code)
    r = raw(bs, api, 3, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=2, resource_name_filter=topic, pattern_type_filter=3,
        principal_filter=ANON, host_filter="*", operation=4, permission_type=3)]))
    return int(r.filter_results[0].error_code)


def _produce(bs: str, topic: str) -> str | None:
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 3000, "retries": 0})
    errors: list[KafkaError] = []
    p.produce(topic, b"v", on_delivery=lambda err, _: errors.append(err))
    p.flush(10)
    return errors[0].name() if errors and errors[0] else None


def _described(bs: str, topic: str) -> bool:
    r = raw(bs, K.METADATA, 12, m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False))
    return int(r.topics[0].error_code) != ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _leader(c: Cluster, topic: str) -> int:
    """From ZooKeeper: Metadata would not describe the topic without an ACL."""
    with c.zk() as zk:
        path = f"/brokers/topics/{topic}/partitions/0/state"
        return int(json.loads(zk.get(path)[0])["leader"]) if zk.exists(path) else -1


def _until(c: Cluster, check: Callable[[], bool], what: str) -> None:
    c.wait_for(check, what, timeout_s=PROPAGATION_S)


def test_cluster_acls_propagate_to_every_broker_and_survive_a_restart(cluster: Cluster) -> None:
    c = cluster
    admin = c.admin()  # kept until its future is done
    admin.create_topics([NewTopic("orders", 1, 2)])["orders"].result(30)
    c.wait_for(lambda: _leader(c, "orders") > 0, "a leader for orders")
    leader = _leader(c, "orders")
    other = next(n for n in c.brokers if n != leader)
    leader_bs, other_bs = c.brokers[leader].bootstrap, c.brokers[other].bootstrap
    assert _produce(c.bootstrap, "orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert not _described(leader_bs, "orders")

    # Created through the broker that does not lead the partition, enforced by the leader.
    assert _acl(other_bs, K.CREATE_ACLS, "orders") == 0
    _until(c, lambda: _described(leader_bs, "orders"), "the leader to see the new ACL")
    _until(c, lambda: _produce(c.bootstrap, "orders") is None, "producing to be allowed")

    # Deleted through the leader: the other broker stops describing the topic too.
    assert _acl(leader_bs, K.DELETE_ACLS, "orders") == 0
    _until(c, lambda: not _described(other_bs, "orders"), "the other broker to drop it")
    _until(c, lambda: _produce(c.bootstrap, "orders") == "TOPIC_AUTHORIZATION_FAILED",
           "producing to be denied again")

    # Made again, then the leader restarts: it reads the ACLs back from ZooKeeper.
    assert _acl(other_bs, K.CREATE_ACLS, "orders") == 0
    _until(c, lambda: _described(leader_bs, "orders"), "the leader to see it again")
    c.brokers[leader].stop()
    c.brokers[leader].start()
    c.wait_for(lambda: len(c.zk_children("/brokers/ids")) == 2, "the leader back")
    assert _described(leader_bs, "orders")
    assert not _described(leader_bs, "no-acl-topic")
    _until(c, lambda: _produce(c.bootstrap, "orders") is None, "producing after the restart")


@pytest.mark.parametrize(("api", "case", "what", "call", "expected"),
                         cluster_rows(CLUSTER_ONLY_APIS, allowed_from=BROKER_HOST,
                                      denied_from=OUTSIDER),
                         ids=lambda v: K(v).name if isinstance(v, K) else None)
def test_cluster_acls_cluster_only_apis(cluster: Cluster, api: int, case: str, what: str,
                                        call: Callable[[str], int],
                                        expected: ErrorCode | None) -> None:
    controller = cluster.controller()
    outcome = call(cluster.brokers[controller].bootstrap)
    if case == ALLOWED:
        assert outcome >= 0 and outcome not in AUTH_ERRORS, outcome
    else:
        assert outcome == expected, outcome
