"""Replica placement: leaders and followers spread evenly, racks honoured, bad manual
assignments explained."""

from __future__ import annotations

import collections

import pytest

from ads.metadata.assignment import AssignmentError, assign_replicas, check_manual_assignment
from ads.metadata.model import BrokerEndpoint


def brokers(n: int, racks: list[str] | None = None) -> list[BrokerEndpoint]:
    return [BrokerEndpoint(i + 1, "h", 9092 + i, racks[i] if racks else None) for i in range(n)]


@pytest.mark.parametrize("start", range(5))
def test_metadata_assignment_spreads_leaders_and_replicas_evenly(start: int) -> None:
    placed = assign_replicas(brokers(3), 12, 3, start=start)
    assert sorted(placed) == list(range(12))
    assert all(len(set(r)) == 3 for r in placed.values())
    leaders = collections.Counter(r[0] for r in placed.values())
    assert sorted(leaders.values()) == [4, 4, 4]
    followers = collections.Counter(b for r in placed.values() for b in r[1:])
    assert sorted(followers.values()) == [8, 8, 8]


def test_metadata_assignment_continues_after_existing_partitions() -> None:
    placed = assign_replicas(brokers(3), 3, 1, first_partition=6, start=0)
    assert sorted(placed) == [6, 7, 8]
    assert sorted(r[0] for r in placed.values()) == [1, 2, 3]


def test_metadata_assignment_puts_each_replica_on_another_rack() -> None:
    racks = ["a", "a", "b", "b", "c", "c"]
    placed = assign_replicas(brokers(6, racks), 12, 3, start=1)
    rack_of = {i + 1: r for i, r in enumerate(racks)}
    for replicas in placed.values():
        assert len({rack_of[b] for b in replicas}) == 3
    assert sorted(collections.Counter(r[0] for r in placed.values()).values()) == [2] * 6


def test_metadata_assignment_refuses_more_replicas_than_brokers() -> None:
    with pytest.raises(AssignmentError, match="only 2 broker"):
        assign_replicas(brokers(2), 1, 3)
    with pytest.raises(AssignmentError, match="larger than 0"):
        assign_replicas(brokers(2), 1, 0)


def test_metadata_assignment_checks_manual_assignments() -> None:
    live = [1, 2, 3]
    assert check_manual_assignment([[1, 2], [2, 3]], live) is None
    assert "same number" in str(check_manual_assignment([[1, 2], [3]], live))
    assert "Duplicate" in str(check_manual_assignment([[1, 1]], live))
    assert "Unknown broker(s) [7]" in str(check_manual_assignment([[1, 7]], live))
