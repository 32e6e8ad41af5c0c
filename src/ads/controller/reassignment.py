"""Partition reassignment (KIP-455, as Kafka's ZooKeeper mode does it): moving a partition's
replicas to a target list, completed only once every target replica is in the ISR.

A partition's assignment is `replicas` (RS) with `adding` (AR) and `removing` (RR), kept in
`/brokers/topics/<t>` as Kafka keeps them. The origin is RS - AR, the target RS - RR.

    reassign to T          RS = T, then the origin replicas not in T;  AR = RS - origin;
                           RR = RS - T. Written at once: brokers in AR see themselves in
                           the replicas and make the replica (as followers, which fetch
                           from the leader and join the ISR once caught up).
    cancel                 a reassignment back to the origin: AR leave at once.
    complete, when T is    the leader moves to the first of T that is live and in the ISR
    a subset of the ISR    if it is not in T; the ISR loses every replica not in T; the
                           leader epoch moves (whenever RR is not empty, as in Kafka, so
                           that the leader's ISR changes under the old epoch are refused);
                           then RS = T and AR, RR are cleared; brokers of RR see they hold
                           no replica any more and delete it.
    not complete yet       the ISR loses replicas no longer in RS (a reassignment replaced
                           by another); the controller watches the partition's state znode
                           and looks again whenever it changes (the leader adds a follower
                           to the ISR).

A reassignment whose target holds nothing new (a reorder, or dropping replicas) completes
at once. Requests (AlterPartitionReassignments) are refused as Kafka refuses them: an empty
target, duplicate or negative broker ids, or new replicas on brokers that are not live are
INVALID_REPLICA_ASSIGNMENT; cancelling where nothing moves is NO_REASSIGNMENT_IN_PROGRESS;
an unknown partition or a topic being deleted UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from ads.common.partitions import TopicPartition
from ads.controller.election import Refused
from ads.metadata import zk_layout as zl
from ads.metadata.zk_layout import LeaderAndIsr
from ads.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
Rule = Callable[[LeaderAndIsr | None], LeaderAndIsr | Refused | None]


class Controller(Protocol):
    """What reassignment uses of `controller.Controller`."""

    zk: KazooClient
    active: bool
    epoch: int
    shutting_down: set[int]

    def live_brokers(self) -> set[int]: ...

    def current_state(self, topic: str, partition: int) -> LeaderAndIsr | None: ...

    def update_state(self, topic: str, partition: int, rule: Rule
                     ) -> LeaderAndIsr | Refused | None: ...

    def write_assignment(self, topic: str, assignment: zl.TopicAssignment,
                         version: int) -> None: ...

    def submit_if_active(self, work: Callable[[], None]) -> None: ...


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    replicas: list[int]
    adding: list[int]
    removing: list[int]

    @property
    def origin(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: list[int]) -> ReplicaAssignment:
        origin = self.origin
        full = list(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, [r for r in full if r not in origin],
                                 [r for r in full if r not in target])


def check_target(target: list[int], current: ReplicaAssignment,
                 live: Collection[int]) -> Refused | None:
    """Kafka's checks of a requested target replica list."""
    if not target:
        return Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        return Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Duplicate replica ids in partition reassignment replica list: "
                       f"{target}")
    if any(r < 0 for r in target):
        return Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Invalid broker id in replica list: {target}")
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live):
        return Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Replica assignment has brokers that are not alive. Replica list: "
                       f"{adding}, live broker list: {sorted(live)}")
    return None


def fit(state: LeaderAndIsr | None, allowed: list[int], live: Collection[int],
        shutting_down: Collection[int], controller_epoch: int,
        bump: bool = False) -> LeaderAndIsr | None:
    """The state with the ISR cut to `allowed` and, if the leader is not allowed, the first
    allowed replica that is live and in the ISR leading; None when nothing changes (unless
    `bump`: the leader epoch moves even then) or no such replica exists."""
    if state is None or state.leader < 0:
        return None
    isr = [r for r in state.isr if r in allowed]
    leader = state.leader
    if leader not in allowed:
        found = next((r for r in allowed if r in isr and r in live
                      and r not in shutting_down), None)
        if found is None:
            return None
        leader = found
    if leader == state.leader and isr == state.isr and not bump:
        return None
    return LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch)


def can_complete(state: LeaderAndIsr | None, assignment: ReplicaAssignment,
                 live: Collection[int], shutting_down: Collection[int]) -> bool:
    if not assignment.reassigning:
        return True
    if state is None or not set(assignment.target) <= set(state.isr):
        return False
    if state.leader in assignment.target:
        return True
    return any(r in live and r not in shutting_down for r in assignment.target)


def _of(a: zl.TopicAssignment, partition: int) -> ReplicaAssignment:
    return ReplicaAssignment(a.replicas[partition], a.adding.get(partition, []),
                             a.removing.get(partition, []))


def _with(a: zl.TopicAssignment, partition: int, ra: ReplicaAssignment) -> zl.TopicAssignment:
    adding = {p: r for p, r in a.adding.items() if p != partition}
    removing = {p: r for p, r in a.removing.items() if p != partition}
    if ra.adding:
        adding[partition] = ra.adding
    if ra.removing:
        removing[partition] = ra.removing
    return replace(a, replicas={**a.replicas, partition: ra.replicas}, adding=adding,
                   removing=removing)


