"""An ADS broker in a cluster run by Apache Kafka's KRaft controller (docs/kraft.md).

Real processes: Kafka 4.x as a controller-only node (tests/kraft_support.py), `ads broker`
with `process.roles=broker` pointed at it, confluent-kafka clients and Kafka's own
`kafka-metadata-quorum` tool. The story: the broker registers and is unfenced; topics made
through ADS and directly at the controller are led by it; clients produce and consume
through it; a config change through ADS reaches the controller's log; a controlled shutdown
and a restart on the same data keep everything.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
)

from ads.bench.processes import await_metadata
from ads.protocol import messages as m
from broker_process import BrokerProcess
from cli_process import ads
from kafka_reference import JARS
from kraft_support import KafkaBroker, KafkaController

pytestmark = [pytest.mark.kafka_reference, pytest.mark.broker_process]

BROKER_ID = 1
T = TypeVar("T")
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaController]:
    with KafkaController(Path(tmp_path_factory.mktemp("controller"))) as c:
        yield c


def kraft_broker(data_dir: Path, controller: KafkaController, port: int | None = None,
                 node_id: int = BROKER_ID, *sets: str) -> BrokerProcess:
    return BrokerProcess(
        data_dir, port, *sets, f"node.id={node_id}", "process.roles=broker",
        f"controller.quorum.bootstrap.servers={controller.quorum}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "offsets.topic.num.partitions=2", "broker.heartbeat.interval.ms=500")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: pm.leader for p, pm in md.topics[topic].partitions.items()}


def await_leaders(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    deadline = time.monotonic() + DEADLINE_S
    seen: dict[int, int] = {}
    while time.monotonic() < deadline:
        seen = leaders(bootstrap, topic)
        if len(seen) == partitions and all(leader == BROKER_ID for leader in seen.values()):
            return seen
        time.sleep(0.1)
    return seen


def _values(consumer: Consumer, count: int) -> list[bytes]:
    """Up to `count` record values polled within DEADLINE_S, sorted; closes the consumer."""
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return sorted(values)


def consume(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    return _values(consumer, count)


def read_partitions(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    """Every record of the topic's partitions, read from their starts without a group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return _values(consumer, count)


