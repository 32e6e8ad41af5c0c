"""The controller against a real ZooKeeper: controlled shutdown, ElectLeaders' elections and
the automatic leader rebalance write the states `election.py` decides. ISRs of several
members are written here as a partition leader records them once its followers catch up."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient
from test_controller_fencing import add_topic, wait

from ads.controller.controller import Controller
from ads.controller.election import PREFERRED, UNCLEAN, Refused
from ads.metadata import zk_layout as zl
from ads.metadata.model import BrokerEndpoint
from ads.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)


def register(client: KazooClient, *nodes: int) -> dict[int, int]:
    """Registers brokers; returns their broker epochs."""
    for n in nodes:
        client.create(zl.broker_path(n), zl.encode_broker(BrokerEndpoint(n, "h", n)),
                      ephemeral=True)
    return {n: client.exists(zl.broker_path(n)).czxid for n in nodes}


def state(client: KazooClient, topic: str, p: int) -> zl.LeaderAndIsr:
    return zl.decode_state(client.get(zl.state_path(topic, p))[0])


def set_isr(client: KazooClient, topic: str, p: int, leader: int, isr: list[int]) -> None:
    """As a leader records its ISR: same leader epoch, conditional on the version."""
    data, stat = client.get(zl.state_path(topic, p))
    old = zl.decode_state(data)
    client.set(zl.state_path(topic, p), zl.encode_state(
        zl.LeaderAndIsr(leader, old.leader_epoch, isr, old.controller_epoch)),
        version=stat.version)


def started(client: KazooClient, **options: object) -> Controller:
    controller = Controller(client, 1, **options)  # type: ignore[arg-type]
    controller.start()
    wait(lambda: controller.active)
    return controller


def test_controller_controlled_shutdown_moves_leaders_and_leaves_isrs(zk: KazooClient) -> None:
    epochs = register(zk, 1, 2, 3)
    controller = started(zk)
    try:
        add_topic(zk, "t", {0: [1, 2, 3], 1: [2, 1, 3], 2: [1], 3: [3, 2]})
        wait(lambda: all(zk.exists(zl.state_path("t", p)) for p in range(4)))
        set_isr(zk, "t", 0, 1, [1, 2, 3])
        set_isr(zk, "t", 1, 2, [2, 1, 3])
        before = {p: state(zk, "t", p) for p in range(4)}

        code, remaining = controller.controlled_shutdown(1, epochs[1]).result(30)
        assert (code, remaining) == (ErrorCode.NONE, [])
        after = {p: state(zk, "t", p) for p in range(4)}
        assert (after[0].leader, after[0].isr) == (2, [2, 3])  # next ISR member leads
        assert (after[1].leader, after[1].isr) == (2, [2, 3])  # it left the ISR it followed
        assert after[0].leader_epoch == before[0].leader_epoch + 1
        assert after[1].leader_epoch == before[1].leader_epoch + 1
        assert after[2] == before[2]  # one replica: stays, and is not reported
        assert after[3] == before[3]
        assert controller.shutting_down == {1}
        # Partition 0 got a new leader; partition 1 only a smaller ISR.
        assert (controller.leader_elections, controller.unclean_leader_elections) == (1, 0)

        # A new partition is not given to the broker shutting down.
        add_topic(zk, "u", {0: [1, 2]})
        wait(lambda: zk.exists(zl.state_path("u", 0)) is not None)
        assert state(zk, "u", 0).leader == 2
    finally:
        controller.stop()


def test_controller_controlled_shutdown_reports_what_cannot_move(zk: KazooClient) -> None:
    epochs = register(zk, 1, 2)
    controller = started(zk)
    try:
        add_topic(zk, "t", {0: [1, 2]})
        wait(lambda: zk.exists(zl.state_path("t", 0)) is not None)
        assert state(zk, "t", 0).isr == [1, 2]  # a new partition's ISR: every live replica
        # 2 fell out of the ISR: the leader alone has the partition's records
        _, stat = zk.get(zl.state_path("t", 0))
        zk.set(zl.state_path("t", 0), zl.encode_state(zl.LeaderAndIsr(1, 1, [1], 1)),
               version=stat.version)
        assert controller.controlled_shutdown(1, epochs[1]).result(30) == (
            ErrorCode.NONE, [("t", 0)])
        assert state(zk, "t", 0).leader == 1
        assert controller.controlled_shutdown(1, epochs[1] - 1).result(30) == (
            ErrorCode.STALE_BROKER_EPOCH, [])
        assert controller.controlled_shutdown(7, -1).result(30) == (
            ErrorCode.BROKER_NOT_AVAILABLE, [])
    finally:
        controller.stop()
    stopped = Controller(zk, 2)  # never started: not the controller
    assert stopped._controlled_shutdown(1, -1) == (ErrorCode.NOT_CONTROLLER, [])


def test_controller_elect_leaders_preferred_and_unclean(zk: KazooClient) -> None:
    register(zk, 1, 2, 3)
    controller = started(zk)
    try:
        add_topic(zk, "t", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
        wait(lambda: all(zk.exists(zl.state_path("t", p)) for p in range(3)))
        # partition 0 led by 2 with 1 back in the ISR, as after a failover and catch-up
        data, stat = zk.get(zl.state_path("t", 0))
        zk.set(zl.state_path("t", 0), zl.encode_state(zl.LeaderAndIsr(2, 3, [2, 1], 1)),
               version=stat.version)
        # partition 2 offline: its only ISR member, 4, is gone
        data, stat = zk.get(zl.state_path("t", 2))
        zk.set(zl.state_path("t", 2), zl.encode_state(zl.LeaderAndIsr(-1, 5, [4], 1)),
               version=stat.version)

        # A new partition's first leader is not an election (as in Kafka).
        assert (controller.leader_elections, controller.unclean_leader_elections) == (0, 0)
        results = controller.elect_leaders(PREFERRED, [("t", 0), ("t", 1), ("t", 2),
                                                       ("t", 9), ("nope", 0)]).result(30)
        assert results[("t", 0)] == zl.LeaderAndIsr(1, 4, [2, 1], controller.epoch)
        assert (controller.leader_elections, controller.unclean_leader_elections) == (1, 0)
        assert state(zk, "t", 0) == results[("t", 0)]
        assert results[("t", 1)] == Refused(ErrorCode.ELECTION_NOT_NEEDED)
        assert isinstance(results[("t", 2)], Refused)
        assert results[("t", 2)].code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        for missing in (("t", 9), ("nope", 0)):
            assert results[missing].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[union-attr]

        results = controller.elect_leaders(UNCLEAN, [("t", 1), ("t", 2)]).result(30)
        assert results[("t", 1)] == Refused(ErrorCode.ELECTION_NOT_NEEDED)
        assert results[("t", 2)] == zl.LeaderAndIsr(3, 6, [3], controller.epoch)
        assert state(zk, "t", 2).leader == 3
        assert (controller.leader_elections, controller.unclean_leader_elections) == (2, 1)
    finally:
        controller.stop()


def test_controller_rebalances_leaders_back_to_preferred_replicas(zk: KazooClient) -> None:
    register(zk, 1, 2)
    controller = started(zk, auto_rebalance=True, imbalance_check_interval_s=1.0,
                         imbalance_percentage=10)
    try:
        add_topic(zk, "t", {0: [1, 2], 1: [2, 1]})
        wait(lambda: all(zk.exists(zl.state_path("t", p)) for p in range(2)))
        data, stat = zk.get(zl.state_path("t", 0))
        zk.set(zl.state_path("t", 0), zl.encode_state(zl.LeaderAndIsr(2, 3, [2, 1], 1)),
               version=stat.version)
        wait(lambda: state(zk, "t", 0).leader == 1, timeout_s=20)
        assert state(zk, "t", 0).leader_epoch == 4
        time.sleep(1.5)  # balanced now: the next checks change nothing
        assert state(zk, "t", 0).leader_epoch == 4
        assert state(zk, "t", 1).leader == 2
    finally:
        controller.stop()
