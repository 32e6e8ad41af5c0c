"""The KRaft metadata log as a broker reads it: record frames, batches, the image built from
the records, and the observer's rule that only committed batches are applied.

The records are the generated classes encoded by the codec, in RecordBatch v2 batches built
by `ads.records`: the bytes a controller writes (the end-to-end test against Apache Kafka's
controller is test_metadata_kraft_broker.py)."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from ads.metadata import kraft_records as r
from ads.metadata.acl import AclOperation, PatternType, ResourcePattern, ResourceType
from ads.metadata.kraft_image import Changes, MetadataImage
from ads.metadata.kraft_log import (
    METADATA_TOPIC_ID,
    MetadataBatch,
    MetadataRecordError,
    decode_record_value,
    encode_record_value,
    read_batches,
)
from ads.metadata.kraft_quorum import (
    ControllerConnection,
    FollowerSettings,
    LogFollower,
    Quorum,
    parse_bootstrap,
)
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.security.scram import ScramCredential

TOPIC_ID = uuid.UUID(int=0xABC)


def batch(records: list[Message], base_offset: int, epoch: int = 1) -> bytes:
    values = [(None, encode_record_value(rec, rec.VALID_VERSIONS[1])) for rec in records]
    return build_batch(values, base_offset=base_offset, partition_leader_epoch=epoch)


def leader_change_batch(base_offset: int, epoch: int) -> bytes:
    # A Raft control record: key (version 0, type 2 = LeaderChangeMessage), value the message.
    value = m.LeaderChangeMessage(leader_id=3000, voters=[], granting_voters=[]).encode(0)
    return build_batch([(struct.pack(">hh", 0, 2), value)], base_offset=base_offset,
                       is_control=True, partition_leader_epoch=epoch)


def replay(image: MetadataImage, *records: Message) -> Changes:
    changes = Changes()
    for rec in records:
        image.replay(rec, changes)
    return changes


def register(broker_id: int, epoch: int, fenced: bool = True) -> r.RegisterBrokerRecord:
    return r.RegisterBrokerRecord(
        broker_id=broker_id, broker_epoch=epoch, fenced=fenced, rack="r1",
        end_points=[r.RegisterBrokerRecord.BrokerEndpoint(
            name="PLAINTEXT", host="h", port=9000 + broker_id, security_protocol=0)])


def test_kraft_log_record_value_round_trips_every_record_type_and_version() -> None:
    for cls in r.METADATA_RECORDS.values():
        low, high = cls.VALID_VERSIONS
        for version in range(low, high + 1):
            record = cls()
            assert decode_record_value(encode_record_value(record, version)) == record


@pytest.mark.parametrize(("value", "problem"), [
    (bytes([0, 2, 0]), "frame version 0"),
    (bytes([1, 99, 0]), "unknown metadata record type 99"),
    (bytes([1, 2, 9]), "version 9"),
    (encode_record_value(r.NoOpRecord(), 0) + b"x", "1 bytes after NoOpRecord"),
    (bytes([1]), "bad metadata record frame"),
])
def test_kraft_log_record_value_refuses_what_it_cannot_read(value: bytes, problem: str) -> None:
    with pytest.raises(MetadataRecordError, match=problem):
        decode_record_value(value)


def test_kraft_log_batches_decode_with_control_batches_as_offsets_only() -> None:
    data = leader_change_batch(0, 1) + batch([r.TopicRecord(name="a", topic_id=TOPIC_ID),
                                              r.NoOpRecord()], base_offset=1, epoch=1)
    batches = list(read_batches(data))
    assert [(b.base_offset, b.last_offset, b.epoch, b.control) for b in batches] == [
        (0, 0, 1, True), (1, 2, 1, False)]
    assert batches[0].records == ()
    assert batches[1].records == (r.TopicRecord(name="a", topic_id=TOPIC_ID), r.NoOpRecord())


def test_kraft_log_corrupt_batch_is_a_metadata_record_error() -> None:
    data = bytearray(batch([r.NoOpRecord()], base_offset=0))
    data[-1] ^= 0xFF
    with pytest.raises(MetadataRecordError, match="CRC"):
        list(read_batches(bytes(data)))


def test_kraft_image_builds_topics_partitions_and_configs() -> None:
    image = MetadataImage()
    changes = replay(
        image,
        r.TopicRecord(name="orders", topic_id=TOPIC_ID),
        r.ConfigRecord(resource_type=2, resource_name="orders", name="cleanup.policy",
                       value="compact"),
        r.PartitionRecord(partition_id=1, topic_id=TOPIC_ID, replicas=[2, 1], isr=[2, 1],
                          leader=2, leader_epoch=0, partition_epoch=0),
        r.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2],
                          leader=1, leader_epoch=0, partition_epoch=0))
    assert changes.topics == {"orders"} and not changes.brokers
    topic = image.topics["orders"]
    assert image.by_id[TOPIC_ID] is topic
    assert topic.configs == {"cleanup.policy": "compact"}
    assert [(p.partition, p.leader, p.replicas) for p in topic.partitions] == [
        (0, 1, [1, 2]), (1, 2, [2, 1])]
    # Only what a change carries changes; a new leader bumps the leader epoch.
    replay(image, r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1]))
    p0 = topic.partitions[0]
    assert (p0.leader, p0.leader_epoch, p0.isr, p0.replicas) == (1, 0, [1], [1, 2])
    replay(image, r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2))
    assert (p0.leader, p0.leader_epoch, p0.isr) == (2, 1, [1])
    assert image.partition_epochs[(TOPIC_ID, 0)] == 2
    replay(image, r.ConfigRecord(resource_type=2, resource_name="orders",
                                 name="cleanup.policy", value=None))
    assert topic.configs == {}
    changes = replay(image, r.RemoveTopicRecord(topic_id=TOPIC_ID))
    assert changes.topics == {"orders"}
    assert image.topics == {} and image.by_id == {} and image.partition_epochs == {}


def test_kraft_image_follows_broker_registration_and_fencing() -> None:
    image = MetadataImage()
    changes = replay(image, register(1, 10), register(2, 11, fenced=False))
    assert changes.brokers
    assert sorted(image.unfenced_brokers()) == [2]
    endpoint = image.brokers[1].endpoint
    assert (endpoint.host, endpoint.port, endpoint.rack) == ("h", 9001, "r1")
    assert endpoint.on("PLAINTEXT") is not None
    replay(image, r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1))
    assert sorted(image.unfenced_brokers()) == [1, 2]
    # A change about an older registration of the broker is not about this one.
    replay(image, r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=9, fenced=1))
    assert sorted(image.unfenced_brokers()) == [1, 2]
    replay(image, r.FenceBrokerRecord(id=2, epoch=11))
    assert sorted(image.unfenced_brokers()) == [1]
    replay(image, r.UnfenceBrokerRecord(id=2, epoch=11),
           r.UnregisterBrokerRecord(broker_id=1, broker_epoch=10))
    assert sorted(image.unfenced_brokers()) == [2]


def test_kraft_image_metadata_transaction_applies_at_its_end_or_not_at_all() -> None:
    image = MetadataImage()
    replay(image, r.BeginTransactionRecord(name="t"),
           r.TopicRecord(name="a", topic_id=TOPIC_ID))
    assert image.topics == {}
    replay(image, r.EndTransactionRecord())
    assert list(image.topics) == ["a"]
    replay(image, r.BeginTransactionRecord(name="t"), r.RemoveTopicRecord(topic_id=TOPIC_ID),
           r.AbortTransactionRecord(reason="gave up"))
    assert list(image.topics) == ["a"]


def test_kraft_image_features_and_records_it_does_not_model() -> None:
    image = MetadataImage()
    replay(image, r.FeatureLevelRecord(name="metadata.version", feature_level=33),
           r.ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=2000),
           r.DelegationTokenRecord(owner="User:a", token_id="t"))
    assert image.features == {"metadata.version": 33}
    assert image.next_producer_id == 2000
    assert image.ignored == {"DelegationTokenRecord": 1}


def fetch_answer(data: bytes, high_watermark: int, *, error: int = ErrorCode.NONE,
                 leader: tuple[int, int] = (3000, 1), diverging: int = -1) -> m.FetchResponse:
    """A Fetch answer whose NodeEndpoints give leader 3000 at c:9093 and 3001 at d:9093."""
    P = m.FetchResponse.FetchableTopicResponse.PartitionData  # noqa: N806
    partition = P(partition_index=0, error_code=error, high_watermark=high_watermark,
                  records=data or None,
                  current_leader=P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
                  diverging_epoch=P.EpochEndOffset(epoch=1, end_offset=diverging))
    return m.FetchResponse(
        responses=[m.FetchResponse.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID,
                                                          partitions=[partition])],
        node_endpoints=[m.FetchResponse.NodeEndpoint(node_id=3000, host="c", port=9093),
                        m.FetchResponse.NodeEndpoint(node_id=3001, host="d", port=9093)])


class Recorder:
    def __init__(self) -> None:
        self.applied: list[MetadataBatch] = []
        self.replaced = 0

    def apply(self, batches: list[MetadataBatch]) -> None:
        self.applied.extend(batches)

    def replace(self, batches: list[MetadataBatch]) -> None:
        self.replaced += 1
        self.applied = list(batches)


async def not_connected(host: str, port: int) -> ControllerConnection:
    raise AssertionError("handle() never connects")


async def test_kraft_follower_applies_only_committed_batches_in_order() -> None:
    quorum = Quorum(parse_bootstrap(["a:1"], []))
    seen = Recorder()
    follower = LogFollower(quorum, not_connected, FollowerSettings(node_id=1),
                           lambda: None, seen.apply, seen.replace)
    assert follower.request().topics[0].partitions[0].fetch_offset == 0
    first = leader_change_batch(0, 1) + batch([r.TopicRecord(name="a", topic_id=TOPIC_ID)], 1)
    follower.handle(fetch_answer(first, high_watermark=1))
    assert [b.base_offset for b in seen.applied] == [0]
    assert follower.fetch_offset == 2  # the uncommitted batch is held, not fetched again
    assert quorum.leader_address == ("c", 9093) and quorum.leader_epoch == 1
    follower.handle(fetch_answer(b"", high_watermark=2))
    assert [b.base_offset for b in seen.applied] == [0, 1]
    assert follower.applied_offset == 1
    await asyncio.sleep(0)


async def test_kraft_follower_truncates_on_divergence_and_follows_a_new_leader() -> None:
    quorum = Quorum(parse_bootstrap([], ["3000@a:1"]))
    seen = Recorder()
    follower = LogFollower(quorum, not_connected, FollowerSettings(node_id=1),
                           lambda: None, seen.apply, seen.replace)
    data = batch([r.NoOpRecord()], 0) + batch([r.NoOpRecord()], 1)
    follower.handle(fetch_answer(data, high_watermark=1))
    assert follower.fetch_offset == 2
    follower.handle(fetch_answer(b"", high_watermark=1, diverging=1))
    assert follower.fetch_offset == 1
    # Committed records are never truncated in Raft: a leader asking for it is an error.
    with pytest.raises(MetadataRecordError, match="below the committed offset 0"):
        follower.handle(fetch_answer(b"", high_watermark=1, diverging=0))
    follower.handle(fetch_answer(b"", 0, error=ErrorCode.FENCED_LEADER_EPOCH, leader=(3001, 5)))
    assert (quorum.leader_id, quorum.leader_epoch, quorum.leader_address) == (3001, 5,
                                                                              ("d", 9093))
    assert follower.request().topics[0].partitions[0].current_leader_epoch == 5


def test_kraft_follower_snapshot_replaces_what_was_applied_and_fetching_goes_on_after_it(
        ) -> None:
    quorum = Quorum(parse_bootstrap(["a:1"], []))
    seen = Recorder()
    follower = LogFollower(quorum, not_connected, FollowerSettings(node_id=1),
                           lambda: "cluster", seen.apply, seen.replace)
    follower.handle(fetch_answer(batch([r.NoOpRecord()], 0), high_watermark=1))
    P = m.FetchResponse.FetchableTopicResponse.PartitionData  # noqa: N806
    answer = fetch_answer(b"", high_watermark=500)
    answer.responses[0].partitions[0].snapshot_id = P.SnapshotId(end_offset=400, epoch=3)
    assert follower.handle(answer)
    request = follower.snapshot_request(400, 3, position=0)
    wanted = request.topics[0].partitions[0]
    assert (wanted.snapshot_id.end_offset, wanted.snapshot_id.epoch) == (400, 3)
    assert request.cluster_id == "cluster" and request.replica_id == 1
    # A snapshot is batches from a header control batch to a footer one.
    snapshot = (leader_change_batch(0, 3)
                + batch([r.TopicRecord(name="kept", topic_id=TOPIC_ID)], 1, epoch=3)
                + leader_change_batch(2, 3))
    follower.install_snapshot(snapshot, 400, 3)
    assert seen.replaced == 1
    assert [rec for b in seen.applied for rec in b.records] == [
        r.TopicRecord(name="kept", topic_id=TOPIC_ID)]
    assert (follower.fetch_offset, follower.last_fetched_epoch) == (400, 3)


def test_kraft_image_entity_configs_from_configs_quotas_and_scram_credentials() -> None:
    image = MetadataImage()
    changes = replay(
        image,
        r.ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="1"),
        r.ConfigRecord(resource_type=4, resource_name="2", name="log.cleaner.threads",
                       value="2"),
        r.ConfigRecord(resource_type=32, resource_name="my group",
                       name="consumer.session.timeout.ms", value="50000"),
        r.ClientQuotaRecord(entity=[r.ClientQuotaRecord.EntityData(entity_type="user",
                                                                   entity_name="alice")],
                            key="producer_byte_rate", value=1024.0),
        r.ClientQuotaRecord(entity=[r.ClientQuotaRecord.EntityData(entity_type="client-id",
                                                                   entity_name=None)],
                            key="request_percentage", value=12.5),
        r.ClientQuotaRecord(entity=[r.ClientQuotaRecord.EntityData(entity_type="ip",
                                                                   entity_name="1.2.3.4")],
                            key="connection_creation_rate", value=5.0),
        r.UserScramCredentialRecord(name="alice", mechanism=1, salt=b"salt",
                                    stored_key=b"stored", server_key=b"server",
                                    iterations=4096))
    assert changes.entities == {"brokers/<default>", "brokers/2", "groups/my%20group",
                                "users/alice", "clients/<default>"}
    view = image.entity_configs
    assert view["brokers/<default>"] == {"log.retention.ms": "1"}
    assert view["brokers/2"] == {"log.cleaner.threads": "2"}
    assert view["groups/my%20group"] == {"consumer.session.timeout.ms": "50000"}
    assert view["clients/<default>"] == {"request_percentage": "12.5"}
    assert view["users/alice"]["producer_byte_rate"] == "1024"
    # The credential is in the form ADS's SCRAM authenticator reads.
    credential = ScramCredential.from_config(view["users/alice"]["SCRAM-SHA-256"])
    assert (credential.salt, credential.stored_key, credential.server_key,
            credential.iterations) == (b"salt", b"stored", b"server", 4096)
    assert image.ignored == {"ClientQuotaRecord(ip)": 1}
    replay(image, r.RemoveUserScramCredentialRecord(name="alice", mechanism=1),
           r.ClientQuotaRecord(entity=[r.ClientQuotaRecord.EntityData(entity_type="user",
                                                                      entity_name="alice")],
                               key="producer_byte_rate", remove=True),
           r.ConfigRecord(resource_type=4, resource_name="2", name="log.cleaner.threads",
                          value=None))
    assert "users/alice" not in view and "brokers/2" not in view


def test_kraft_image_acls_by_entry_id() -> None:
    image = MetadataImage()
    first, second = uuid.UUID(int=1), uuid.UUID(int=2)
    replay(image,
           r.AccessControlEntryRecord(id=first, resource_type=2, resource_name="orders",
                                      pattern_type=3, principal="User:alice", host="*",
                                      operation=3, permission_type=3),
           r.AccessControlEntryRecord(id=second, resource_type=2, resource_name="orders",
                                      pattern_type=3, principal="User:bob", host="*",
                                      operation=3, permission_type=3))
    pattern = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
    assert sorted(e.principal for e in image.acls[pattern]) == ["User:alice", "User:bob"]
    assert {e.operation for e in image.acls[pattern]} == {AclOperation.READ}
    replay(image, r.RemoveAccessControlEntryRecord(id=first))
    assert [e.principal for e in image.acls[pattern]] == ["User:bob"]
    replay(image, r.RemoveAccessControlEntryRecord(id=second))
    assert image.acls == {} and image.acl_version == 4
