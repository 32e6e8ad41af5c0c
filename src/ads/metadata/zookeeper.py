"""The ZooKeeper metadata store: the cluster model read from and written to Kafka's layout.

Every broker keeps its own view by watching ZooKeeper (kazoo's `ChildrenWatch` and
`DataWatch` recipes, which re-arm themselves and survive reconnections): the live brokers,
the controller, each topic's assignment and each topic's config; each partition's state
znode through `StateWatches`, which pipelines the reads (`zk_state_watch.py`). kazoo calls
the watches on its own threads; they only decode and hand the result to the event loop
(`call_soon_threadsafe`; states queued, and taken together), so the view changes on the
loop alone, where the broker reads it. Changes (create, delete, grow a topic, set its
config) are ZooKeeper writes made in a worker thread; the controller, watching the same
znodes, elects leaders and writes the partition states, which come back here through the
watches.

The session is the broker's liveness: its registration `/brokers/ids/<id>` is ephemeral.
When the session expires (`KazooState.LOST`) the store is `fenced` and the broker stops
leading until kazoo has a new session and the registration is made again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry, RetryFailedError

from ads.common.partitions import TopicPartition
from ads.metadata import zk_layout as zl
from ads.metadata.embedded import new_cluster_id
from ads.metadata.model import BrokerEndpoint, PartitionState, TopicState
from ads.metadata.store import (
    EntityListener,
    MetadataListener,
    MetadataUnavailableError,
    NodeIdInUseError,
    TopicExistsError,
)
from ads.metadata.zk_entity_configs import ZkEntityConfigs
from ads.metadata.zk_state_watch import StateWatches

log = logging.getLogger(__name__)

# ZooKeeper expires sessions in buckets of its tick (tickTime, 2 s by default), so a session
# may outlive its timeout by up to one tick.
_EXPIRY_TICK_S = 2.0
_REGISTRATION_POLL_S = 0.25

NO_STATE = zl.LeaderAndIsr(-1, -1, [], -1)


class ZkMetadataStore:
    def __init__(self, connect: str, node_id: int, session_timeout_ms: int,
                 connection_timeout_ms: int | None = None) -> None:
        self.node_id = node_id
        self.cluster_id = ""
        self.topics: dict[str, TopicState] = {}
        self._by_id: dict[uuid.UUID, TopicState] = {}
        self.version = 0
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.controller_id = -1
        self.fenced = False
        # The zxid that created this broker's registration (Kafka's broker epoch): a
        # request made for an older registration is refused by the controller.
        self.broker_epoch = -1
        self._connect = connect
        self._connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
        self._session_timeout_s = session_timeout_ms / 1000.0
        self.zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0)
        self._listeners: list[MetadataListener] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._endpoint: BrokerEndpoint | None = None
        # Loop-side pieces of each topic, assembled into `topics` on every change.
        self._assignments: dict[str, zl.TopicAssignment] = {}
        self._states: dict[TopicPartition, zl.LeaderAndIsr] = {}
        self._state_versions: dict[TopicPartition, int] = {}  # znode versions of `_states`
        self._configs: dict[str, dict[str, str]] = {}
        # kazoo-side: topics whose znodes are watched (stopping a watch: its callback
        # returns False once its topic is gone from here).
        self._watched: set[str] = set()
        self._lock = threading.Lock()
        # States read by the watches (kazoo's thread) and not yet applied on the loop.
        self._arrived: list[tuple[str, int, zl.LeaderAndIsr, int]] = []
        self._closed = False
        self._lost = False  # kazoo-side: the session expired, register again on reconnect
        self._state_watches = StateWatches(self.zk, self._state_read, self._is_watched)
        self._entities = ZkEntityConfigs(self.zk, self._post, lambda: self._closed)
        self._entities.on_change = self._entity_changed
        self._entity_listeners: list[EntityListener] = []

    # -- start-up and shutdown (blocking) -------------------------------------------------
    def load(self) -> None:
        try:
            self.zk.start(timeout=self._connection_timeout_s)
        except KazooTimeoutError as exc:
            self.zk.close()
            raise MetadataUnavailableError(
                f"cannot connect to ZooKeeper at {self._connect} within "
                f"{self._connection_timeout_s:.0f} s") from exc
        self._at_start(self._ensure_layout)
        self._await_stale_registration()

    def _ensure_layout(self) -> None:
        for path in zl.PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        try:
            self.zk.create(zl.CLUSTER_ID, zl.encode_cluster_id(new_cluster_id()), makepath=True)
        except NodeExistsError:
            pass
        self.cluster_id = zl.decode_cluster_id(self.zk.get(zl.CLUSTER_ID)[0])

    def _at_start(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)`, tried again while the connection is lost: on a loaded machine a
        ping answered late drops the connection and kazoo reconnects within the session,
        and a start-up step must wait for that, as Kafka's ZooKeeper client does, rather
        than fail the broker. Past the connection timeout the start-up fails."""
        retry = KazooRetry(max_tries=-1, max_delay=1.0, deadline=self._connection_timeout_s,
                           sleep_func=self.zk.handler.sleep_func)
        try:
            return retry(fn, *args)
        except RetryFailedError as exc:
            raise MetadataUnavailableError(
                f"lost ZooKeeper at {self._connect} during start-up and could not reconnect "
                f"within {self._connection_timeout_s:.0f} s") from exc

    def _await_stale_registration(self) -> None:
        """A broker restarted right after a crash finds the registration its dead process
        left, held by that process's session until ZooKeeper expires it. The broker holds
        its log directories' locks by now (`LogManager.lock_dirs`), so no live process of
        this broker holds them: wait for that session to expire, at most a session timeout
        and ZooKeeper's expiry tick, then register (`register`). A live broker elsewhere
        with the same node id keeps its session, and `register` then refuses the id."""
        path = zl.broker_path(self.node_id)
        stat = self._at_start(self.zk.exists, path)
        if stat is None:
            return
        wait_s = self._session_timeout_s + _EXPIRY_TICK_S
        log.warning("node id %d is registered at %s by ZooKeeper session 0x%x, not this "
                    "process's (a previous process that did not stop cleanly?): waiting up "
                    "to %.0f s for that session to expire", self.node_id, path,
                    stat.ephemeralOwner, wait_s)
        started = time.monotonic()
        while stat is not None and time.monotonic() - started < wait_s:
            time.sleep(_REGISTRATION_POLL_S)
            stat = self._at_start(self.zk.exists, path)
        if stat is None:
            log.info("the previous registration of node id %d expired after %.1f s",
                     self.node_id, time.monotonic() - started)

    def register(self, endpoint: BrokerEndpoint) -> None:
        """Creates `/brokers/ids/<id>` and starts the watches; `NodeIdInUseError` when a
        live broker holds the id."""
        self._loop = asyncio.get_running_loop()
        self._endpoint = endpoint
        self._at_start(self._register)
        self.zk.add_listener(self._session_changed)
        # The watches retry their reads themselves (kazoo's command retry).
        ChildrenWatch(self.zk, zl.BROKER_IDS, self._brokers_changed)
        DataWatch(self.zk, zl.CONTROLLER, self._controller_changed)
        ChildrenWatch(self.zk, zl.TOPICS, self._topics_changed)
        self._at_start(self._entities.start)

    def _register(self) -> None:
        assert self._endpoint is not None
        path = zl.broker_path(self.node_id)
        try:
            self.zk.create(path, zl.encode_broker(self._endpoint), ephemeral=True,
                           makepath=True)
        except NodeExistsError as exc:
            # Made by this session when an earlier try's answer was lost with the connection.
            stat = self.zk.exists(path)
            if stat is None or stat.ephemeralOwner != self.zk.client_id[0]:
                raise NodeIdInUseError(
                    f"node id {self.node_id} is already registered in ZooKeeper at {path} by "
                    f"a live broker (its session did not expire within the session timeout)"
                ) from exc
        stat = self.zk.exists(path)
        if stat is not None:
            self.broker_epoch = stat.czxid
        log.info("registered broker %d at %s", self.node_id, path)

    def close(self) -> None:
        self._closed = True
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def add_entity_listener(self, listener: EntityListener) -> None:
        self._entity_listeners.append(listener)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._by_id.get(topic_id)

    @property
    def entity_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._entities.view

    # -- the session ----------------------------------------------------------------------
    def _session_changed(self, state: str) -> None:
        # kazoo's connection thread: nothing blocking here.
        if state == KazooState.LOST:
            log.warning("ZooKeeper session of broker %d expired: leading nothing until it "
                        "registers again", self.node_id)
            self._lost = True
            self._post(self._set_fenced, True)
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            threading.Thread(target=self._reregister, daemon=True).start()

    def _set_fenced(self, fenced: bool) -> None:
        if self.fenced != fenced:
            self.fenced = fenced
            self._changed(None)

    def _reregister(self) -> None:
        try:
            self._register()
        except NodeIdInUseError:
            # The old session's node is going; the controller sees the broker return when
            # the next try succeeds.
            log.warning("broker %d: registration still held, retrying", self.node_id)
            threading.Timer(1.0, self._reregister).start()
            return
        except Exception:
            if not self._closed:
                log.exception("broker %d: registering again failed", self.node_id)
                threading.Timer(1.0, self._reregister).start()
            return
        self._post(self._set_fenced, False)

    # -- watches (kazoo's thread): decode, then hand over to the loop ---------------------
    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed() and not self._closed:
            loop.call_soon_threadsafe(fn, *args)

    def _brokers_changed(self, children: list[str]) -> bool:
        found: dict[int, BrokerEndpoint] = {}
        for child in children:
            try:
                data, _ = self.zk.get(f"{zl.BROKER_IDS}/{child}")
            except NoNodeError:
                continue
            found[int(child)] = zl.decode_broker(int(child), data)
        self._post(self._set_brokers, found)
        return not self._closed

    def _controller_changed(self, data: bytes | None, _: ZnodeStat | None) -> bool:
        self._post(self._set_controller, zl.decode_controller(data))
        return not self._closed

    def _topics_changed(self, children: list[str]) -> bool:
        names = set(children)
        with self._lock:
            new = names - self._watched
            self._watched &= names
            self._watched |= new
        for name in sorted(new):
            # The config first (a DataWatch reads its znode and posts at once): a topic
            # must never be seen without its configs. Seen the other way round, a broker
            # briefly described a new compacted topic as `cleanup.policy=delete`, and
            # Kafka Connect's worker that asked then refused to start.
            DataWatch(self.zk, zl.config_path(name), self._config_watch(name))
            DataWatch(self.zk, zl.topic_path(name), self._assignment_watch(name))
        return not self._closed

    def _is_watched(self, name: str) -> bool:
        with self._lock:
            return name in self._watched and not self._closed

    def _assignment_watch(self, name: str) -> Callable[[bytes | None, ZnodeStat | None], bool]:
        def watch(data: bytes | None, _: ZnodeStat | None) -> bool:
            if data is None:
                with self._lock:
                    self._watched.discard(name)
                self._state_watches.forget(name)
                self._post(self._drop_topic, name)
                return False
            assignment = zl.decode_assignment(data)
            self._post(self._set_assignment, name, assignment)
            self._state_watches.watch(TopicPartition(name, p)
                                      for p in sorted(assignment.replicas))
            return self._is_watched(name)
        return watch

    def _state_read(self, key: TopicPartition, state: zl.LeaderAndIsr | None,
                    version: int) -> None:
        # kazoo's completion thread: queued for the loop, which takes all that came at once.
        with self._lock:
            first = not self._arrived
            self._arrived.append((key.topic, key.partition, state or NO_STATE, version))
        if first:
            self._post(self._take_states)

    def _config_watch(self, name: str) -> Callable[[bytes | None, ZnodeStat | None], bool]:
        def watch(data: bytes | None, _: ZnodeStat | None) -> bool:
            if not self._is_watched(name):
                return False
            self._post(self._set_config, name, zl.decode_config(data))
            return True
        return watch

    # -- the view (event loop) ------------------------------------------------------------
    def _set_brokers(self, brokers: dict[int, BrokerEndpoint]) -> None:
        self.brokers = brokers
        self._changed(None)

    def _set_controller(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self._changed(None)

    def _set_assignment(self, name: str, assignment: zl.TopicAssignment) -> None:
        self._assignments[name] = assignment
        self._rebuild(name)

    def _take_states(self) -> None:
        """Applies every state the watches read since the last call, then rebuilds each
        topic they touched once: a failover changes thousands of states within a moment,
        and rebuilding (and serving anew) a topic of a thousand partitions for each of
        them made the loop's work grow with the square of the partitions."""
        with self._lock:
            arrived, self._arrived = self._arrived, []
        touched = {name for name, partition, state, version in arrived
                   if self._keep_state(name, partition, state, version)}
        for name in sorted(touched):
            if name in self._assignments:
                self._rebuild(name)

    def _set_state(self, name: str, partition: int, state: zl.LeaderAndIsr,
                   version: int) -> None:
        if self._keep_state(name, partition, state, version) and name in self._assignments:
            self._rebuild(name)

    def _keep_state(self, name: str, partition: int, state: zl.LeaderAndIsr,
                    version: int) -> bool:
        # A watch reads the znode after it fired, on kazoo's thread: its answer may reach
        # the loop after a newer version this broker wrote itself (`update_isr`). Older
        # versions are dropped, so the ISR a leader applies never goes back.
        key = TopicPartition(name, partition)
        if 0 <= version < self._state_versions.get(key, -1):
            return False
        self._state_versions[key] = version
        self._states[key] = state
        return True

    def _set_config(self, name: str, configs: dict[str, str]) -> None:
        self._configs[name] = configs
        if name in self._assignments:
            self._rebuild(name)

    def _drop_topic(self, name: str) -> None:
        self._assignments.pop(name, None)
        self._configs.pop(name, None)
        for key in [k for k in self._states if k[0] == name]:
            del self._states[key]
        for key in [k for k in self._state_versions if k[0] == name]:
            del self._state_versions[key]
        topic = self.topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
        self._changed(name)

    def _rebuild(self, name: str) -> None:
        assignment = self._assignments[name]
        partitions = []
        for p, replicas in sorted(assignment.replicas.items()):
            s = self._states.get(TopicPartition(name, p), NO_STATE)
            partitions.append(PartitionState(partition=p, leader=s.leader,
                                             leader_epoch=s.leader_epoch,
                                             replicas=list(replicas), isr=list(s.isr)))
        topic = TopicState(name=name, topic_id=assignment.topic_id, partitions=partitions,
                           configs=dict(self._configs.get(name, {})))
        self.topics[name] = topic
        self._by_id[topic.topic_id] = topic
        self._changed(name)

    def _entity_changed(self, path: str) -> None:
        self.version += 1
        for listener in self._entity_listeners:
            listener(path)
        self._wake_waiters()

    def _changed(self, name: str | None) -> None:
        self.version += 1
        for listener in self._listeners:
            listener(name)
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        still = []
        for ready, fut in self._waiters:
            if fut.done():
                continue
            if ready():
                fut.set_result(None)
            else:
                still.append((ready, fut))
        self._waiters = still

    async def _until(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        if ready():
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((ready, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return False
        return True

    # -- changes (ZooKeeper writes in a worker thread) -----------------------------------
    async def _write(self, work: Callable[[], Any]) -> Any:
        return await asyncio.wait_for(asyncio.to_thread(work), self._connection_timeout_s)

    async def create_topic(self, name: str, configs: dict[str, str],
                           assignment: Mapping[int, list[int]],
                           topic_id: uuid.UUID | None = None) -> TopicState:
        tid = topic_id or uuid.uuid4()
        record = zl.TopicAssignment(tid, {p: list(r) for p, r in assignment.items()})

        def write() -> None:
            tx = self.zk.transaction()
            # The config first, as Kafka does: a watcher of the topic finds its config.
            if self.zk.exists(zl.config_path(name)):
                tx.set_data(zl.config_path(name), zl.encode_config(configs))
            else:
                tx.create(zl.config_path(name), zl.encode_config(configs))
            tx.create(zl.topic_path(name), zl.encode_assignment(record))
            results = tx.commit()
            # A failed multi reports the operations before the failing one as rolled back:
            # the failing one says why.
            if any(isinstance(r, NodeExistsError) for r in results):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            for r in results:
                if isinstance(r, Exception):
                    raise r

        await self._write(write)
        await self._until(lambda: name in self.topics, self._connection_timeout_s)
        topic = self.topics.get(name)
        if topic is None:
            raise MetadataUnavailableError(f"topic {name} was written but not seen back")
        return topic

    async def delete_topic(self, name: str) -> None:
        """Queues the deletion; the controller removes the topic's znodes, and each broker
        its files when it sees the topic gone."""
        def write() -> None:
            try:
                self.zk.create(zl.delete_path(name), b"")
            except NodeExistsError:
                pass
        await self._write(write)

    async def add_partitions(self, name: str, assignment: Mapping[int, list[int]]) -> None:
        def write() -> None:
            data, stat = self.zk.get(zl.topic_path(name))
            current = zl.decode_assignment(data)
            grown = dataclasses.replace(current, replicas={**current.replicas, **{
                p: list(r) for p, r in assignment.items()}})
            self.zk.set(zl.topic_path(name), zl.encode_assignment(grown), version=stat.version)

        await self._write(write)
        wanted = max(assignment) + 1
        await self._until(lambda: len(getattr(self.topics.get(name), "partitions", [])) >= wanted,
                          self._connection_timeout_s)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        def write() -> None:
            self.zk.set(zl.config_path(name), zl.encode_config(configs))
        await self._write(write)
        await self._until(lambda: getattr(self.topics.get(name), "configs", None) == configs,
                          self._connection_timeout_s)

    async def alter_entity_configs(self, path: str, changes: Mapping[str, str | None]) -> None:
        written: dict[str, str] = await self._write(lambda: self._entities.write(path, changes))
        await self._until(lambda: dict(self._entities.view.get(path, {})) == written,
                          self._connection_timeout_s)

    async def read_entity_configs(self) -> Mapping[str, Mapping[str, str]]:
        return await asyncio.wait_for(asyncio.to_thread(self._entities.read_all),
                                      self._connection_timeout_s)

    async def read_topic_configs(self, name: str) -> Mapping[str, str] | None:
        def read() -> dict[str, str] | None:
            try:
                return zl.decode_config(self.zk.get(zl.config_path(name))[0])
            except NoNodeError:
                # A topic created without configs by a tool that wrote no config znode.
                return {} if self.zk.exists(zl.topic_path(name)) else None
        return await asyncio.wait_for(asyncio.to_thread(read), self._connection_timeout_s)

    async def allocate_producer_id_block(self, size: int) -> tuple[int, int]:
        def write() -> tuple[int, int]:
            self.zk.ensure_path(zl.PRODUCER_ID_BLOCK)
            while True:  # a conditional write: another broker may take a block meanwhile
                data, stat = self.zk.get(zl.PRODUCER_ID_BLOCK)
                start = zl.decode_producer_id_block_end(data)
                try:
                    self.zk.set(zl.PRODUCER_ID_BLOCK,
                                zl.encode_producer_id_block(self.node_id, start, start + size),
                                version=stat.version)
                except BadVersionError:  # another broker took a block meanwhile
                    continue
                return start, start + size

        result: tuple[int, int] = await self._write(write)
        return result

    async def update_isr(self, name: str, partition: int, leader_epoch: int,
                         isr: list[int]) -> bool:
        """The leader's ISR change, written conditionally on the state znode's version in
        this broker's view: only while that state names this broker as leader at
        `leader_epoch`, and refused if anyone (the controller) wrote it since. A refused
        change is dropped; the leader proposes again once the watch brings the newer state.
        The change reaches every broker through the watches, this one at once."""
        key = TopicPartition(name, partition)
        state, version = self._states.get(key), self._state_versions.get(key, -1)
        if (self.fenced or state is None or version < 0 or state.leader != self.node_id
                or state.leader_epoch != leader_epoch):
            return False
        new = zl.LeaderAndIsr(state.leader, leader_epoch, list(isr), state.controller_epoch)
        path = zl.state_path(name, partition)

        def write() -> int | None:
            # Only replicas of the partition as assigned now may be in its ISR: a replica
            # that a completed reassignment removed may still have fetched under the
            # current epoch. The assignment's version is checked in the same transaction.
            try:
                data, topic = self.zk.get(zl.topic_path(name))
            except NoNodeError:
                return None
            replicas = zl.decode_assignment(data).replicas.get(partition, [])
            if not set(isr) <= set(replicas):
                return None
            t = self.zk.transaction()
            t.check(zl.topic_path(name), topic.version)
            t.set_data(path, zl.encode_state(new), version=version)
            results = t.commit()
            if any(isinstance(r, Exception) for r in results):
                return None
            return int(results[1].version)

        written: int | None = await self._write(write)
        if written is None:
            return False
        if name in self._assignments:
            self._set_state(name, partition, new, written)
        return True

    async def wait(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        return await self._until(ready, timeout_s)