def quorum_replication(controller: KafkaController) -> str:
    """`kafka-metadata-quorum --bootstrap-controller ... describe --replication`."""
    done = subprocess.run(  # noqa: S603 - our own command line
        controller._java("org.apache.kafka.tools.MetadataQuorumCommand",
                         "--bootstrap-controller", controller.quorum, "describe",
                         "--replication"),
        capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def quotas_of_alice(bootstrap: str) -> str:
    done = ads("quotas", "describe", "--bootstrap-server", bootstrap, "--entity-type", "users",
               "--entity-name", "alice")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_metadata_kraft_broker_joins_serves_and_restarts(controller: KafkaController,
                                                         tmp_path: Path) -> None:
    assert JARS.is_dir()
    broker = kraft_broker(tmp_path / "data", controller).start()
    try:
        # (a) Registered and unfenced: ADS lists only brokers the controller's log says
        # are unfenced, and Kafka's tool shows the broker following the log as an observer.
        await_metadata(broker.bootstrap, broker.proc, time.monotonic() + DEADLINE_S, "ADS",
                       broker.log)
        meta = (tmp_path / "data" / "meta.properties").read_text()
        assert f"cluster.id={controller.cluster_id}" in meta
        directory_id = next(line.partition("=")[2] for line in meta.splitlines()
                            if line.startswith("directory.id="))
        observers = [line.split() for line in quorum_replication(controller).splitlines()
                     if line.split()[:1] == [str(BROKER_ID)]]
        assert observers and observers[0][1] == directory_id
        assert observers[0][-1] == "Observer"

        # (b) A topic made through ADS (CreateTopics forwarded to the controller) and one
        # made directly at the controller are both led by the ADS broker.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(timeout=DEADLINE_S)
        assert await_leaders(broker.bootstrap, "orders", 3) == {0: 1, 1: 1, 2: 1}
        created = controller.request(m.CreateTopicsRequest.API_KEY, 7, m.CreateTopicsRequest(
            topics=[m.CreateTopicsRequest.CreatableTopic(name="direct", num_partitions=2,
                                                         replication_factor=1)],
            timeout_ms=30_000))
        assert isinstance(created, m.CreateTopicsResponse)
        assert created.topics[0].error_code == 0
        assert await_leaders(broker.bootstrap, "direct", 2) == {0: 1, 1: 1}
        with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
            admin.create_topics([NewTopic("direct", 1, 1)])["direct"].result(timeout=30)

        # (c) Clients produce (idempotent: producer ids come from the controller) and
        # consume in a group (its __consumer_offsets made through the controller).
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for i in range(20):
            producer.produce("orders" if i % 2 else "direct", key=b"k%d" % i, value=b"v%02d" % i)
        assert producer.flush(DEADLINE_S) == 0
        assert consume(broker.bootstrap, "orders", "g1", 10) == [b"v%02d" % i
                                                                 for i in range(1, 20, 2)]
        assert consume(broker.bootstrap, "direct", "g1", 10) == [b"v%02d" % i
                                                                 for i in range(0, 20, 2)]

        # A topic config set through ADS is written by the controller and read back.
        resource = ConfigResource("topic", "orders", incremental_configs=[
            ConfigEntry("retention.ms", "3600000",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=DEADLINE_S)
        described = admin.describe_configs([ConfigResource("topic", "orders")])
        configs = next(iter(described.values())).result(timeout=DEADLINE_S)
        assert configs["retention.ms"].value == "3600000"

        # A dynamic broker config set through ADS goes through the controller's log (ADS
        # answers once it is back) and acts on the broker.
        resource = ConfigResource("broker", str(BROKER_ID), incremental_configs=[
            ConfigEntry("log.retention.ms", "7200000",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=DEADLINE_S)
        described = admin.describe_configs([ConfigResource("broker", str(BROKER_ID))])
        entry = next(iter(described.values())).result(timeout=DEADLINE_S)["log.retention.ms"]
        assert (entry.value, entry.source) == ("7200000",
                                               ConfigSource.DYNAMIC_BROKER_CONFIG.value)

        # A SCRAM credential made at the controller (AlterUserScramCredentials, as an admin
        # client bootstrapped to controllers sends it) reaches ADS, which describes it.
        salt = b"0123456789abcdef"
        R = m.AlterUserScramCredentialsRequest  # noqa: N806
        altered = controller.request(R.API_KEY, 0, R(upsertions=[R.ScramCredentialUpsertion(
            name="alice", mechanism=1, iterations=8192, salt=salt,
            salted_password=hashlib.pbkdf2_hmac("sha256", b"pw", salt, 8192))]))
        assert isinstance(altered, m.AlterUserScramCredentialsResponse)
        assert [r.error_code for r in altered.results] == [0]
        deadline = time.monotonic() + DEADLINE_S
        while True:
            described = admin.describe_user_scram_credentials(["alice"])["alice"]
            try:
                infos = described.result(timeout=DEADLINE_S).scram_credential_infos
                break
            except KafkaException:
                assert time.monotonic() < deadline, "alice's credential never reached ADS"
                time.sleep(0.2)
        assert [(i.mechanism, i.iterations) for i in infos] == [
            (ScramMechanism.SCRAM_SHA_256, 8192)]

        # A client quota set through ADS (`ads quotas`) goes to the controller.
        done = ads("quotas", "alter", "--bootstrap-server", broker.bootstrap, "--entity-type",
                   "users", "--entity-name", "alice", "--add-config",
                   "producer_byte_rate=1048576")
        assert done.returncode == 0, done.stderr
        assert "producer_byte_rate=1048576" in quotas_of_alice(broker.bootstrap)
    finally:
        # SIGTERM: a controlled shutdown through the heartbeat, then a clean exit.
        assert broker.stop() == 0
    assert "ended this broker's controlled shutdown" in broker.log()

    # Restarted on its data: the same cluster (meta.properties), the controller makes it
    # leader again once it has caught up, and the records are all there.
    again = kraft_broker(tmp_path / "data", controller, broker.port).start()
    try:
        assert await_leaders(again.bootstrap, "orders", 3) == {0: 1, 1: 1, 2: 1}
        # Nothing of the metadata is kept by the broker: the quota came from the log again.
        assert "producer_byte_rate=1048576" in quotas_of_alice(again.bootstrap)
        assert consume(again.bootstrap, "orders", "g2", 10) == [b"v%02d" % i
                                                                for i in range(1, 20, 2)]
    finally:
        assert again.stop() == 0


# A controller that snapshots its metadata every half second, rolls its log segments as
# often, and deletes what a snapshot covers (it checks once a minute, KafkaRaftClient's
# fixed cleaning interval): a broker that starts later can only read the log from a
# snapshot.
SNAPSHOTTING = {
    "metadata.log.max.snapshot.interval.ms": "500",
    "metadata.max.idle.interval.ms": "50",
    "metadata.log.segment.ms": "500",
    "metadata.max.retention.ms": "500",
    "internal.metadata.log.segment.bytes": "4096",
}
CLEANED_WITHIN_S = 150.0


def test_metadata_kraft_broker_restarts_from_a_snapshot(tmp_path: Path) -> None:
    with KafkaController(tmp_path / "controller", SNAPSHOTTING) as controller:
        broker = kraft_broker(tmp_path / "data", controller).start()
        try:
            await_metadata(broker.bootstrap, broker.proc, time.monotonic() + DEADLINE_S,
                           "ADS", broker.log)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("early", 2, 1)])["early"].result(timeout=DEADLINE_S)
            assert await_leaders(broker.bootstrap, "early", 2) == {0: 1, 1: 1}
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            producer.produce("early", value=b"before")
            assert producer.flush(DEADLINE_S) == 0
        finally:
            assert broker.stop() == 0
        # While the broker is away, the controller's log start moves past the topic's
        # records: only its snapshots still hold them.
        first_segment = controller.data_dir / "__cluster_metadata-0" / f"{0:020d}.log"
        deadline = time.monotonic() + CLEANED_WITHIN_S
        while first_segment.exists() and time.monotonic() < deadline:
            time.sleep(1.0)
        assert not first_segment.exists(), "the controller kept its log from offset 0"

        again = kraft_broker(tmp_path / "data", controller, broker.port).start()
        try:
            assert await_leaders(again.bootstrap, "early", 2) == {0: 1, 1: 1}
            producer = Producer({"bootstrap.servers": again.bootstrap})
            producer.produce("early", value=b"after")
            assert producer.flush(DEADLINE_S) == 0
            assert consume(again.bootstrap, "early", "g", 2) == [b"after", b"before"]
        finally:
            assert again.stop() == 0
        assert "read the metadata snapshot up to offset" in again.log()


def isrs(bootstrap: str, topic: str) -> dict[int, list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: sorted(pm.isrs) for p, pm in md.topics[topic].partitions.items()}


def await_state(probe: Callable[[], dict[int, T]], wanted: dict[int, T]) -> dict[int, T]:
    """`probe()` until it answers `wanted` or the deadline passes; its last answer."""
    deadline = time.monotonic() + DEADLINE_S
    seen = probe()
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = probe()
    return seen


def test_metadata_kraft_brokers_replicate_and_fail_over(tmp_path: Path) -> None:
    # A short session, so the controller fences the killed broker in seconds.
    with KafkaController(tmp_path / "controller", {"broker.session.timeout.ms": "3000"}
                         ) as controller:
        brokers = {node: kraft_broker(tmp_path / f"data{node}", controller, node_id=node)
                   for node in (1, 2)}
        for b in brokers.values():
            b.start()
        try:
            one = brokers[1].bootstrap
            await_metadata(one, brokers[1].proc, time.monotonic() + DEADLINE_S, "ADS",
                           brokers[1].log, brokers=2)
            admin = AdminClient({"bootstrap.servers": one})
            admin.create_topics([NewTopic("replicated", 2, 2)])["replicated"].result(
                timeout=DEADLINE_S)
            assert await_state(lambda: isrs(one, "replicated"), {0: [1, 2], 1: [1, 2]}) == {
                0: [1, 2], 1: [1, 2]}
            producer = Producer({"bootstrap.servers": one, "acks": "all"})
            for i in range(10):
                producer.produce("replicated", value=b"r%d" % i, partition=i % 2)
            assert producer.flush(DEADLINE_S) == 0

            # The leader of partition 0 dies; the controller fences it and the other
            # broker, in the ISR, leads both partitions with every acknowledged record.
            victim = leaders(one, "replicated")[0]
            survivor = 3 - victim
            brokers[victim].kill9()
            alive = brokers[survivor].bootstrap
            assert await_state(lambda: leaders(alive, "replicated"),
                               {0: survivor, 1: survivor}) == {0: survivor, 1: survivor}
            assert consume(alive, "replicated", "g", 10) == sorted(b"r%d" % i
                                                                   for i in range(10))

            # Back on its data, it catches up and its leader asks the controller to put
            # it back in the ISR (AlterPartition).
            brokers[victim] = kraft_broker(tmp_path / f"data{victim}", controller,
                                           brokers[victim].port, node_id=victim).start()
            assert await_state(lambda: isrs(alive, "replicated"), {0: [1, 2], 1: [1, 2]}) == {
                0: [1, 2], 1: [1, 2]}
        finally:
            for b in brokers.values():
                if b.proc is not None and b.proc.poll() is None:
                    assert b.stop() == 0


def visible_topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def controller_acl(resource_type: int, name: str, operation: int) -> m.CreateAclsRequest:
    """Allow User:ANONYMOUS (a PLAINTEXT client) `operation` on a literal resource."""
    return m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=3,
        principal="User:ANONYMOUS", host="*", operation=operation, permission_type=3)])


