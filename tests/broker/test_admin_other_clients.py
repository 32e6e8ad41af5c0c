"""Topic administration through kafka-python's and aiokafka's admin clients, plus
DescribeCluster and OffsetForLeaderEpoch."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions
from kafka.admin import NewTopic as KpNewTopic

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from kafka_wire import RawConnection


def test_admin_kafka_python(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([KpNewTopic("kp-admin", 2, 1, topic_configs={"retention.ms": "5000"})])
    assert "kp-admin" in admin.list_topics()
    described = admin.describe_topics(["kp-admin"])
    assert len(described[0]["partitions"]) == 2
    cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
    entry = cfg["topic"]["kp-admin"]["retention.ms"]
    assert entry["value"] == "5000"
    assert entry["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    admin.create_partitions({"kp-admin": NewPartitions(3)})
    assert len(admin.describe_topics(["kp-admin"])[0]["partitions"]) == 3
    admin.delete_topics(["kp-admin"])
    assert "kp-admin" not in admin.list_topics()
    admin.close()


async def test_admin_aiokafka(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([AioNewTopic("aio-admin", 3, 1)])
        assert "aio-admin" in await admin.list_topics()
        await admin.delete_topics(["aio-admin"])
        assert "aio-admin" not in await admin.list_topics()
    finally:
        await admin.close()


def test_admin_describe_cluster(ads_broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": ads_broker.bootstrap_servers})
    cluster = admin.describe_cluster().result(10)
    assert [n.id for n in cluster.nodes] == [ads_broker.broker.node_id]
    assert cluster.controller.id == ads_broker.broker.node_id
    assert cluster.cluster_id == ads_broker.broker.metadata.cluster_id


def test_admin_offset_for_leader_epoch(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(7):
        producer.produce("epochs", value=f"{i}".encode(), partition=0)
    assert producer.flush(10) == 0
    OFE = m.OffsetForLeaderEpochRequest
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, OFE(replica_id=-1, topics=[
            OFE.OffsetForLeaderTopic(topic="epochs", partitions=[
                OFE.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=0, leader_epoch=0),
                OFE.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=5, leader_epoch=0)])]))
    first, fenced = resp.topics[0].partitions
    assert (first.error_code, first.leader_epoch, first.end_offset) == (ErrorCode.NONE, 0, 7)
    assert fenced.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
