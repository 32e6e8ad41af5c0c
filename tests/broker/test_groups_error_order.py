"""Classic-group error precedence as clients see it: who the committer is and its
generation are checked before the group's state (Kafka's ClassicGroup order; the table is
in ads.coordinator.group.state)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

CONFIG = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}
SUBSCRIPTION = b"\x00\x01" + m.ConsumerProtocolSubscription(topics=["t"]).encode(1)


@pytest.fixture
def completing() -> Iterator[tuple[str, RawConnection, str]]:
    """A broker whose group "g" completes a rebalance: its one member (a raw client, the
    leader) has its join response and sends no SyncGroup."""
    with EmbeddedBroker(config=CONFIG) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "t")
        with RawConnection(bs) as conn:
            found = conn.request(10, 3, m.FindCoordinatorRequest(key="g", key_type=0))
            assert found.error_code == ErrorCode.NONE
            join = m.JoinGroupRequest(
                group_id="g", session_timeout_ms=30_000, rebalance_timeout_ms=60_000,
                member_id="", protocol_type="consumer", protocols=[
                    m.JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                metadata=SUBSCRIPTION)])
            first = conn.request(11, 5, join)
            assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
            join.member_id = first.member_id
            joined = conn.request(11, 5, join)
            assert (joined.error_code, joined.generation_id) == (ErrorCode.NONE, 1)
            yield bs, conn, joined.member_id


def test_groups_error_order_outside_commit_during_completing_rebalance_confluent(
        completing: tuple[str, RawConnection, str]) -> None:
    bs, _, _ = completing
    # A consumer that assigns partitions itself commits with generation -1 and no member
    # id: refused because the group has members, not because it rebalances.
    c = Consumer({"bootstrap.servers": bs, "group.id": "g", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("t", 0)])
        with pytest.raises(KafkaException) as info:
            c.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID
    finally:
        c.close()


def test_groups_error_order_member_commit_during_completing_rebalance_raw(
        completing: tuple[str, RawConnection, str]) -> None:
    _, conn, member = completing

    def commit(generation: int, member_id: str, version: int = 8) -> int:
        req = m.OffsetCommitRequest(
            group_id="g", generation_id_or_member_epoch=generation, member_id=member_id,
            topics=[m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                m.OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1)])])
        return int(conn.request(8, version, req).topics[0].partitions[0].error_code)

    assert commit(0, member) == ErrorCode.ILLEGAL_GENERATION
    assert commit(1, "ghost") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(1, member) == ErrorCode.REBALANCE_IN_PROGRESS
    heartbeat = m.HeartbeatRequest(group_id="g", generation_id=0, member_id=member)
    assert conn.request(12, 3, heartbeat).error_code == ErrorCode.ILLEGAL_GENERATION


def test_groups_error_order_outside_commit_during_completing_rebalance_kafka_python(
        completing: tuple[str, RawConnection, str]) -> None:
    bs, _, _ = completing
    consumer = KafkaConsumer(bootstrap_servers=bs, group_id="g", enable_auto_commit=False)
    try:
        tp = KTopicPartition("t", 0)
        consumer.assign([tp])
        with pytest.raises(Exception) as info:  # noqa: PT011 - the class varies by version
            consumer.commit({tp: OffsetAndMetadata(5, "", -1)})
        assert "UnknownMemberIdError" in repr(info.value)
    finally:
        consumer.close()
