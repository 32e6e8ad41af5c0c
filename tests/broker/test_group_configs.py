"""Group configs (KIP-848, KIP-932) set with the AdminClient change what one group's members
run with: the heartbeat interval its members are given and the session after which a silent
member is removed, for consumer-protocol and share groups, and a share group's delivery
limit, starting offset and isolation level, while other groups keep the broker's.
(Describe and alter answers are compared with Apache Kafka's in
tests/reference/test_reference_topics.py.)"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

SETTINGS = {"group.share.enable": "true",
            # Lower bounds, so a group may set a session short enough for a test.
            "group.consumer.min.session.timeout.ms": "1000",
            "group.share.min.session.timeout.ms": "1000",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.share.min.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def configured() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=SETTINGS) as b:
        create_topic(b.bootstrap_servers, "t", 2)
        with RawConnection(b.bootstrap_servers) as conn:  # makes __consumer_offsets
            found = conn.request(10, 3, m.FindCoordinatorRequest(key="any", key_type=0))
            assert found.error_code == ErrorCode.NONE
        yield b


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(15)


def consumer_join(conn: RawConnection, group: str) -> m.ConsumerGroupHeartbeatResponse:
    return conn.request(68, 0, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=["t"], topic_partitions=[]))


def share_join(conn: RawConnection, group: str, member: str) -> m.ShareGroupHeartbeatResponse:
    return conn.request(76, 1, m.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rack_id=None,
        subscribed_topic_names=["t"]))


def consumer_members(conn: RawConnection, group: str) -> int:
    r = conn.request(69, 0, m.ConsumerGroupDescribeRequest(group_ids=[group],
                                                          include_authorized_operations=False))
    return len(r.groups[0].members)


def share_members(conn: RawConnection, group: str) -> int:
    r = conn.request(77, 1, m.ShareGroupDescribeRequest(group_ids=[group],
                                                       include_authorized_operations=False))
    return len(r.groups[0].members)


def test_group_configs_set_heartbeat_intervals_per_group(configured: EmbeddedBroker) -> None:
    bs = configured.bootstrap_servers
    set_group_configs(bs, "tuned", consumer_heartbeat_interval_ms="7000",
                      share_heartbeat_interval_ms="9000")
    with RawConnection(bs) as conn:
        tuned, plain = consumer_join(conn, "tuned"), consumer_join(conn, "plain")
        assert (tuned.error_code, tuned.heartbeat_interval_ms) == (ErrorCode.NONE, 7000)
        assert (plain.error_code, plain.heartbeat_interval_ms) == (ErrorCode.NONE, 5000)
        shared = share_join(conn, "tuned-share", "m1" * 11)
        assert (shared.error_code, shared.heartbeat_interval_ms) == (ErrorCode.NONE, 5000)
    # Share and consumer keys are the group's own: set on the share group, they count.
    set_group_configs(bs, "tuned-share", share_heartbeat_interval_ms="9000")
    with RawConnection(bs) as conn:
        again = share_join(conn, "tuned-share", "m2" * 11)
        assert (again.error_code, again.heartbeat_interval_ms) == (ErrorCode.NONE, 9000)


def test_group_configs_lock_duration_is_what_share_fetch_tells_the_member(
        configured: EmbeddedBroker) -> None:
    bs = configured.bootstrap_servers
    set_group_configs(bs, "locked", share_record_lock_duration_ms="20000")
    Q = m.ShareFetchRequest  # noqa: N806
    with RawConnection(bs) as conn:
        answers = {group: conn.request(78, 1, Q(
            group_id=group, member_id="lock-member-0000000000", share_session_epoch=0,
            max_wait_ms=0, min_bytes=1, max_records=10, batch_size=10, topics=[]))
            for group in ("locked", "unlocked")}
    assert {g: (a.error_code, a.acquisition_lock_timeout_ms) for g, a in answers.items()} == {
        "locked": (ErrorCode.NONE, 20000), "unlocked": (ErrorCode.NONE, 30000)}


def test_group_configs_session_timeout_removes_a_silent_member(
        configured: EmbeddedBroker) -> None:
    bs = configured.bootstrap_servers
    set_group_configs(bs, "brief", consumer_session_timeout_ms="1500",
                      consumer_heartbeat_interval_ms="500")
    set_group_configs(bs, "brief-share", share_session_timeout_ms="1500",
                      share_heartbeat_interval_ms="500")
    with RawConnection(bs) as conn:
        for group in ("brief", "lasting"):
            assert consumer_join(conn, group).error_code == ErrorCode.NONE
        assert share_join(conn, "brief-share", "s1" * 11).error_code == ErrorCode.NONE
        assert consumer_members(conn, "brief") == 1 and share_members(conn, "brief-share") == 1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (consumer_members(conn, "brief")
                                               or share_members(conn, "brief-share")):
            time.sleep(0.1)
        # Removed after their own 1.5 s session; the other group keeps the broker's 45 s.
        assert consumer_members(conn, "brief") == 0
        assert share_members(conn, "brief-share") == 0
        assert consumer_members(conn, "lasting") == 1


def share_read(bs: str, group: str, topic: str, want: int, quiet_s: float = 1.5
               ) -> list[bytes]:
    """Values a share consumer of `group` gets: until `want` came, then `quiet_s` more
    (nothing else may come); accepted as they come."""
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < want:
            got += [msg.value() for msg in c.poll(0.3) if msg.error() is None]
        quiet = time.monotonic() + quiet_s
        while time.monotonic() < quiet:
            got += [msg.value() for msg in c.poll(0.3) if msg.error() is None]
        c.commit_sync(10)
    finally:
        c.close()
    return got


def test_group_configs_read_committed_share_group_skips_aborted_and_open(
        configured: EmbeddedBroker) -> None:
    bs = configured.bootstrap_servers
    create_topic(bs, "txn-share", 1)
    producer = Producer({"bootstrap.servers": bs, "transactional.id": "share-txn"})
    producer.init_transactions(15)
    for outcome, prefix in (("commit", b"c"), ("abort", b"a"), ("commit", b"d")):
        producer.begin_transaction()
        for i in range(5):
            producer.produce("txn-share", prefix + b"%d" % i, partition=0)
        assert producer.flush(10) == 0  # in the log before the abort, for it to be skipped
        getattr(producer, f"{outcome}_transaction")(15)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("txn-share", b"plain", partition=0)
    assert plain.flush(10) == 0
    producer.begin_transaction()  # left open: past the last stable offset
    producer.produce("txn-share", b"open", partition=0)
    assert producer.flush(10) == 0
    for group, isolation in (("committed", "read_committed"), ("uncommitted", None)):
        set_group_configs(bs, group, share_auto_offset_reset="earliest",
                          **({"share_isolation_level": isolation} if isolation else {}))
    committed = [*(b"c%d" % i for i in range(5)), *(b"d%d" % i for i in range(5))]
    aborted = [b"a%d" % i for i in range(5)]
    # Up to the last stable offset, without the aborted records and the markers.
    assert sorted(share_read(bs, "committed", "txn-share", 11)) == sorted(
        [*committed, b"plain"])
    assert sorted(share_read(bs, "uncommitted", "txn-share", 17)) == sorted(
        [*committed, *aborted, b"plain", b"open"])
    producer.commit_transaction(15)
    # Once committed, the rest comes; the aborted records never do.
    assert share_read(bs, "committed", "txn-share", 1) == [b"open"]


def test_group_configs_share_delivery_limit_and_start_per_group(
        configured: EmbeddedBroker) -> None:
    # The broker starts share groups at the latest offset and archives a record after five
    # deliveries; this group starts at the earliest and archives after two.
    bs = configured.bootstrap_servers
    create_topic(bs, "limited", 1)
    producer = Producer({"bootstrap.servers": bs})
    producer.produce("limited", b"again", partition=0)
    assert producer.flush(10) == 0
    set_group_configs(bs, "limited", share_auto_offset_reset="earliest",
                      share_delivery_count_limit="2")
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": "limited",
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe(["limited"])
    counts: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(counts) < 2:
            for msg in c.poll(0.3):
                assert msg.error() is None, msg.error()
                counts.append(msg.delivery_count())
                c.acknowledge(msg, AcknowledgeType.RELEASE)
            c.commit_sync(10)
        later = [msg.offset() for msg in c.poll(1.5)]
    finally:
        c.close()
    assert counts == [1, 2] and later == []  # archived at the group's limit
