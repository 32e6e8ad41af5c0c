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

Brokers learn the outcome by watching the state znodes (`metadata.zookeeper`), not by
controller requests: see docs/cluster.md for why.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ads.metadata import zk_layout as zl

log = logging.getLogger(__name__)

_STOP = "stop"


class DeposedError(Exception):
    """Another controller was elected since this one: its writes are refused."""


class Controller:
    def __init__(self, zk: KazooClient, node_id: int, unclean_default: bool = False) -> None:
        self.zk = zk
        self.node_id = node_id
        self.unclean_default = unclean_default  # the broker's unclean.leader.election.enable
        self.active = False
        self.epoch = -1
        self._epoch_version = -1
        self._events: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="ads-controller", daemon=True)
        self._stopped = False
        # Partition states this controller knows with their znode versions; a write that
        # finds another version reads the znode again.
        self._states: dict[tuple[str, int], tuple[zl.LeaderAndIsr, int]] = {}

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

    # -- the event loop -------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            event = self._events.get()
            if event == _STOP:
                self._resign()
                return
            try:
                if event == "elect":
                    self._elect()
                elif event == "resign":
                    self._resign(session_lost=True)
                elif self.active:
                    self._reconcile()
            except DeposedError:
                log.warning("controller %d was deposed (controller epoch moved past %d)",
                            self.node_id, self.epoch)
                self.active = False
            except Exception:
                if not self._stopped:
                    log.exception("controller %d: handling %s failed", self.node_id, event)

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
        live = {int(c) for c in self.zk.get_children(zl.BROKER_IDS)}
        self._delete_queued_topics()
        for topic in sorted(self.zk.get_children(zl.TOPICS)):
            try:
                data, _ = self.zk.get(zl.topic_path(topic), watch=self._topic_event)
            except NoNodeError:
                continue
            assignment = zl.decode_assignment(data)
            for partition, replicas in sorted(assignment.replicas.items()):
                self._reconcile_partition(topic, partition, replicas, live)

    def _reconcile_partition(self, topic: str, partition: int, replicas: list[int],
                             live: set[int]) -> None:
        for _ in range(3):  # a stale znode version: read it again and decide again
            known = self._states.get((topic, partition))
            if known is None:
                known = self._read_state(topic, partition)
            state, version = known if known is not None else (None, -1)
            new = decide(state, replicas, live, self.epoch,
                         unclean=lambda: self._unclean(topic))
            if new is not None and state is not None and new.leader >= 0 and (
                    new.leader not in state.isr):
                log.warning("%s-%d: unclean leader election: broker %d was not in the ISR %s "
                            "and leads from epoch %d; records it lacks are lost", topic,
                            partition, new.leader, state.isr, new.leader_epoch)
            if new is None:
                return
            try:
                self._write_state(topic, partition, new, version)
            except BadVersionError:
                self._states.pop((topic, partition), None)
                continue
            return

    def _unclean(self, topic: str) -> bool:
        try:
            data, _ = self.zk.get(zl.config_path(topic))
        except NoNodeError:
            return self.unclean_default
        value = zl.decode_config(data).get("unclean.leader.election.enable")
        return self.unclean_default if value is None else value.strip().lower() == "true"

    def _read_state(self, topic: str, partition: int) -> tuple[zl.LeaderAndIsr, int] | None:
        try:
            data, stat = self.zk.get(zl.state_path(topic, partition))
        except NoNodeError:
            return None
        known = (zl.decode_state(data), stat.version)
        self._states[(topic, partition)] = known
        return known

    def _write_state(self, topic: str, partition: int, state: zl.LeaderAndIsr,
                     version: int) -> None:
        """Writes the state if this controller is still the current one (checked in the
        same ZooKeeper transaction) and the znode is still at `version` (-1: a new one)."""
        path = zl.state_path(topic, partition)
        tx = self.zk.transaction()
        tx.check(zl.CONTROLLER_EPOCH, self._epoch_version)
        if version < 0:
            self.zk.ensure_path(zl.partitions_path(topic))
            tx.create(zl.partition_path(topic, partition), b"")
            tx.create(path, zl.encode_state(state))
        else:
            tx.set_data(path, zl.encode_state(state), version=version)
        results = tx.commit()
        if isinstance(results[0], BadVersionError):
            raise DeposedError
        if version < 0 and isinstance(results[1], NodeExistsError):
            # The partition znode exists without a state (a crash between writes).
            self._create_state_alone(path, state)
            return
        failure = next((r for r in results if isinstance(r, Exception)
                        and not isinstance(r, RolledBackError)), None)
        if isinstance(failure, (BadVersionError, NoNodeError, NodeExistsError)):
            raise BadVersionError
        if failure is not None:
            raise failure
        self._states[(topic, partition)] = (state, version + 1)
        log.info("%s-%d: leader %d, leader epoch %d, ISR %s", topic, partition, state.leader,
                 state.leader_epoch, state.isr)

    def _create_state_alone(self, path: str, state: zl.LeaderAndIsr) -> None:
        tx = self.zk.transaction()
        tx.check(zl.CONTROLLER_EPOCH, self._epoch_version)
        tx.create(path, zl.encode_state(state))
        results = tx.commit()
        if isinstance(results[0], BadVersionError):
            raise DeposedError
        raise BadVersionError  # read it again, whatever happened

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
           controller_epoch: int, unclean: Callable[[], bool] = lambda: False
           ) -> zl.LeaderAndIsr | None:
    """The partition's next state given the live brokers, or None when it stays.
    `unclean()` says whether a replica outside the ISR may lead when none in it lives."""
    if state is None:
        leader = next((r for r in replicas if r in live), None)
        if leader is None:
            return None  # no replica alive: made when one registers
        return zl.LeaderAndIsr(leader, 0, [leader], controller_epoch)
    live_isr = [r for r in state.isr if r in live]
    if state.leader in live:
        if len(live_isr) == len(state.isr):
            return None
        return zl.LeaderAndIsr(state.leader, state.leader_epoch + 1, live_isr, controller_epoch)
    leader = next((r for r in replicas if r in live_isr), None)
    if leader is not None:
        return zl.LeaderAndIsr(leader, state.leader_epoch + 1, live_isr, controller_epoch)
    leader = next((r for r in replicas if r in live), None)
    if leader is not None and unclean():
        return zl.LeaderAndIsr(leader, state.leader_epoch + 1, [leader], controller_epoch)
    if state.leader == -1:
        return None
    return zl.LeaderAndIsr(-1, state.leader_epoch + 1, state.isr, controller_epoch)
