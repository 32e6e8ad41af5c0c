"""The controller's elections other than failover: controlled shutdown, preferred and
unclean elections asked for by ElectLeaders, and the automatic leader rebalance.

Pure rules over one partition's state (`LeaderAndIsr`), its replicas in assignment order
(the first is the preferred leader), the live brokers and the brokers shutting down; the
controller (`controller.py`) reads the state, applies a rule and writes the result with its
fenced, conditional write. Every change of leader or ISR raises the leader epoch by one, as
in Kafka's ZooKeeper mode.

    rule                  new leader                               ISR            when none
    --------------------  ---------------------------------------  -------------  -----------
    controlled shutdown   first replica in the ISR, live, not       ISR minus the  stays; the
    (broker B leads)      shutting down                             shutting down  broker is
                                                                                   told it
                                                                                   remains
    controlled shutdown   the leader stays                          ISR minus B    -
    (B follows, in ISR)
    preferred             the first replica, if live, not shutting  unchanged      PREFERRED_
                          down and in the ISR                                      LEADER_NOT_
                                                                                   AVAILABLE
    unclean               first live ISR member not shutting down,  live ISR, or   ELIGIBLE_
                          else the first live replica (data written  [leader]       LEADERS_NOT_
                          only to the old ISR may be lost)                          AVAILABLE

A preferred election whose first replica already leads, and an unclean one whose leader is
live, are ELECTION_NOT_NEEDED. A broker shutting down leads nothing new: failover
(`controller.decide`) skips it too.

Automatic rebalance (`auto.leader.rebalance.enable`): for each broker, the share of the
partitions it is the preferred leader of that another broker leads; above
`leader.imbalance.per.broker.percentage`, each of those whose preferred replica can lead
gets a preferred election.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ads.common.partitions import TopicPartition
from ads.metadata.zk_layout import LeaderAndIsr
from ads.protocol.errors import ErrorCode

PREFERRED = 0
UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class Refused:
    """An election that does not happen, with Kafka's error code and message."""

    code: ErrorCode
    message: str | None = None


def controlled_shutdown(state: LeaderAndIsr | None, replicas: list[int], live: Collection[int],
                        shutting_down: Collection[int], broker: int,
                        controller_epoch: int) -> LeaderAndIsr | None:
    """The state once `broker` (in `shutting_down`) neither leads the partition nor is in
    its ISR, or None when nothing changes (it leads and no other replica can)."""
    if state is None or state.leader < 0:
        return None
    if state.leader == broker:
        leader = next((r for r in replicas if r in state.isr and r in live
                       and r not in shutting_down), None)
        if leader is None:
            return None
        isr = [r for r in state.isr if r not in shutting_down]
        return LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch)
    if broker in state.isr and len(state.isr) > 1:
        isr = [r for r in state.isr if r != broker]
        return LeaderAndIsr(state.leader, state.leader_epoch + 1, isr, controller_epoch)
    return None


def preferred(state: LeaderAndIsr | None, replicas: list[int], live: Collection[int],
              shutting_down: Collection[int], controller_epoch: int) -> LeaderAndIsr | Refused:
    if not replicas:
        return Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    first = replicas[0]
    if state is not None and state.leader == first:
        return Refused(ErrorCode.ELECTION_NOT_NEEDED)
    if state is None or first not in live or first in shutting_down or first not in state.isr:
        return Refused(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                       f"Failed to elect leader for partition under strategy "
                       f"PreferredReplicaPartitionLeaderElectionStrategy: preferred replica "
                       f"{first} is not live and in the ISR")
    return LeaderAndIsr(first, state.leader_epoch + 1, state.isr, controller_epoch)


def unclean(state: LeaderAndIsr | None, replicas: list[int], live: Collection[int],
            shutting_down: Collection[int], controller_epoch: int) -> LeaderAndIsr | Refused:
    if not replicas:
        return Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    if state is not None and state.leader in live and state.leader not in shutting_down:
        return Refused(ErrorCode.ELECTION_NOT_NEEDED)
    candidates = [r for r in replicas if r in live and r not in shutting_down]
    if state is None or not candidates:
        return Refused(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                       "Failed to elect leader for partition under strategy "
                       "OfflinePartitionLeaderElectionStrategy: no live replica")
    in_isr = [r for r in candidates if r in state.isr]
    if in_isr:
        return LeaderAndIsr(in_isr[0], state.leader_epoch + 1, in_isr, controller_epoch)
    return LeaderAndIsr(candidates[0], state.leader_epoch + 1, [candidates[0]],
                        controller_epoch)


def imbalanced(partitions: Iterable[tuple[TopicPartition, list[int], LeaderAndIsr | None]],
               live: Collection[int], shutting_down: Collection[int],
               percentage: int) -> list[TopicPartition]:
    """The partitions the automatic rebalance gives a preferred election, in order."""
    by_preferred: dict[int, list[tuple[TopicPartition, list[int], LeaderAndIsr | None]]] = {}
    for entry in partitions:
        if entry[1]:
            by_preferred.setdefault(entry[1][0], []).append(entry)
    chosen: list[TopicPartition] = []
    for broker, entries in sorted(by_preferred.items()):
        elsewhere = [(key, replicas, state) for key, replicas, state in entries
                     if state is not None and state.leader != broker]
        if len(elsewhere) / len(entries) <= percentage / 100:
            continue
        chosen += [key for key, replicas, state in elsewhere
                   if isinstance(preferred(state, replicas, live, shutting_down, 0),
                                 LeaderAndIsr)]
    return chosen
