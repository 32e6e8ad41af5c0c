"""The controller: one broker of the cluster decides every partition's leader.

Every broker runs a `Controller`; the one that creates the ephemeral `/controller` znode is
active until its ZooKeeper session ends. On winning it increments `/controller_epoch` and
remembers the znode version it wrote: each later change of a partition state is a
ZooKeeper transaction that first checks that version, so a deposed controller (stopped past
its session timeout, then resumed) cannot change anything once another broker has won.

Its work is one loop on its own thread fed by watches (brokers registering and leaving,
topics created or grown, topics queued for deletion). Each event reconciles the partition
states with the live brokers:

- a partition without a state gets one: the first live replica in assignment order (the
  preferred replica) leads at leader epoch 0, with itself as the ISR (followers join the ISR
  when they have caught up);
- a partition whose leader is not live gets the first live replica of its ISR as leader,
  with the ISR cut to the live members, at the next leader epoch; with no live ISR member
  it goes offline (leader -1) and keeps its last ISR, so it comes back, with all its data,
  when that replica's broker returns; only with `unclean.leader.election.enable` (the
  topic's, else the broker's) does the first live replica outside the ISR lead instead,
  and the records it lacks are lost (logged);
- a live leader's ISR loses members whose brokers are gone, at the next leader epoch;
- a topic queued in `/admin/delete_topics` has its znodes removed.

A broker in controlled shutdown (`controlled_shutdown`, asked for with the ControlledShutdown
request) hands the leadership of its replicated partitions to other live ISR members and
leaves the ISRs it follows in; until its session ends it is given no new leadership.
Preferred and unclean elections (`elect_leaders`, the ElectLeaders API) and the automatic
leader rebalance follow the rules of `election.py`. These read each partition's state
afresh from ZooKeeper before deciding, since leaders change ISRs too.

Brokers learn the outcome by watching the state znodes (`metadata.zookeeper`), not by
controller requests: see docs/cluster.md for why.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future
from typing import Literal, TypeVar

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ads.common.partitions import TopicPartition
from ads.controller import election
from ads.controller.election import Refused
from ads.controller.reassignment import Reassigner, ReplicaAssignment
from ads.metadata import zk_layout as zl
from ads.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_STOP = "stop"
# Kafka checks the leader balance first 5 s after a controller is elected.
_FIRST_REBALANCE_S = 5.0
T = TypeVar("T")
# ZooKeeper requests the controller keeps in flight at once: enough to hide the round trip,
# few enough that a window's answers stay a small allocation.
_PIPELINE = 1000


class DeposedError(Exception):
    """Another controller was elected since this one: its writes are refused."""


class Controller:
    def __init__(self, zk: KazooClient, node_id: int, *, auto_rebalance: bool = False,
                 imbalance_check_interval_s: float = 300.0,
                 imbalance_percentage: int = 10, unclean_default: bool = False) -> None:
        """`auto_rebalance` and the next two are `auto.leader.rebalance.enable`,
        `leader.imbalance.check.interval.seconds` and
        `leader.imbalance.per.broker.percentage`; `unclean_default` the broker's
        `unclean.leader.election.enable` (a topic's own setting wins)."""
        self.zk = zk
        self.node_id = node_id
        self.unclean_default = unclean_default
        self.active = False
        self.epoch = -1
        self._epoch_version = -1
        self._events: queue.Queue[str | Callable[[], None]] = queue.Queue()
        self.auto_rebalance = auto_rebalance
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self.imbalance_percentage = imbalance_percentage
        self._next_rebalance = 0.0
        # Brokers in controlled shutdown: they lead nothing new until their session ends.
        self.shutting_down: set[int] = set()
        self.reassigner = Reassigner(self)
        self._thread = threading.Thread(target=self._run, name="ads-controller", daemon=True)
        self._stopped = False
        # Partition states this controller knows with their znode versions; a write that
        # finds another version reads the znode again.
        self._states: dict[TopicPartition, tuple[zl.LeaderAndIsr, int]] = {}
        # Leaders this controller gave partitions that had a state already (a new partition's
        # first leader is not elected), and those not from the ISR; /metrics reads them.
        self.leader_elections = 0
        self.unclean_leader_elections = 0

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self.zk.add_listener(self._session_changed)
        DataWatch(self.zk, zl.CONTROLLER, self._controller_znode)
        ChildrenWatch(self.zk, zl.BROKER_IDS, self._children_event("brokers"))
        ChildrenWatch(self.zk, zl.TOPICS, self._children_event("topics"))
        ChildrenWatch(self.zk, zl.DELETE_TOPICS, self._children_event("delete"))

    def stop(self) -> None:
        """Stops deciding; an active controller gives its place up for another broker."""
        self._stopped = True
        self._events.put(_STOP)
        self._thread.join(10)

    def _session_changed(self, state: str) -> None:
        if state == KazooState.LOST:
            self._events.put("resign")

    def _controller_znode(self, data: bytes | None, _: ZnodeStat | None) -> bool:
        if data is None:
            self._events.put("elect")
        return not self._stopped

    def _children_event(self, name: str) -> Callable[[list[str]], bool]:
        def watch(_: list[str]) -> bool:
            self._events.put(name)
            return not self._stopped
        return watch

    def _topic_event(self, _: WatchedEvent) -> None:
        self._events.put("topics")

    # -- requests from the broker's event loop (any thread) ----------------------------
    def controlled_shutdown(self, broker_id: int, broker_epoch: int
                            ) -> Future[tuple[ErrorCode, list[TopicPartition]]]:
        """Moves leadership off `broker_id`; the result is an error code and the
        replicated partitions it still leads (no other live ISR member could take them)."""
        return self._submit(functools.partial(self._controlled_shutdown, broker_id,
                                              broker_epoch))

    def elect_leaders(self, election_type: int, partitions: list[TopicPartition]
                      ) -> Future[dict[TopicPartition, zl.LeaderAndIsr | Refused]]:
        """Preferred (0) or unclean (1) elections; each partition's new state or why not."""
        return self._submit(functools.partial(self._elect_leaders, election_type,
                                              partitions))

    def alter_reassignments(self, requests: dict[TopicPartition, list[int] | None]
                            ) -> Future[dict[TopicPartition, Refused | None] | None]:
        """Starts (a list) or cancels (None) reassignments; None when not the controller."""
        return self._submit(functools.partial(self._if_active, functools.partial(
            self.reassigner.alter, requests)))

    def list_reassignments(self, partitions: list[TopicPartition] | None
                           ) -> Future[dict[TopicPartition, ReplicaAssignment] | None]:
        return self._submit(functools.partial(self._if_active, functools.partial(
            self.reassigner.ongoing, partitions)))

    def submit_if_active(self, work: Callable[[], None]) -> None:
        """Queues work for the controller's thread, done only while it is the controller."""
        self._events.put(functools.partial(self._if_active, work))

    def _if_active(self, work: Callable[[], T]) -> T | None:
        return work() if self.active else None

    def _submit(self, work: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(work())
            except BaseException as exc:
                future.set_exception(exc)
                raise  # the loop logs it, and steps down when deposed

        self._events.put(run)
        return future

    # -- the event loop -------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            wait = None
            if self.active and self.auto_rebalance:
                wait = max(self._next_rebalance - time.monotonic(), 0.0)
            try:
                event = self._events.get(timeout=wait)
            except queue.Empty:
                event = "rebalance"
            if event == _STOP:
                self._resign()
                self._drain()
                return
            try:
                self._handle(event)
            except DeposedError:
                log.warning("controller %d was deposed (controller epoch moved past %d)",
                            self.node_id, self.epoch)
                self.active = False
            except Exception:
                if not self._stopped:
                    log.exception("controller %d: handling %s failed", self.node_id, event)

    def _handle(self, event: str | Callable[[], None]) -> None:
        """One event of the loop: a queued request, the rebalance check, an election, a lost
        session, or a change in ZooKeeper to reconcile."""
        if callable(event):
            event()
        elif event == "rebalance":
            self._next_rebalance = time.monotonic() + self.imbalance_check_interval_s
            if self.active:
                self._rebalance()
        elif event == "elect":
            self._elect()
        elif event == "resign":
            self._resign(session_lost=True)
        elif self.active:
            self._reconcile()

    def _drain(self) -> None:
        """Answers the requests still queued (not the controller any more)."""
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            if callable(event):
                try:
                    event()
                except Exception:  # noqa: BLE001 - stopping: the request has its answer
                    log.debug("controller %d: a queued request failed", self.node_id,
                              exc_info=True)

    def _elect(self) -> None:
        if self.active or self._stopped:
            return
        try:
            self.zk.create(zl.CONTROLLER, zl.encode_controller(self.node_id), ephemeral=True)
        except NodeExistsError:
            return
        try:
            data, stat = self.zk.get(zl.CONTROLLER_EPOCH)
            epoch = zl.decode_epoch(data) + 1
            stat = self.zk.set(zl.CONTROLLER_EPOCH, zl.encode_epoch(epoch), version=stat.version)
        except NoNodeError:
            epoch = 1
            self.zk.create(zl.CONTROLLER_EPOCH, zl.encode_epoch(epoch))
            _, stat = self.zk.get(zl.CONTROLLER_EPOCH)
        self.epoch, self._epoch_version = epoch, stat.version
        self.active = True
        self._states.clear()
        self.shutting_down.clear()
        self.reassigner.reset()
        self._next_rebalance = time.monotonic() + min(_FIRST_REBALANCE_S,
                                                      self.imbalance_check_interval_s)
        log.info("broker %d is the controller (controller epoch %d)", self.node_id, epoch)
        self._reconcile()

    def _resign(self, session_lost: bool = False) -> None:
        if not self.active:
            return
        self.active = False
        log.info("controller %d resigns", self.node_id)
        if session_lost:
            return  # the ephemeral znode went with the session
        try:
            data, _ = self.zk.get(zl.CONTROLLER)
            if zl.decode_controller(data) == self.node_id:
                self.zk.delete(zl.CONTROLLER)
        except Exception:  # noqa: BLE001 - shutting down: ZooKeeper may be gone already
            log.debug("could not remove %s", zl.CONTROLLER, exc_info=True)

    # -- reconciling partition states ----------------------------------------------------
    def _reconcile(self) -> None:
        """Decides every partition afresh and writes the changes. The ZooKeeper requests
        are pipelined (`_read_states`, `_write_states`): a failover touches every partition
        the dead broker led or followed, and one round trip each, waited for in turn, made
        that seconds per thousand partitions."""
        live = {int(c) for c in self.zk.get_children(zl.BROKER_IDS)}
        self.shutting_down &= live  # a broker that returns is a new one
        self._delete_queued_topics()
        assignments = self._read_assignments(sorted(self.zk.get_children(zl.TOPICS)))
        replicas_of = {TopicPartition(topic, partition): replicas
                       for topic, assignment in assignments.items()
                       for partition, replicas in sorted(assignment.replicas.items())}
        self._read_states([key for key in replicas_of if key not in self._states])
        unclean: dict[str, bool] = {}
        for _ in range(3):  # stale znode versions: read those again and decide again
            writes = []
            for key, replicas in replicas_of.items():
                state, version = self._states.get(key, (None, -1))
                new = decide(state, replicas, live, self.epoch, self.shutting_down,
                             unclean=functools.partial(self._unclean_once, unclean, key.topic))
                if new is not None:
                    writes.append((key, state, new, version))
            stale = self._write_states(writes)
            if not stale:
                break
            self._read_states(stale)
            replicas_of = {key: replicas_of[key] for key in stale}
        for topic, assignment in assignments.items():
            for partition in sorted(assignment.adding.keys() | assignment.removing.keys()):
                self.reassigner.progress(topic, partition)

    def _read_assignments(self, topics: list[str]) -> dict[str, zl.TopicAssignment]:
        """Each topic's assignment, watched for growth; the gets are pipelined."""
        asked = [(t, self.zk.get_async(zl.topic_path(t), watch=self._topic_event))
                 for t in topics]
        found = {}
        for topic, result in asked:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue
            found[topic] = zl.decode_assignment(data)
        return found

    def _unclean_once(self, cache: dict[str, bool], topic: str) -> bool:
        if topic not in cache:
            cache[topic] = self._unclean(topic)
        return cache[topic]

    def _unclean(self, topic: str) -> bool:
        try:
            data, _ = self.zk.get(zl.config_path(topic))
        except NoNodeError:
            return self.unclean_default
        value = zl.decode_config(data).get("unclean.leader.election.enable")
        return self.unclean_default if value is None else value.strip().lower() == "true"

    # -- controlled shutdown, elections, rebalance (see election.py) ---------------------
    def _partitions(self) -> Iterator[tuple[str, int, list[int]]]:
        """Every partition and its replicas, but those of topics queued for deletion."""
        deleting = set(self.zk.get_children(zl.DELETE_TOPICS))
        for topic in sorted(self.zk.get_children(zl.TOPICS)):
            if topic in deleting:
                continue
            try:
                data, _ = self.zk.get(zl.topic_path(topic))
            except NoNodeError:
                continue
            for partition, replicas in sorted(zl.decode_assignment(data).replicas.items()):
                yield topic, partition, replicas

    def update_state(self, topic: str, partition: int,
                rule: Callable[[zl.LeaderAndIsr | None], zl.LeaderAndIsr | Refused | None]
                ) -> zl.LeaderAndIsr | Refused | None:
        """Applies `rule` to the partition's current state and writes what it decides."""
        for _ in range(3):  # a stale znode version: read it again and decide again
            known = self._read_state(topic, partition)
            state, version = known if known is not None else (None, -1)
            new = rule(state)
            if not isinstance(new, zl.LeaderAndIsr) or version < 0:
                return new
            try:
                self._write_state(topic, partition, new, version)
            except BadVersionError:
                continue
            return new
        return Refused(ErrorCode.UNKNOWN_SERVER_ERROR, "the partition state kept changing")

    def current_state(self, topic: str, partition: int) -> zl.LeaderAndIsr | None:
        """The partition's state as ZooKeeper has it now."""
        known = self._read_state(topic, partition)
        return known[0] if known is not None else None

    def live_brokers(self) -> set[int]:
        return {int(c) for c in self.zk.get_children(zl.BROKER_IDS)}

    def write_assignment(self, topic: str, assignment: zl.TopicAssignment,
                         version: int) -> None:
        """Rewrites the topic's assignment if this controller is still the current one and
        the znode is still at `version` (BadVersionError otherwise)."""
        tx = self.zk.transaction()
        tx.check(zl.CONTROLLER_EPOCH, self._epoch_version)
        tx.set_data(zl.topic_path(topic), zl.encode_assignment(assignment), version=version)
        results = tx.commit()
        if isinstance(results[0], BadVersionError):
            raise DeposedError
        if isinstance(results[1], (BadVersionError, NoNodeError)):
            raise BadVersionError
        if isinstance(results[1], Exception):
            raise results[1]

    def _live_epochs(self) -> dict[int, int]:
        """Live brokers and their broker epochs (the zxid that created the registration,
        as in Kafka)."""
        epochs = {}
        for child in self.zk.get_children(zl.BROKER_IDS):
            stat = self.zk.exists(zl.broker_path(int(child)))
            if stat is not None:
                epochs[int(child)] = stat.czxid
        return epochs

    def _controlled_shutdown(self, broker_id: int, broker_epoch: int
                             ) -> tuple[ErrorCode, list[TopicPartition]]:
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        epochs = self._live_epochs()
        if broker_id not in epochs:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if 0 <= broker_epoch < epochs[broker_id]:
            log.info("controlled shutdown of broker %d refused: broker epoch %d is older than "
                     "%d", broker_id, broker_epoch, epochs[broker_id])
            return ErrorCode.STALE_BROKER_EPOCH, []
        log.info("controlled shutdown of broker %d", broker_id)
        self.shutting_down.add(broker_id)
        live = set(epochs)
        remaining = []
        for topic, partition, replicas in self._partitions():
            if broker_id not in replicas or len(replicas) < 2:
                continue  # a single replica has nowhere to go
            new = self.update_state(topic, partition, functools.partial(
                election.controlled_shutdown, replicas=replicas, live=live,
                shutting_down=self.shutting_down, broker=broker_id,
                controller_epoch=self.epoch))
            key = TopicPartition(topic, partition)
            known = self._states.get(key)
            if known is not None and known[0].leader == broker_id:
                remaining.append(key)
            elif isinstance(new, zl.LeaderAndIsr):
                log.info("%s-%d: broker %d shutting down; leader %d, ISR %s", topic,
                         partition, broker_id, new.leader, new.isr)
        return ErrorCode.NONE, remaining

    def _elect_leaders(self, election_type: int, partitions: list[TopicPartition]
                       ) -> dict[TopicPartition, zl.LeaderAndIsr | Refused]:
        if not self.active:
            return {tp: Refused(ErrorCode.NOT_CONTROLLER) for tp in partitions}
        live = {int(c) for c in self.zk.get_children(zl.BROKER_IDS)}
        deleting = set(self.zk.get_children(zl.DELETE_TOPICS))
        assignments: dict[str, dict[int, list[int]]] = {}
        results: dict[TopicPartition, zl.LeaderAndIsr | Refused] = {}
        rule = election.preferred if election_type == election.PREFERRED else election.unclean
        for tp in partitions:
            topic, partition = tp
            if topic not in assignments:
                try:
                    data, _ = self.zk.get(zl.topic_path(topic))
                    assignments[topic] = zl.decode_assignment(data).replicas
                except NoNodeError:
                    assignments[topic] = {}
            replicas = assignments[topic].get(partition)
            if replicas is None:
                results[tp] = Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      "The partition does not exist.")
                continue
            if topic in deleting:
                results[tp] = Refused(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                      "The topic is being deleted")
                continue
            outcome = self.update_state(topic, partition, functools.partial(
                rule, replicas=replicas, live=live, shutting_down=self.shutting_down,
                controller_epoch=self.epoch))
            results[tp] = outcome if outcome is not None else Refused(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return results

    def _rebalance(self) -> None:
        live = {int(c) for c in self.zk.get_children(zl.BROKER_IDS)}
        entries = []
        for topic, partition, replicas in self._partitions():
            known = self._read_state(topic, partition)
            entries.append((TopicPartition(topic, partition), replicas,
                            known[0] if known else None))
        chosen = election.imbalanced(entries, live, self.shutting_down,
                                     self.imbalance_percentage)
        if chosen:
            log.info("leader imbalance: preferred-leader election for %d partitions",
                     len(chosen))
        replicas_of = {key: replicas for key, replicas, _ in entries}
        for tp in chosen:
            self.update_state(tp.topic, tp.partition, functools.partial(
                election.preferred, replicas=replicas_of[tp], live=live,
                shutting_down=self.shutting_down, controller_epoch=self.epoch))

    def _read_state(self, topic: str, partition: int) -> tuple[zl.LeaderAndIsr, int] | None:
        try:
            data, stat = self.zk.get(zl.state_path(topic, partition))
        except NoNodeError:
            return None
        known = (zl.decode_state(data), stat.version)
        self._states[TopicPartition(topic, partition)] = known
        return known

    def _read_states(self, keys: list[TopicPartition]) -> None:
        """Reads the partitions' states into `_states` (forgets those without one), at
        most `_PIPELINE` requests in flight."""
        for start in range(0, len(keys), _PIPELINE):
            window = keys[start:start + _PIPELINE]
            asked = [(key, self.zk.get_async(zl.state_path(*key))) for key in window]
            for key, result in asked:
                try:
                    data, stat = result.get()
                except NoNodeError:
                    self._states.pop(key, None)
                    continue
                self._states[key] = (zl.decode_state(data), stat.version)

    def _write_state(self, topic: str, partition: int, state: zl.LeaderAndIsr,
                     version: int) -> None:
        """Writes the state if this controller is still the current one (checked in the
        same ZooKeeper transaction) and the znode is still at `version` (-1: a new one);
        BadVersionError if it is not."""
        key = TopicPartition(topic, partition)
        known = self._states.get(key) if version >= 0 else None
        if self._write_states([(key, known[0] if known else None, state, version)]):
            raise BadVersionError

    def _write_states(self, writes: list[tuple[TopicPartition, zl.LeaderAndIsr | None,
                                               zl.LeaderAndIsr, int]]) -> list[TopicPartition]:
        """Writes each (partition, state before, new state, znode version) as
        `_write_state` does, one ZooKeeper transaction per partition as in Kafka (so one
        stale partition fails alone), pipelined: at most `_PIPELINE` in flight. Returns the
        partitions whose znode was at another version; raises DeposedError once all are
        answered if another controller was elected."""
        for topic in sorted({key.topic for key, _, _, version in writes if version < 0}):
            self.zk.ensure_path(zl.partitions_path(topic))
        stale: list[TopicPartition] = []
        deposed = False
        for start in range(0, len(writes), _PIPELINE):
            window = writes[start:start + _PIPELINE]
            asked = [(write, self._state_transaction(*write[0], write[2], write[3])
                      .commit_async()) for write in window]
            for (key, before, state, version), result in asked:
                outcome = self._written(key, before, state, version, result.get())
                deposed |= outcome == "deposed"
                if outcome == "stale":
                    stale.append(key)
        if deposed:
            raise DeposedError
        return stale

    def _state_transaction(self, topic: str, partition: int, state: zl.LeaderAndIsr,
                           version: int) -> TransactionRequest:
        tx = self.zk.transaction()
        tx.check(zl.CONTROLLER_EPOCH, self._epoch_version)
        if version < 0:
            tx.create(zl.partition_path(topic, partition), b"")
            tx.create(zl.state_path(topic, partition), zl.encode_state(state))
        else:
            tx.set_data(zl.state_path(topic, partition), zl.encode_state(state),
                        version=version)
        return tx

    def _written(self, key: TopicPartition, before: zl.LeaderAndIsr | None,
                 state: zl.LeaderAndIsr, version: int, results: list[object]
                 ) -> Literal["deposed", "stale"] | None:
        """Records a committed state; why not when refused: another controller was elected,
        or the znode was at another version (read it again)."""
        if isinstance(results[0], BadVersionError):
            return "deposed"
        if version < 0 and isinstance(results[1], NodeExistsError):
            # The partition znode exists without a state (a crash between writes).
            self._create_state_alone(zl.state_path(*key), state)
            return "stale"
        failure = next((r for r in results if isinstance(r, Exception)
                        and not isinstance(r, RolledBackError)), None)
        if isinstance(failure, (BadVersionError, NoNodeError, NodeExistsError)):
            self._states.pop(key, None)
            return "stale"
        if failure is not None:
            raise failure
        self._states[key] = (state, version + 1)
        if before is not None and state.leader >= 0 and state.leader != before.leader:
            self.leader_elections += 1
            if state.leader not in before.isr:
                self.unclean_leader_elections += 1
                log.warning("%s-%d: unclean leader election: broker %d was not in the ISR "
                            "%s and leads from epoch %d; records it lacks are lost",
                            key.topic, key.partition, state.leader, before.isr,
                            state.leader_epoch)
        log.info("%s-%d: leader %d, leader epoch %d, ISR %s", key.topic, key.partition,
                 state.leader, state.leader_epoch, state.isr)
        return None

    def _create_state_alone(self, path: str, state: zl.LeaderAndIsr) -> None:
        tx = self.zk.transaction()
        tx.check(zl.CONTROLLER_EPOCH, self._epoch_version)
        tx.create(path, zl.encode_state(state))
        results = tx.commit()
        if isinstance(results[0], BadVersionError):
            raise DeposedError

    def _delete_queued_topics(self) -> None:
        for topic in self.zk.get_children(zl.DELETE_TOPICS):
            paths = self._tree(zl.topic_path(topic))
            tx = self.zk.transaction()
            tx.check(zl.CONTROLLER_EPOCH, self._epoch_version)
            for path in reversed(paths):  # children before parents
                tx.delete(path)
            if self.zk.exists(zl.config_path(topic)):
                tx.delete(zl.config_path(topic))
            tx.delete(zl.delete_path(topic))
            results = tx.commit()
            if isinstance(results[0], BadVersionError):
                raise DeposedError
            failure = next((r for r in results if isinstance(r, Exception)
                            and not isinstance(r, RolledBackError)), None)
            if failure is not None:
                log.warning("deleting topic %s failed (%r); trying again on the next event",
                            topic, failure)
                continue
            for key in [k for k in self._states if k[0] == topic]:
                del self._states[key]
            log.info("deleted topic %s", topic)

    def _tree(self, root: str) -> list[str]:
        """`root` and every znode below it, parents first ([] when it does not exist)."""
        try:
            children = self.zk.get_children(root)
        except NoNodeError:
            return []
        found = [root]
        for child in sorted(children):
            found.extend(self._tree(f"{root}/{child}"))
        return found


def decide(state: zl.LeaderAndIsr | None, replicas: list[int], live: set[int],
           controller_epoch: int, shutting_down: Collection[int] = (),
           unclean: Callable[[], bool] = lambda: False) -> zl.LeaderAndIsr | None:
    """The partition's next state given the live brokers, or None when it stays. Brokers
    `shutting_down` keep what they lead but are not given new leadership. `unclean()` says
    whether a replica outside the ISR may lead when none in it lives."""
    if state is None:
        # A new partition's log is empty on every replica, so each live one is in sync: the
        # ISR starts with all of them (as in Kafka), and acks=all counts them from the first
        # record instead of being acknowledged by the leader alone until followers join.
        isr = [r for r in replicas if r in live and r not in shutting_down]
        if not isr:
            return None  # no replica alive: made when one registers
        return zl.LeaderAndIsr(isr[0], 0, isr, controller_epoch)
    live_isr = [r for r in state.isr if r in live]
    if state.leader in live:
        if len(live_isr) == len(state.isr):
            return None
        return zl.LeaderAndIsr(state.leader, state.leader_epoch + 1, live_isr, controller_epoch)
    leader = next((r for r in replicas if r in live_isr and r not in shutting_down), None)
    if leader is not None:
        return zl.LeaderAndIsr(leader, state.leader_epoch + 1, live_isr, controller_epoch)
    leader = next((r for r in replicas if r in live and r not in shutting_down), None)
    if leader is not None and not live_isr and unclean():
        return zl.LeaderAndIsr(leader, state.leader_epoch + 1, [leader], controller_epoch)
    if state.leader == -1:
        return None
    return zl.LeaderAndIsr(-1, state.leader_epoch + 1, state.isr, controller_epoch)
