"""The controller's rule for a partition's next state (no ZooKeeper needed)."""

from __future__ import annotations

from ads.controller.controller import decide
from ads.metadata.zk_layout import LeaderAndIsr


def test_controller_decide_new_partition_led_by_first_live_replica() -> None:
    assert decide(None, [2, 3], {1, 2, 3}, 5) == LeaderAndIsr(2, 0, [2, 3], 5)
    assert decide(None, [2, 3], {1, 3}, 5) == LeaderAndIsr(3, 0, [3], 5)
    assert decide(None, [2], {1, 3}, 5) is None  # made when broker 2 registers


def test_controller_decide_moves_leadership_within_the_isr() -> None:
    state = LeaderAndIsr(1, 4, [1, 2, 3], 2)
    assert decide(state, [1, 2, 3], {2, 3}, 3) == LeaderAndIsr(2, 5, [2, 3], 3)
    # a replica outside the ISR never leads (no unclean election)
    assert decide(LeaderAndIsr(1, 4, [1], 2), [1, 2], {2}, 3) == LeaderAndIsr(-1, 5, [1], 3)


def test_controller_decide_offline_partition_returns_with_its_isr() -> None:
    offline = LeaderAndIsr(-1, 5, [1], 3)
    assert decide(offline, [1], {2, 3}, 3) is None
    assert decide(offline, [1], {1, 2}, 4) == LeaderAndIsr(1, 6, [1], 4)


def test_controller_decide_shrinks_the_isr_of_a_live_leader() -> None:
    state = LeaderAndIsr(1, 2, [1, 2, 3], 1)
    assert decide(state, [1, 2, 3], {1, 2, 3}, 1) is None
    assert decide(state, [1, 2, 3], {1, 3}, 1) == LeaderAndIsr(1, 3, [1, 3], 1)


def test_controller_decide_unclean_election_only_when_enabled() -> None:
    lost_isr = LeaderAndIsr(1, 4, [1], 2)
    # off (the default): offline, waiting for the ISR member
    assert decide(lost_isr, [1, 2, 3], {2, 3}, 3) == LeaderAndIsr(-1, 5, [1], 3)
    # on: the first live replica leads, alone in its ISR
    assert decide(lost_isr, [1, 2, 3], {2, 3}, 3, unclean=lambda: True) == LeaderAndIsr(
        2, 5, [2], 3)
    offline = LeaderAndIsr(-1, 5, [1], 3)
    assert decide(offline, [1, 2, 3], {3}, 3, unclean=lambda: True) == LeaderAndIsr(
        3, 6, [3], 3)
    # an ISR member alive wins over unclean election
    calls: list[int] = []
    assert decide(LeaderAndIsr(1, 4, [1, 3], 2), [1, 2, 3], {2, 3}, 3,
                  unclean=lambda: calls.append(1) or True) == LeaderAndIsr(3, 5, [3], 3)
    assert calls == []