class Reassigner:
    """The controller's reassignment work; runs on the controller's thread only."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.zk = controller.zk
        # Reassigning partitions whose state znode is watched (kazoo's thread reads it).
        self._watched: set[TopicPartition] = set()
        self._lock = threading.Lock()

    def reset(self) -> None:
        """A new term as controller: the watches of the last one stop at their next call."""
        with self._lock:
            self._watched.clear()

    def alter(self, requests: dict[TopicPartition, list[int] | None]
              ) -> dict[TopicPartition, Refused | None]:
        c = self.controller
        live = c.live_brokers()
        deleting = set(self.zk.get_children(zl.DELETE_TOPICS))
        results: dict[TopicPartition, Refused | None] = {}
        by_topic: dict[str, dict[int, list[int] | None]] = {}
        for (topic, partition), target in requests.items():
            by_topic.setdefault(topic, {})[partition] = target
        for topic, targets in sorted(by_topic.items()):
            changed = self._alter_topic(topic, targets, live, topic in deleting, results)
            for partition in changed:
                self.progress(topic, partition)
        return results

    def _alter_topic(self, topic: str, targets: dict[int, list[int] | None], live: set[int],
                     deleting: bool, results: dict[TopicPartition, Refused | None]
                     ) -> list[int]:
        unknown = Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        for _ in range(3):  # the assignment changed meanwhile: decide again
            try:
                data, stat = self.zk.get(zl.topic_path(topic))
            except NoNodeError:
                data, stat = None, None
            if data is None or stat is None or deleting:
                results.update({TopicPartition(topic, p): unknown for p in targets})
                return []
            assignment = zl.decode_assignment(data)
            changed = []
            for partition, target in sorted(targets.items()):
                if partition not in assignment.replicas:
                    results[TopicPartition(topic, partition)] = unknown
                    continue
                current = _of(assignment, partition)
                if target is None:
                    if not current.reassigning:
                        results[TopicPartition(topic, partition)] = Refused(
                            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                        continue
                    target = current.origin
                refused = check_target(target, current, live)
                results[TopicPartition(topic, partition)] = refused
                if refused is None:
                    assignment = _with(assignment, partition, current.reassign_to(target))
                    changed.append(partition)
            if not changed:
                return []
            try:
                self.controller.write_assignment(topic, assignment, stat.version)
            except BadVersionError:
                continue
            log.info("reassigning %s partitions %s", topic, changed)
            return changed
        results.update({TopicPartition(topic, p): Refused(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                          "the assignment kept changing")
                        for p in targets})
        return []

    def progress(self, topic: str, partition: int) -> None:
        """Moves a reassignment on as far as the partition's ISR allows."""
        c = self.controller
        for _ in range(3):
            try:
                data, stat = self.zk.get(zl.topic_path(topic))
            except NoNodeError:
                self._unwatch(topic, partition)  # deleted
                return
            assignment = zl.decode_assignment(data)
            if partition not in assignment.replicas:
                self._unwatch(topic, partition)
                return
            ra = _of(assignment, partition)
            live = c.live_brokers()
            rule = functools.partial(fit, live=live, shutting_down=c.shutting_down,
                                     controller_epoch=c.epoch)
            if not can_complete(c.current_state(topic, partition), ra, live, c.shutting_down):
                c.update_state(topic, partition, functools.partial(rule, allowed=ra.replicas))
                self._watch(topic, partition)
                return
            # Replicas leave: the leader epoch moves even when the ISR is already the
            # target's, as Kafka's controller moves it, so that an ISR change the leader
            # makes under the old epoch (adding a leaving replica that fetched meanwhile)
            # is refused instead of keeping a replica that is no longer one.
            if isinstance(c.update_state(topic, partition, functools.partial(
                    rule, allowed=ra.target, bump=bool(ra.removing))), Refused):
                return
            if not ra.reassigning:
                self._unwatch(topic, partition)
                return
            done = ReplicaAssignment(ra.target, [], [])
            try:
                c.write_assignment(topic, _with(assignment, partition, done), stat.version)
            except BadVersionError:
                continue
            self._unwatch(topic, partition)
            log.info("reassignment of %s-%d complete: replicas %s", topic, partition,
                     done.replicas)
            return

    def _unwatch(self, topic: str, partition: int) -> None:
        """The partition's watch stops at its next call."""
        with self._lock:
            self._watched.discard(TopicPartition(topic, partition))

    def _watch(self, topic: str, partition: int) -> None:
        key = TopicPartition(topic, partition)
        with self._lock:
            if key in self._watched:
                return
            self._watched.add(key)
        c = self.controller

        def changed(_: bytes | None, __: ZnodeStat | None) -> bool:
            with self._lock:
                wanted = key in self._watched
            if not wanted or not c.active:
                return False
            c.submit_if_active(functools.partial(self.progress, topic, partition))
            return True

        DataWatch(self.zk, zl.state_path(topic, partition), changed)

    def ongoing(self, partitions: list[TopicPartition] | None
                ) -> dict[TopicPartition, ReplicaAssignment]:
        wanted: dict[str, set[int] | None] = {}
        if partitions is None:
            wanted = {t: None for t in self.zk.get_children(zl.TOPICS)}
        else:
            for topic, partition in partitions:
                found = wanted.setdefault(topic, set())
                assert found is not None
                found.add(partition)
        out: dict[TopicPartition, ReplicaAssignment] = {}
        for topic, only in sorted(wanted.items()):
            try:
                assignment = zl.decode_assignment(self.zk.get(zl.topic_path(topic))[0])
            except NoNodeError:
                continue
            for partition in sorted(assignment.replicas):
                ra = _of(assignment, partition)
                if ra.reassigning and (only is None or partition in only):
                    out[TopicPartition(topic, partition)] = ra
        return out