# The controller authorizes too: CreateAcls needs an authorizer there. The tests connect as
# User:ANONYMOUS (PLAINTEXT), as ADS does: a super user at the controller, as brokers are.
CONTROLLER_AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


def test_metadata_kraft_broker_authorizes_with_acls_from_the_controller(tmp_path: Path) -> None:
    with KafkaController(tmp_path / "controller", CONTROLLER_AUTHORIZER) as controller:
        broker = kraft_broker(
            tmp_path / "data", controller, None, BROKER_ID,
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin", "allow.everyone.if.no.acl.found=false").start()
        try:
            await_metadata(broker.bootstrap, broker.proc, time.monotonic() + DEADLINE_S,
                           "ADS", broker.log)
            # Two topics in one request (one batch of the log): ACLs made at the controller
            # let this client see one of them through ADS, DESCRIBE on "open", and let it
            # change ACLs through ADS, ALTER on the cluster.
            T = m.CreateTopicsRequest  # noqa: N806
            created = controller.request(T.API_KEY, 7, T(topics=[
                T.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
                for name in ("open", "secret")], timeout_ms=30_000))
            assert isinstance(created, m.CreateTopicsResponse)
            assert [t.error_code for t in created.topics] == [0, 0]
            for acl in (controller_acl(2, "open", 8), controller_acl(4, "kafka-cluster", 7)):
                answer = controller.request(m.CreateAclsRequest.API_KEY, 3, acl)
                assert isinstance(answer, m.CreateAclsResponse)
                assert [r.error_code for r in answer.results] == [0]
            deadline = time.monotonic() + DEADLINE_S
            while "open" not in visible_topics(broker.bootstrap):
                assert time.monotonic() < deadline, "the ACLs never reached ADS"
                time.sleep(0.2)
            assert "secret" not in visible_topics(broker.bootstrap)

            # ACLs made and deleted through ADS go to the controller and come back.
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            describe = AclBinding(ResourceType.TOPIC, "secret", ResourcePatternType.LITERAL,
                                  "User:ANONYMOUS", "*", AclOperation.DESCRIBE,
                                  AclPermissionType.ALLOW)
            admin.create_acls([describe])[describe].result(timeout=DEADLINE_S)
            assert "secret" in visible_topics(broker.bootstrap)
            assert sorted(controller_acls(controller)) == [
                (2, "open", 8), (2, "secret", 8), (4, "kafka-cluster", 7)]
            secret = AclBindingFilter(ResourceType.TOPIC, "secret",
                                      ResourcePatternType.LITERAL, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
            admin.delete_acls([secret])[secret].result(timeout=DEADLINE_S)
            assert "secret" not in visible_topics(broker.bootstrap)
            assert sorted(controller_acls(controller)) == [(2, "open", 8),
                                                           (4, "kafka-cluster", 7)]
        finally:
            assert broker.stop() == 0


def controller_acls(controller: KafkaController) -> list[tuple[int, str, int]]:
    """Every ACL as the controller describes it: (resource type, name, operation)."""
    answer = controller.request(m.DescribeAclsRequest.API_KEY, 3, m.DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert isinstance(answer, m.DescribeAclsResponse)
    assert answer.error_code == 0, answer.error_message
    return [(r.resource_type, r.resource_name, a.operation)
            for r in answer.resources for a in r.acls]


def test_metadata_kraft_broker_is_refused_by_a_cluster_on_levels_it_cannot_run(
        tmp_path: Path) -> None:
    # Kafka 4.4's default levels: transaction.version 2, eligible leader replicas, streams.
    with KafkaController(tmp_path / "controller", features=()) as controller:
        broker = kraft_broker(tmp_path / "data", controller).start()
        try:
            deadline = time.monotonic() + DEADLINE_S
            while "refused this broker's registration: UNSUPPORTED_VERSION" not in broker.log():
                assert time.monotonic() < deadline, broker.log()
                time.sleep(0.2)
            # It keeps asking (a controller's levels may be lowered) and never registers.
            assert broker.proc is not None and broker.proc.poll() is None
            assert "registered broker" not in broker.log()
        finally:
            assert broker.stop() == 0


def test_metadata_kraft_one_cluster_of_ads_and_kafka_brokers(tmp_path: Path) -> None:
    # One replica of each partition on each broker. Every broker must agree on the
    # partitions of __consumer_offsets (which one coordinates a group); it gets one replica.
    internal = {"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "2"}
    with KafkaController(tmp_path / "controller") as controller:
        ads_broker = kraft_broker(tmp_path / "ads", controller, None, BROKER_ID,
                                  "offsets.topic.replication.factor=1").start()
        try:
            with KafkaBroker(tmp_path / "kafka", controller, 2, internal) as kafka:
                await_metadata(ads_broker.bootstrap, ads_broker.proc,
                               time.monotonic() + DEADLINE_S, "ADS", ads_broker.log, brokers=2)
                admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
                # Partition 0 led by ADS with a Kafka follower, partition 1 the other way.
                topic = NewTopic("mixed", 2, replica_assignment=[[1, 2], [2, 1]])
                admin.create_topics([topic])["mixed"].result(timeout=DEADLINE_S)
                both = {0: [1, 2], 1: [1, 2]}
                assert await_state(lambda: isrs(kafka.bootstrap, "mixed"), both) == both
                assert leaders(ads_broker.bootstrap, "mixed") == {0: 1, 1: 2}
                producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
                for i in range(20):
                    producer.produce("mixed", value=b"x%02d" % i, partition=i % 2)
                assert producer.flush(DEADLINE_S) == 0
                every = sorted(b"x%02d" % i for i in range(20))
                assert consume(ads_broker.bootstrap, "mixed", "through-ads", 20) == every
                assert consume(kafka.bootstrap, "mixed", "through-kafka", 20) == every
                assert isrs(kafka.bootstrap, "mixed") == both

                # The ADS broker dies: Kafka, in the ISR of partition 0, leads it with every
                # record the ADS leader acknowledged.
                ads_broker.kill9()
                assert await_state(lambda: leaders(kafka.bootstrap, "mixed"),
                                   {0: 2, 1: 2}) == {0: 2, 1: 2}
                # Read without a group: its coordinator may have been the dead broker.
                assert read_partitions(kafka.bootstrap, "mixed", 2, 20) == every
        finally:
            if ads_broker.proc is not None and ads_broker.proc.poll() is None:
                assert ads_broker.stop() == 0
