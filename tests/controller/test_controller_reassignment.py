"""Reassignment rules (no ZooKeeper), then the controller on a real ZooKeeper: a
reassignment waits for its target replicas to be in the ISR, completes when they are (the
ISR is written here as a partition leader records it once followers catch up), and can be
cancelled."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from test_controller_elections_zk import register, set_isr, started, state
from test_controller_fencing import add_topic, wait

from ads.controller.election import Refused
from ads.controller.reassignment import ReplicaAssignment, can_complete, check_target, fit
from ads.metadata import zk_layout as zl
from ads.metadata.zk_layout import LeaderAndIsr
from ads.protocol.errors import ErrorCode

BAD = ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_controller_reassignment_full_set_adding_and_removing() -> None:
    current = ReplicaAssignment([1, 2], [], [])
    moving = current.reassign_to([3, 2])
    assert moving == ReplicaAssignment([3, 2, 1], [3], [1])
    assert (moving.origin, moving.target, moving.reassigning) == ([2, 1], [3, 2], True)
    # a new target replaces the one in progress, from the same origin
    assert moving.reassign_to([4]) == ReplicaAssignment([4, 2, 1], [4], [2, 1])
    assert moving.reassign_to(moving.origin) == ReplicaAssignment([2, 1], [], [])
    assert current.reassign_to([2, 1]) == ReplicaAssignment([2, 1], [], [])  # a reorder


def test_controller_reassignment_checks_targets_as_kafka() -> None:
    current = ReplicaAssignment([1, 2], [], [])
    for target in ([], [1, 1], [-1], [1, 7]):
        refused = check_target(target, current, {1, 2, 3})
        assert isinstance(refused, Refused) and refused.code == BAD, target
    assert check_target([2, 3], current, {1, 2, 3}) is None
    assert check_target([2], current, {2}) is None  # dropping a dead replica is fine


def test_controller_reassignment_completes_once_the_target_is_in_the_isr() -> None:
    moving = ReplicaAssignment([3, 2, 1], [3], [1])
    assert not can_complete(LeaderAndIsr(1, 4, [1, 2], 1), moving, {1, 2, 3}, ())
    assert can_complete(LeaderAndIsr(1, 4, [1, 2, 3], 1), moving, {1, 2, 3}, ())
    # the leader leaves: the first target replica live and in the ISR leads
    assert fit(LeaderAndIsr(1, 4, [1, 2, 3], 1), moving.target, {1, 2, 3}, (), 6) == (
        LeaderAndIsr(3, 5, [2, 3], 6))
    assert fit(LeaderAndIsr(2, 4, [1, 2, 3], 1), moving.target, {1, 2, 3}, (), 6) == (
        LeaderAndIsr(2, 5, [2, 3], 6))
    assert fit(LeaderAndIsr(2, 4, [2, 3], 1), moving.target, {1, 2, 3}, (), 6) is None
    # Completing while replicas leave moves the epoch even when the ISR is the target's:
    # an ISR change the leader makes under epoch 4 (adding the leaving replica, which may
    # still fetch) is refused then.
    assert fit(LeaderAndIsr(2, 4, [2, 3], 1), moving.target, {1, 2, 3}, (), 6,
               bump=True) == LeaderAndIsr(2, 5, [2, 3], 6)


@pytest.mark.timeout(120)
def test_controller_reassignment_on_zookeeper(zk: KazooClient) -> None:
    register(zk, 1, 2, 3)
    controller = started(zk)

    def assignment() -> zl.TopicAssignment:
        return zl.decode_assignment(zk.get(zl.topic_path("t"))[0])

    try:
        add_topic(zk, "t", {0: [1], 1: [2, 1], 2: [3]})
        wait(lambda: all(zk.exists(zl.state_path("t", p)) for p in range(3)))
        results = controller.alter_reassignments({
            ("t", 0): [2], ("t", 1): [2], ("t", 2): [3, 3], ("t", 7): [1],
            ("gone", 0): [1]}).result(30)
        assert results is not None
        assert results[("t", 0)] is None and results[("t", 1)] is None
        assert results[("t", 2)].code == BAD  # type: ignore[union-attr]
        for missing in (("t", 7), ("gone", 0)):
            assert results[missing].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[union-attr]

        # Dropping a replica needs no catch-up: complete at once.
        assert assignment().replicas[1] == [2]
        assert state(zk, "t", 1).isr == [2]
        # Moving partition 0 to broker 2 waits for 2 to be in the ISR.
        a = assignment()
        assert (a.replicas[0], a.adding[0], a.removing[0]) == ([2, 1], [2], [1])
        assert controller.list_reassignments(None).result(30) == {
            ("t", 0): ReplicaAssignment([2, 1], [2], [1])}
        assert state(zk, "t", 0).leader == 1
        set_isr(zk, "t", 0, 1, [1, 2])  # broker 2 caught up
        wait(lambda: assignment().replicas[0] == [2] and 0 not in assignment().adding)
        assert (state(zk, "t", 0).leader, state(zk, "t", 0).isr) == (2, [2])
        assert controller.list_reassignments([("t", 0)]).result(30) == {}

        # Broker 3 leaves partition 2's replicas ([3, 1] to [1]) whose ISR is already
        # [1]: complete at once, and the leader epoch moves all the same, so that the
        # leader's ISR change made under the old epoch (3 fetched meanwhile) is refused.
        add_topic(zk, "u", {0: [1, 3]})
        wait(lambda: zk.exists(zl.state_path("u", 0)) is not None)
        set_isr(zk, "u", 0, 1, [1])
        before = state(zk, "u", 0).leader_epoch
        assert controller.alter_reassignments({("u", 0): [1]}).result(30) == {("u", 0): None}
        wait(lambda: zl.decode_assignment(zk.get(zl.topic_path("u"))[0]).replicas[0] == [1])
        assert (state(zk, "u", 0).isr, state(zk, "u", 0).leader_epoch) == ([1], before + 1)

        # Cancelling puts the origin back; nothing to cancel is an error.
        assert controller.alter_reassignments({("t", 2): [1]}).result(30) == {("t", 2): None}
        assert assignment().adding == {2: [1]}
        assert controller.alter_reassignments({("t", 2): None}).result(30) == {("t", 2): None}
        assert (assignment().replicas[2], assignment().adding) == ([3], {})
        results = controller.alter_reassignments({("t", 2): None}).result(30)
        assert results == {("t", 2): Refused(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)}
    finally:
        controller.stop()
