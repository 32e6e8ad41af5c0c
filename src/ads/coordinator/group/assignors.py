"""Server-side assignors of KIP-848 consumer groups: "uniform" (the default) and "range".

An assignor maps each member to partitions of the topics it subscribes to, given the
members' subscriptions (topic ids), the partition count of every subscribed topic and the
current target assignment (so that "uniform" can be sticky). Every partition of a
subscribed topic goes to exactly one member subscribed to that topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Set
from typing import Protocol

Assignment = dict[uuid.UUID, set[int]]


class Assignor(Protocol):
    name: str

    def assign(self, subscriptions: Mapping[str, Set[uuid.UUID]],
               partitions: Mapping[uuid.UUID, int],
               current: Mapping[str, Mapping[uuid.UUID, Set[int]]]) -> dict[str, Assignment]:
        ...


class UniformAssignor:
    """Spreads partitions evenly, keeping each where it is while that stays balanced.

    Members subscribed to the same topics end up at most one partition apart. Partitions
    are first left with their current owner up to its fair share (the topic's partitions
    divided among its subscribers, rounded up), then the rest go one by one to the
    subscribed member holding the fewest partitions.
    """

    name = "uniform"

    def assign(self, subscriptions: Mapping[str, Set[uuid.UUID]],
               partitions: Mapping[uuid.UUID, int],
               current: Mapping[str, Mapping[uuid.UUID, Set[int]]]) -> dict[str, Assignment]:
        result: dict[str, Assignment] = {mid: {} for mid in subscriptions}
        load = dict.fromkeys(subscriptions, 0)
        subscribers = _subscribers(subscriptions, partitions)
        total_share = _fair_totals(subscribers, partitions, subscriptions)
        unassigned: list[tuple[uuid.UUID, int]] = []
        for topic_id in sorted(partitions, key=str):
            members = subscribers.get(topic_id, [])
            if not members:
                continue
            for p in range(partitions[topic_id]):
                owner = next((mid for mid in members
                              if p in current.get(mid, {}).get(topic_id, ())), None)
                if owner is not None and load[owner] < total_share[owner]:
                    result[owner].setdefault(topic_id, set()).add(p)
                    load[owner] += 1
                else:
                    unassigned.append((topic_id, p))
        for topic_id, p in unassigned:
            members = subscribers[topic_id]
            target = min(members, key=lambda mid: (load[mid], mid))
            result[target].setdefault(topic_id, set()).add(p)
            load[target] += 1
        _even_out(result, load, subscriptions)
        return result


def _even_out(result: dict[str, Assignment], load: dict[str, int],
              subscriptions: Mapping[str, Set[uuid.UUID]]) -> None:
    """Moves partitions from the most to the least loaded members while they differ by
    more than one and a move is possible (the receiver subscribes to the topic)."""
    for _ in range(sum(load.values())):
        moved = False
        for giver in sorted(load, key=lambda mid: (-load[mid], mid)):
            for taker in sorted(load, key=lambda mid: (load[mid], mid)):
                if load[giver] - load[taker] <= 1:
                    break
                topic_id = next((t for t in sorted(result[giver], key=str)
                                 if result[giver][t] and t in subscriptions[taker]), None)
                if topic_id is None:
                    continue
                p = max(result[giver][topic_id])
                result[giver][topic_id].discard(p)
                if not result[giver][topic_id]:
                    del result[giver][topic_id]
                result[taker].setdefault(topic_id, set()).add(p)
                load[giver] -= 1
                load[taker] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            return


class RangeAssignor:
    """Per topic, consecutive ranges of partitions to the subscribers in member id order;
    the first `partitions % members` members get one more (co-partitioned topics line up).
    """

    name = "range"

    def assign(self, subscriptions: Mapping[str, Set[uuid.UUID]],
               partitions: Mapping[uuid.UUID, int],
               current: Mapping[str, Mapping[uuid.UUID, Set[int]]]) -> dict[str, Assignment]:
        result: dict[str, Assignment] = {mid: {} for mid in subscriptions}
        for topic_id, members in _subscribers(subscriptions, partitions).items():
            count = partitions[topic_id]
            per, extra = divmod(count, len(members))
            start = 0
            for i, mid in enumerate(members):
                n = per + (1 if i < extra else 0)
                if n:
                    result[mid][topic_id] = set(range(start, start + n))
                start += n
        return result


def _subscribers(subscriptions: Mapping[str, Set[uuid.UUID]],
                 partitions: Mapping[uuid.UUID, int]) -> dict[uuid.UUID, list[str]]:
    out: dict[uuid.UUID, list[str]] = {}
    for mid in sorted(subscriptions):
        for topic_id in subscriptions[mid]:
            if topic_id in partitions:
                out.setdefault(topic_id, []).append(mid)
    return out


def _fair_totals(subscribers: Mapping[uuid.UUID, list[str]], partitions: Mapping[uuid.UUID, int],
                 subscriptions: Mapping[str, Set[uuid.UUID]]) -> dict[str, int]:
    totals = dict.fromkeys(subscriptions, 0)
    for topic_id, members in subscribers.items():
        share = -(-partitions[topic_id] // len(members))
        for mid in members:
            totals[mid] += share
    return totals


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
