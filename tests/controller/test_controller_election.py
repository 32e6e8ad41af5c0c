"""The controller's election rules (controlled shutdown, preferred, unclean, automatic
rebalance) and failover skipping brokers that shut down; no ZooKeeper needed."""

from __future__ import annotations

from ads.controller.controller import decide
from ads.controller.election import (
    Refused,
    controlled_shutdown,
    imbalanced,
    preferred,
    unclean,
)
from ads.metadata.zk_layout import LeaderAndIsr
from ads.protocol.errors import ErrorCode


def test_controller_election_controlled_shutdown_moves_leader_within_the_isr() -> None:
    state = LeaderAndIsr(1, 4, [1, 2, 3], 2)
    # the next ISR member in assignment order leads, the ISR loses the broker
    assert controlled_shutdown(state, [1, 3, 2], {1, 2, 3}, {1}, 1, 5) == LeaderAndIsr(
        3, 5, [2, 3], 5)
    # a member that is gone or shutting down too is passed over
    assert controlled_shutdown(state, [1, 3, 2], {1, 2}, {1}, 1, 5) == LeaderAndIsr(
        2, 5, [2, 3], 5)
    assert controlled_shutdown(state, [1, 2, 3], {1, 2, 3}, {1, 2}, 1, 5) == LeaderAndIsr(
        3, 5, [3], 5)
    # a replica outside the ISR never takes over: the broker keeps leading
    assert controlled_shutdown(LeaderAndIsr(1, 4, [1], 2), [1, 2], {1, 2}, {1}, 1, 5) is None
    assert controlled_shutdown(state, [1, 2, 3], {1}, {1}, 1, 5) is None


def test_controller_election_controlled_shutdown_leaves_the_isrs_it_follows() -> None:
    state = LeaderAndIsr(2, 7, [2, 1, 3], 2)
    assert controlled_shutdown(state, [2, 1, 3], {1, 2, 3}, {1}, 1, 5) == LeaderAndIsr(
        2, 8, [2, 3], 5)
    assert controlled_shutdown(LeaderAndIsr(2, 7, [2], 2), [2, 1], {1, 2}, {1}, 1, 5) is None
    assert controlled_shutdown(LeaderAndIsr(-1, 7, [1], 2), [1, 2], {1, 2}, {1}, 1, 5) is None
    assert controlled_shutdown(None, [1, 2], {1, 2}, {1}, 1, 5) is None


def test_controller_election_preferred() -> None:
    moved = LeaderAndIsr(2, 3, [2, 1], 1)
    assert preferred(moved, [1, 2], {1, 2}, (), 4) == LeaderAndIsr(1, 4, [2, 1], 4)
    assert preferred(LeaderAndIsr(1, 3, [1, 2], 1), [1, 2], {1, 2}, (), 4) == Refused(
        ErrorCode.ELECTION_NOT_NEEDED)
    for live, isr, down in (({2}, [2, 1], ()), ({1, 2}, [2], ()), ({1, 2}, [2, 1], {1})):
        result = preferred(LeaderAndIsr(2, 3, isr, 1), [1, 2], live, down, 4)
        assert isinstance(result, Refused)
        assert result.code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_controller_election_unclean() -> None:
    offline = LeaderAndIsr(-1, 5, [1], 3)
    # no ISR member alive: the first live replica leads alone (its data wins)
    assert unclean(offline, [1, 2, 3], {2, 3}, (), 4) == LeaderAndIsr(2, 6, [2], 4)
    assert unclean(offline, [1, 2, 3], {2, 3}, {2}, 4) == LeaderAndIsr(3, 6, [3], 4)
    # a live ISR member is preferred over the rest
    assert unclean(LeaderAndIsr(-1, 5, [1, 3], 3), [1, 2, 3], {2, 3}, (), 4) == LeaderAndIsr(
        3, 6, [3], 4)
    assert unclean(LeaderAndIsr(1, 5, [1], 3), [1, 2], {1, 2}, (), 4) == Refused(
        ErrorCode.ELECTION_NOT_NEEDED)
    result = unclean(offline, [1], {2, 3}, (), 4)
    assert isinstance(result, Refused)
    assert result.code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_controller_election_imbalance_above_the_percentage() -> None:
    def entry(p: int, replicas: list[int], leader: int, isr: list[int]
              ) -> tuple[tuple[str, int], list[int], LeaderAndIsr]:
        return ("t", p), replicas, LeaderAndIsr(leader, 1, isr, 1)

    # broker 1 prefers 4 partitions and leads 2 (50 %); broker 2 leads all it prefers
    entries = [entry(0, [1, 2], 1, [1, 2]), entry(1, [1, 2], 1, [1, 2]),
               entry(2, [1, 2], 2, [2, 1]), entry(3, [1, 2], 2, [2]),
               entry(4, [2, 1], 2, [2, 1])]
    assert imbalanced(entries, {1, 2}, (), 10) == [("t", 2)]  # 3: broker 1 not in the ISR
    assert imbalanced(entries, {1, 2}, (), 50) == []  # not above 50 %
    assert imbalanced(entries, {1, 2}, {1}, 10) == []  # broker 1 shutting down


def test_controller_decide_gives_no_new_leadership_to_brokers_shutting_down() -> None:
    assert decide(None, [1, 2], {1, 2}, 5, {1}) == LeaderAndIsr(2, 0, [2], 5)
    assert decide(LeaderAndIsr(3, 4, [3, 1, 2], 2), [3, 1, 2], {1, 2}, 5, {1}) == LeaderAndIsr(
        2, 5, [1, 2], 5)
    # a broker shutting down keeps what it leads until its session ends
    assert decide(LeaderAndIsr(1, 4, [1], 2), [1, 2], {1, 2}, 5, {1}) is None
