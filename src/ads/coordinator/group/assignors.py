"""Server-side assignors of KIP-848 consumer groups, "uniform" (the default) and "range",
and of KIP-932 share groups, "simple".

An assignor maps each member to partitions of the topics it subscribes to, given the
members' subscriptions (topic ids), the partition count of every subscribed topic and the
current target assignment (so that "uniform" and "simple" can be sticky). In a consumer
group every partition of a subscribed topic goes to exactly one member subscribed to that
topic; in a share group a partition may go to several members (they share its records).
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


class SimpleAssignor:
    """The share groups' assignor: partitions spread evenly over the members, each given
    to as few members as cover them all, kept where they are while that stays balanced.

    With M members and P partitions to spread, each partition goes to S = ceil(M / P)
    members (one while there are no more members than partitions), and the S * P
    assignments are dealt out so that two members' counts differ by at most one: two
    members of a four-partition topic get two partitions each, three members of a
    one-partition topic all share it. Balance comes first, then stickiness: a member keeps
    what it had up to its count, and what no longer fits is dealt again, round-robin over
    the members still short. When every member subscribes to the same topics, their
    partitions are spread together; otherwise each topic's partitions are spread over its
    own subscribers (the rule of Kafka's SimpleAssignor).
    """

    name = "simple"

    def assign(self, subscriptions: Mapping[str, Set[uuid.UUID]],
               partitions: Mapping[uuid.UUID, int],
               current: Mapping[str, Mapping[uuid.UUID, Set[int]]]) -> dict[str, Assignment]:
        result: dict[str, Assignment] = {mid: {} for mid in subscriptions}
        topic_sets = {frozenset(t for t in topics if t in partitions)
                      for topics in subscriptions.values()}
        if len(topic_sets) == 1:
            groups = [(list(subscriptions), sorted(next(iter(topic_sets)), key=str))]
        else:
            subscribers = _subscribers(subscriptions, partitions)
            groups = [([mid for mid in subscriptions if mid in subscribers[t]], [t])
                      for t in sorted(subscribers, key=str)]
        for members, topics in groups:
            targets = [(t, p) for t in topics for p in range(partitions[t])]
            held = {mid: {(t, p) for t, ps in current.get(mid, {}).items() if t in topics
                          for p in ps} for mid in members}
            for mid, owned in _share_out(members, targets, held).items():
                for t, p in owned:
                    result[mid].setdefault(t, set()).add(p)
        return result


def _share_out(members: list[str], targets: list[tuple[uuid.UUID, int]],
               held: Mapping[str, Set[tuple[uuid.UUID, int]]]
               ) -> dict[str, set[tuple[uuid.UUID, int]]]:
    """`targets` given to `members` as `SimpleAssignor` says, sticking to `held`."""
    out: dict[str, set[tuple[uuid.UUID, int]]] = {mid: set() for mid in members}
    if not members or not targets:
        return out
    sharing = -(-len(members) // len(targets))
    slots = sharing * len(targets)
    # Member i's count: its part of the slots, dealt so that counts differ by one at most.
    want = {mid: -(-slots * (i + 1) // len(members)) - -(-slots * i // len(members))
            for i, mid in enumerate(members)}
    holders: dict[tuple[uuid.UUID, int], int] = dict.fromkeys(targets, 0)
    for mid in members:
        for tp in sorted(held.get(mid, ()) & holders.keys(), key=lambda x: (str(x[0]), x[1])):
            if len(out[mid]) < want[mid] and holders[tp] < sharing:
                out[mid].add(tp)
                holders[tp] += 1
    short = [mid for mid in members if len(out[mid]) < want[mid]]
    turn = 0
    for tp in targets:
        tried = 0
        while holders[tp] < sharing and short and tried < len(short):
            mid = short[turn % len(short)]
            if tp in out[mid]:
                turn += 1
                tried += 1
                continue
            out[mid].add(tp)
            holders[tp] += 1
            tried = 0
            if len(out[mid]) >= want[mid]:
                short.remove(mid)
            else:
                turn += 1
    return out


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
