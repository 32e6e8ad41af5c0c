"""Coordinator deadlines are met exactly: the broker's one event-loop timer is armed at the
earliest deadline instead of polling, so a member whose session ends at T is gone at T, and
a client that waits the session timeout and then deletes the group succeeds (classic groups
and KIP-848 groups alike). Exactness is checked where the timer is armed; the client's
round adds a margin for a loaded machine's scheduling, not for a tick."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient

from ads.broker.coordinators import DeadlineTimer
from ads.coordinator.group.classic import ClassicGroup
from ads.coordinator.group.consumer import ConsumerGroup
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

SESSION_MS = 300
CONFIG = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
          "group.min.session.timeout.ms": "100",
          "group.consumer.session.timeout.ms": str(SESSION_MS)}
SUBSCRIPTION = b"\x00\x01" + m.ConsumerProtocolSubscription(topics=["t"]).encode(1)
# How long after the session's end the client deletes the group: what a loaded machine may
# delay the broker's event loop by (a 15 ms margin failed under load). That the removal is
# not left to a polling tick is `test_groups_deadlines_loop_timer_armed_at_the_earliest`'s.
MARGIN_S = 0.25
ROUNDS = 4


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=CONFIG) as b:
        create_topic(b.bootstrap_servers, "t")
        yield b


def classic_member(conn: RawConnection, group: str) -> str:
    """Joins, syncs and heartbeats once; returns the member id. The session runs from the
    heartbeat, answered before this returns."""
    join = m.JoinGroupRequest(
        group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
        member_id="", protocol_type="consumer", protocols=[
            m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])
    join.member_id = conn.request(11, 5, join).member_id
    joined = conn.request(11, 5, join)
    assert joined.error_code == ErrorCode.NONE
    member = joined.member_id
    synced = conn.request(14, 3, m.SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=member,
        assignments=[m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=member,
                                                                   assignment=b"")]))
    assert synced.error_code == ErrorCode.NONE
    beat = conn.request(12, 3, m.HeartbeatRequest(
        group_id=group, generation_id=joined.generation_id, member_id=member))
    assert beat.error_code == ErrorCode.NONE
    return member


def consumer_member(conn: RawConnection, group: str) -> str:
    """A KIP-848 member: one ConsumerGroupHeartbeat (its session runs from it)."""
    r = conn.request(68, 0, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_epoch=0, rebalance_timeout_ms=SESSION_MS,
        subscribed_topic_names=["t"], topic_partitions=[]))
    assert r.error_code == ErrorCode.NONE, r
    return str(r.member_id)


def delete_after_session(broker: EmbeddedBroker, join: Callable[[RawConnection, str], str]
                         ) -> None:
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.list_topics(timeout=10)  # connected before the timed part
    with RawConnection(bs) as conn:
        conn.request(10, 3, m.FindCoordinatorRequest(key="warm-up", key_type=0))
        for _ in range(ROUNDS):
            group = f"g-{uuid.uuid4()}"
            join(conn, group)
            session_end = time.monotonic() + SESSION_MS / 1000
            time.sleep(session_end + MARGIN_S - time.monotonic())
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=10)


def test_groups_deadlines_classic_member_gone_at_session_end(broker: EmbeddedBroker) -> None:
    delete_after_session(broker, classic_member)


def test_groups_deadlines_consumer_member_gone_at_session_end(broker: EmbeddedBroker) -> None:
    delete_after_session(broker, consumer_member)


def test_groups_deadlines_loop_timer_armed_at_the_earliest(broker: EmbeddedBroker) -> None:
    assert broker.broker is not None
    deadlines = broker.broker.coordinator_deadlines
    assert isinstance(deadlines, DeadlineTimer)
    coordinator = broker.broker.group_coordinator
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.request(10, 3, m.FindCoordinatorRequest(key="a", key_type=0))
        member = classic_member(conn, "a")
        group = broker.call(lambda: coordinator.groups["a"])
        assert isinstance(group, ClassicGroup)
        timer = group.members[member].heartbeat_timer
        assert timer is not None
        # Armed no later than the session's end (maybe at a deadline since cancelled: it
        # then fires, finds nothing due and arms at the next).
        assert broker.call(coordinator.next_deadline_ms) == timer.deadline_ms
        armed = broker.call(lambda: deadlines.armed_ms)
        assert armed is not None and timer.deadline_ms - SESSION_MS < armed <= timer.deadline_ms
        consumer = consumer_member(conn, "b")
        cgroup = broker.call(lambda: coordinator.groups["b"])
        assert isinstance(cgroup, ConsumerGroup)
        session = cgroup.members[consumer].session_timer
        assert session is not None
        assert broker.call(coordinator.next_deadline_ms) == min(timer.deadline_ms,
                                                                session.deadline_ms)
        armed = broker.call(lambda: deadlines.armed_ms)
        assert armed is not None and armed <= min(timer.deadline_ms, session.deadline_ms)
