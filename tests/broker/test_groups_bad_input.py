"""Bad group requests over the wire get Kafka's error codes and change nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

JG = m.JoinGroupRequest
SUB = b"\x00\x01" + m.ConsumerProtocolSubscription(topics=["topic"]).encode(1)


def join(conn: RawConnection, group: str, member: str = "", metadata: bytes = SUB,
         session: int = 10000) -> Any:
    return conn.request(11, 7, JG(
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=10000,
        member_id=member, protocol_type="consumer",
        protocols=[JG.JoinGroupRequestProtocol(name="range", metadata=metadata)]))


def commit(conn: RawConnection, group: str, topic: str, partition: int = 0,
           generation: int = -1, metadata: str = "") -> int:
    C = m.OffsetCommitRequest.OffsetCommitRequestTopic  # noqa: N806
    r = conn.request(8, 8, m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id="",
        topics=[C(name=topic, partitions=[C.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=1, committed_metadata=metadata)])]))
    return int(r.topics[0].partitions[0].error_code)


def list_groups(conn: RawConnection) -> list[str]:
    return sorted(g.group_id for g in conn.request(16, 4, m.ListGroupsRequest()).groups)


def test_groups_bad_input_gets_kafka_error_codes(tmp_path: Path) -> None:
    config = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as broker:
        check_bad_input(broker.bootstrap_servers)


def check_bad_input(bootstrap: str) -> None:
    create_topic(bootstrap, "topic", partitions=2)
    with RawConnection(bootstrap) as conn:
        conn.request(10, 3, m.FindCoordinatorRequest(key="ok"))
        assert commit(conn, "ok", "topic") == ErrorCode.NONE
        before = list_groups(conn)
        assert join(conn, "").error_code == ErrorCode.INVALID_GROUP_ID
        assert join(conn, "g", session=1).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert join(conn, "g", member="invented").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert conn.request(12, 4, m.HeartbeatRequest(
            group_id="nope", generation_id=1, member_id="m")).error_code == (
            ErrorCode.UNKNOWN_MEMBER_ID)
        assert conn.request(14, 5, m.SyncGroupRequest(
            group_id="nope", generation_id=1, member_id="m")).error_code == (
            ErrorCode.UNKNOWN_MEMBER_ID)
        assert commit(conn, "ok", "missing-topic") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(conn, "ok", "topic", partition=7) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(conn, "ok", "topic", metadata="x" * 5000) == (
            ErrorCode.OFFSET_METADATA_TOO_LARGE)
        assert commit(conn, "nosuch", "topic", generation=4) == ErrorCode.ILLEGAL_GENERATION
        d = conn.request(15, 5, m.DescribeGroupsRequest(groups=["nosuch"])).groups[0]
        assert (d.error_code, d.group_state) == (ErrorCode.NONE, "Dead")
        deleted = conn.request(42, 2, m.DeleteGroupsRequest(groups_names=["nosuch", ""]))
        assert [r.error_code for r in deleted.results] == [
            ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.INVALID_GROUP_ID]
        bad_type = conn.request(10, 4, m.FindCoordinatorRequest(key_type=7,
                                                                coordinator_keys=["a"]))
        assert bad_type.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
        assert list_groups(conn) == before

        # A wrong generation, then malformed and oversized protocol metadata.
        first = join(conn, "g")
        joined = join(conn, "g", member=first.member_id)
        assert joined.error_code == ErrorCode.NONE
        assert conn.request(12, 4, m.HeartbeatRequest(
            group_id="g", generation_id=joined.generation_id + 5,
            member_id=joined.member_id)).error_code == ErrorCode.ILLEGAL_GENERATION
        garbage = join(conn, "junk", metadata=b"\xff\xfe not a subscription")
        garbage = join(conn, "junk", member=garbage.member_id,
                       metadata=b"\xff\xfe not a subscription")
        assert garbage.error_code == ErrorCode.NONE
        D = m.OffsetDeleteRequest.OffsetDeleteRequestTopic  # noqa: N806
        deleted_offsets = conn.request(47, 0, m.OffsetDeleteRequest(group_id="junk", topics=[
            D(name="topic", partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]))
        assert deleted_offsets.error_code == ErrorCode.NONE
        big = join(conn, "big", metadata=b"\x00" * (2 << 20))
        big = join(conn, "big", member=big.member_id, metadata=b"\x00" * (2 << 20))
        sync = conn.request(14, 5, m.SyncGroupRequest(
            group_id="big", generation_id=big.generation_id, member_id=big.member_id,
            assignments=[m.SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=big.member_id, assignment=b"a")]))
        # The group record would exceed max.message.bytes of __consumer_offsets.
        assert sync.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        huge = "h" * 30000
        assert commit(conn, huge, "topic") == ErrorCode.NONE
        fetched = conn.request(9, 8, m.OffsetFetchRequest(groups=[
            m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=huge, topics=None)]))
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 1
        # The broker still serves everyone.
        assert conn.request(12, 4, m.HeartbeatRequest(
            group_id="g", generation_id=joined.generation_id,
            member_id=joined.member_id)).error_code == ErrorCode.NONE
