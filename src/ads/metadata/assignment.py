"""Replica placement for new topics and partitions, the way Kafka spreads them.

Every broker leads (is the first replica of) the same number of partitions, give or take
one, and the followers of one broker's partitions are spread over all the others: partition
`p`'s first replica is broker `(p + start) mod n`, and the later replicas follow it at a
shift that grows by one every `n` partitions. With a rack on every broker, the broker list is
first interleaved by rack and a replica goes to a rack that has none of the partition's
replicas yet while there is one, so losing a rack loses at most one replica of each
partition when there are at least as many racks as replicas. Brokers without a rack among
brokers with one: the racks are ignored (Kafka's "safe" mode).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ads.metadata.model import BrokerEndpoint


class AssignmentError(ValueError):
    """The placement cannot be made (maps to INVALID_REPLICATION_FACTOR)."""


def assign_replicas(brokers: Sequence[BrokerEndpoint], num_partitions: int,
                    replication_factor: int, first_partition: int = 0,
                    start: int | None = None) -> dict[int, list[int]]:
    """Replica lists for partitions `first_partition ..` (preferred leader first).

    `start` fixes the otherwise random starting broker and shift (tests)."""
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered.")
    racks = {b.node_id: b.rack for b in brokers}
    if all(racks.values()):
        ordered = _rack_alternated(brokers)
    else:
        ordered = sorted(b.node_id for b in brokers)
    n = len(ordered)
    first_index = random.randrange(n) if start is None else start % n  # noqa: S311
    shift = random.randrange(n) if start is None else start % n  # noqa: S311
    rack_count = len(set(racks.values())) if all(racks.values()) else 0
    result: dict[int, list[int]] = {}
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + first_index) % n
        if rack_count:
            result[p] = _rack_aware_replicas(ordered, racks, rack_count, first, shift,
                                             replication_factor)
        else:
            result[p] = [ordered[first]] + [ordered[_follower(first, shift, j, n)]
                                            for j in range(replication_factor - 1)]
    return result


def _follower(first: int, shift: int, j: int, n: int) -> int:
    """Index of the j-th follower: never the leader, distinct for distinct j < n - 1."""
    if n == 1:
        return first
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_alternated(brokers: Sequence[BrokerEndpoint]) -> list[int]:
    """Broker ids taking one broker of each rack in turn: r1b1, r2b1, r3b1, r1b2, ..."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.node_id):
        by_rack.setdefault(str(b.rack), []).append(b.node_id)
    queues = [by_rack[r] for r in sorted(by_rack)]
    ordered: list[int] = []
    depth = 0
    while len(ordered) < len(brokers):
        ordered.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return ordered


def _rack_aware_replicas(ordered: list[int], racks: dict[int, str | None], rack_count: int,
                         first: int, shift: int, rf: int) -> list[int]:
    n = len(ordered)
    leader = ordered[first]
    chosen = [leader]
    used_racks = {racks[leader]}
    k = 0
    while len(chosen) < rf:
        candidate = ordered[_follower(first, shift * rack_count, k, n)]
        k += 1
        rack_ok = racks[candidate] not in used_racks or len(used_racks) == rack_count
        if rack_ok and candidate not in chosen:
            chosen.append(candidate)
            used_racks.add(racks[candidate])
        elif k > 4 * n * rf:  # every rack used and no broker left: cannot happen for rf <= n
            raise AssignmentError("cannot place replicas")
    return chosen


def check_manual_assignment(assignment: Sequence[Sequence[int]],
                            live: Sequence[int]) -> str | None:
    """Why a CreateTopics / CreatePartitions assignment is refused, or None when it is
    valid: every partition the same replica count, no broker twice, only live brokers."""
    sizes = {len(r) for r in assignment}
    if len(sizes) > 1:
        return "All partitions should have the same number of replicas"
    for replicas in assignment:
        if not replicas:
            return "Replica list should not be empty"
        if len(set(replicas)) != len(replicas):
            return f"Duplicate brokers not allowed in replica assignment: {list(replicas)}"
        unknown = sorted(set(replicas) - set(live))
        if unknown:
            return f"Unknown broker(s) {unknown} in replica assignment {list(replicas)}"
    return None
