"""The broker: wiring of metadata, logs, the replica manager, coordinators, the listener and
the background jobs.

Start order: config (TLS contexts are made with the broker, so a bad key stops it before
anything starts) → metadata store → log manager (recovery) → partitions → listeners (one
per entry of `listeners`) → registration with every advertised endpoint.
Stop order is the reverse: stop accepting, answer in-flight requests, close connections,
flush logs, write checkpoints and finally the clean-shutdown marker, so the next start
skips recovery.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path

from ads.broker import config as bconfig
from ads.broker import coordinators
from ads.broker.authentication import Authenticator
from ads.broker.authorized_operations import ALLOW_ALL, OperationsAuthorizer
from ads.broker.configdefs import DEPRECATED_TOPIC_KEYS
from ads.broker.context import TxnRequests
from ads.broker.dispatch import Dispatcher
from ads.broker.fetch_sessions import FetchSessionCache
from ads.broker.handlers import all_handlers
from ads.broker.http.app import OpsHttp, start_ops_http
from ads.broker.listeners import InterBroker, advertised_endpoints, listener_tls
from ads.broker.markers import BrokerMarkerWriter
from ads.broker.metrics import BrokerMetrics
from ads.broker.quotas import ClientQuotas
from ads.broker.settings import (
    cleaner_config_from,
    fetcher_config,
    log_config_from,
    request_settings,
)
from ads.broker.shutdown import controlled_shutdown
from ads.common.clock import Clock, SystemClock
from ads.common.tasks import TaskSet
from ads.controller.controller import Controller
from ads.metadata.acl import AclStore
from ads.metadata.acl_stores import acl_store_for
from ads.metadata.assignment import assign_replicas
from ads.metadata.cache import TopicCache
from ads.metadata.embedded import EmbeddedMetadataStore
from ads.metadata.model import BrokerEndpoint, PartitionState, TopicState
from ads.metadata.store import MetadataStore
from ads.metadata.zookeeper import ZkMetadataStore
from ads.net.limits import ConnectionLimits, parse_overrides
from ads.net.server import KafkaListener
from ads.protocol.messages import MetadataResponse
from ads.replication.fetcher import ReplicaFetcherManager
from ads.replication.replica_manager import ReplicaManager
from ads.security.authorizer import AclAuthorizer, parse_super_users
from ads.storage.cleaner import LogCleaner
from ads.storage.config import LogConfig
from ads.storage.fileio import OS_FILE_IO, FileIO
from ads.storage.manager import LogManager

log = logging.getLogger("ads.broker")

PRODUCER_ID_BLOCK = 1000
# How long admin requests wait for the controller to elect a new topic's leaders, or for a
# deleted topic to go.
LEADER_WAIT_S = 30.0


def _log_failure(what: str) -> Callable[[asyncio.Future[None]], None]:
    """A done-callback that logs the error of a background job nobody awaits."""

    def report(done: asyncio.Future[None]) -> None:
        if not done.cancelled() and done.exception() is not None:
            log.error("%s failed", what, exc_info=done.exception())

    return report


def _rack(config: bconfig.BrokerConfig) -> str | None:
    rack = config.get("broker.rack")
    return str(rack) if rack else None


def _metadata_store(config: bconfig.BrokerConfig, first_dir: Path) -> MetadataStore:
    connect = config.zookeeper_connect
    if connect is None:
        return EmbeddedMetadataStore(first_dir, config.node_id)
    timeout = config.get("zookeeper.connection.timeout.ms")
    return ZkMetadataStore(connect, config.node_id,
                           config.get_int("zookeeper.session.timeout.ms"),
                           timeout if isinstance(timeout, int) else None)


def _connection_limits(config: bconfig.BrokerConfig) -> ConnectionLimits:
    try:
        overrides = parse_overrides(str(config.get("max.connections.per.ip.overrides") or ""))
    except ValueError as exc:
        raise bconfig.ConfigError(
            f"Invalid value for max.connections.per.ip.overrides: {exc}",
            "max.connections.per.ip.overrides") from exc
    return ConnectionLimits(config.get_int("max.connections"),
                            config.get_int("max.connections.per.ip"), overrides,
                            config.get_int("connections.max.idle.ms"))


class Broker:
    def __init__(self, config: bconfig.BrokerConfig, clock: Clock | None = None,
                 file_io: FileIO = OS_FILE_IO) -> None:
        """`file_io`: the file layer the logs write through (tests inject faults with it)."""
        self.config = config
        self.settings = request_settings(config)
        self.clock: Clock = clock or SystemClock()
        self.node_id: int = config.node_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        # ConfigError for SASL settings it cannot serve (a bad JAAS line, GSSAPI, ...)
        self.authenticator = Authenticator(config, lambda: self.metadata.entity_configs)
        self.metadata: MetadataStore = _metadata_store(config, self.log_dirs[0])
        self.metadata.add_listener(self._metadata_changed)
        self.controller: Controller | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.log_manager = LogManager(
            self.log_dirs, clock=self.clock,
            default_config=log_config_from(bconfig.effective_topic_config(config, {})),
            scheduler=self._run_later, file_io=file_io)
        self.replica_manager = ReplicaManager(self.node_id, self._known_partition, self.clock)
        self.replica_manager.isr_writer = self.metadata.update_isr
        self.replica_manager.logs = self.log_manager
        self.fetchers: ReplicaFetcherManager | None = None
        self.metrics = BrokerMetrics()
        self.quotas = ClientQuotas(config.get_int("quota.window.num"),
                                   config.get_int("quota.window.size.seconds"))
        self.metadata.add_entity_listener(
            lambda _path: self.quotas.update(self.metadata.entity_configs))
        self.connection_limits = _connection_limits(config)
        self.dispatcher = Dispatcher(self, all_handlers(config.zookeeper_connect is not None),
                                     self.metrics)
        self.group_coordinator = coordinators.create_group_coordinator(self)
        self.txn_requests: TxnRequests = BrokerMarkerWriter(self)
        self.transaction_coordinator = coordinators.create_transaction_coordinator(self)
        self.coordinator_deadlines: coordinators.DeadlineTimer | None = None
        self.replica_manager.add_leadership_listener(
            lambda topic, index, leader, epoch: coordinators.leadership_changed(
                self, topic, index, leader, epoch))
        # ALLOW_ALL until start-up reads the ACLs, when `authorizer.class.name` is set.
        self.operations_authorizer: OperationsAuthorizer = ALLOW_ALL
        self.acl_store: AclStore | None = None
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots"))
        # One per entry of `listeners`; each knows its name and security protocol.
        self.listeners: list[KafkaListener] = []
        self._tls = {e.listener_name: listener_tls(config, e) for e in config.listener_endpoints}
        self.inter_broker = InterBroker(config, self.metadata)
        self.ops_http: OpsHttp | None = None  # http.listener: metrics, health, console
        self.log_cleaner: LogCleaner | None = None
        self.endpoint = BrokerEndpoint(self.node_id, "127.0.0.1", 0)
        self.bound_address = ("", 0)
        self._tasks = TaskSet(log)  # the scheduled jobs, cancelled when the broker stops
        # Metadata's per-topic response entries (handlers/metadata.py), by topic name.
        self.metadata_entries: TopicCache[MetadataResponse.MetadataResponseTopic] = TopicCache(
            lambda: self.metadata.version)
        # Topics whose new partitions' files are being made in a worker thread.
        self._opening: dict[str, asyncio.Future[None]] = {}
        self._producer_ids: Iterator[int] = iter(())
        # Each topic's configs as last applied to its logs (changes may come from anywhere).
        self._applied_configs: dict[str, dict[str, str]] = {}
        self._deprecated_warned: set[tuple[str, str]] = set()  # (topic, key) logged
        self.started = False
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._lock_and_load()
        await self._start_authorizer()
        self.quotas.update(self.metadata.entity_configs)
        self.log_manager.startup()
        self.fetchers = ReplicaFetcherManager(self.node_id, fetcher_config(self.config),
                                              self.inter_broker.address,
                                              self.inter_broker.ssl_context,
                                              self.inter_broker.authenticate)
        self.replica_manager.fetchers = self.fetchers
        for topic in self.metadata.topics.values():
            self._open_partitions(topic)
        self.coordinator_deadlines = coordinators.start(self)
        bound: dict[str, tuple[str, int]] = {}
        try:
            for endpoint, (host, port) in zip(self.config.listener_endpoints,
                                              self.config.listeners, strict=True):
                tls = self._tls[endpoint.listener_name]
                # One ConnectionLimits for every listener: the limits are the broker's.
                listener = KafkaListener(
                    self.dispatcher, host, port, self.config.socket_request_max_bytes,
                    on_sent=self.dispatcher.metrics.response_sent,
                    listener_name=endpoint.listener_name,
                    security_protocol=endpoint.security_protocol,
                    limits=self.connection_limits,
                    sasl_max_receive_size=self.config.get_int("sasl.server.max.receive.size"),
                    ssl_context=tls.context if tls else None,
                    principal_of=tls.principal_of if tls else None)
                bound[endpoint.listener_name] = await listener.start()
                self.listeners.append(listener)
            self.bound_address = bound[self.config.listener_endpoints[0].listener_name]
            http_listener = self.config.get("http.listener")
            if http_listener:  # before registering: /readyz answers 503 until it serves
                self.ops_http = await start_ops_http(
                    self, str(http_listener), self.config.get_int("console.sample.interval.ms"),
                    self.config.get_bool("console.read.only"))
        except OSError:
            await self._close_listeners()
            coordinators.stop(self, self.coordinator_deadlines)
            self.log_manager.shutdown()
            self.metadata.close()
            raise
        advertised = advertised_endpoints(self.config, bound)
        self.endpoint = BrokerEndpoint(self.node_id, advertised[0].host, advertised[0].port,
                                       _rack(self.config), advertised)
        self.started = True
        try:
            self.metadata.register(self.endpoint)
        except Exception:
            self.started = False
            await self._close_listeners()
            if self.ops_http is not None:
                await self.ops_http.stop()
            self._tasks.cancel()
            coordinators.stop(self, self.coordinator_deadlines)
            self.log_manager.shutdown()
            self.metadata.close()
            raise
        if isinstance(self.metadata, ZkMetadataStore):
            self.controller = Controller(
                self.metadata.zk, self.node_id,
                auto_rebalance=self.config.get_bool("auto.leader.rebalance.enable"),
                imbalance_check_interval_s=float(
                    self.config.get_int("leader.imbalance.check.interval.seconds")),
                imbalance_percentage=self.config.get_int("leader.imbalance.per.broker.percentage"),
                unclean_default=self.config.get_bool("unclean.leader.election.enable"))
            self.controller.start()
        self._schedule_periodic_tasks()
        self.log_cleaner = LogCleaner(
            self.log_manager, cleaner_config_from(self.config), clock=self.clock,
            submit_to_owner=asyncio.get_running_loop().call_soon_threadsafe)
        self.log_cleaner.startup()
        log.info("ADS broker %d listening on %s (advertised %s), data in %s",
                 self.node_id, ", ".join(f"{h}:{p} ({n})" for n, (h, p) in bound.items()),
                 ", ".join(e.url for e in advertised), ", ".join(str(d) for d in self.log_dirs))

    def _schedule_periodic_tasks(self) -> None:
        """Retention, ISR expiration, flushes, offset checkpoints, producer expiration."""
        self.schedule("log-retention", self.config.get_int("log.retention.check.interval.ms"),
                      self._retention)
        lag_ms = self.config.get_int("replica.lag.time.max.ms")
        self.schedule("isr-expiration", lag_ms // 2,
                      lambda: self.replica_manager.shrink_isrs(lag_ms))
        self.schedule("log-flush", self.config.get_int("log.flush.scheduler.interval.ms"),
                      self._flush, off_loop=True)
        self.schedule("checkpoint", self.config.get_int("log.flush.offset.checkpoint.interval.ms"),
                      self.log_manager.checkpoint, off_loop=True)
        expiration_ms = self.config.get_int("producer.id.expiration.ms")
        self.schedule("producer-expiration",
                      self.config.get_int("producer.id.expiration.check.interval.ms"),
                      lambda: self.log_manager.remove_expired_producers(
                          self.clock.time_ms(), expiration_ms))

    async def _start_authorizer(self) -> None:
        """Reads the ACLs before the listener opens: no request is decided without them."""
        if not self.config.get("authorizer.class.name"):
            return
        self.acl_store = acl_store_for(self.metadata, asyncio.get_running_loop())
        await asyncio.to_thread(self.acl_store.start)
        self.operations_authorizer = AclAuthorizer(
            self.acl_store, parse_super_users(str(self.config.get("super.users") or "")),
            self.config.get_bool("allow.everyone.if.no.acl.found"))
        log.info("authorizer %s on; super users: %s", self.config.get("authorizer.class.name"),
                 self.config.get("super.users") or "none")

    async def _lock_and_load(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        # Locked first: the ZooKeeper store's load may wait out a registration a dead
        # process of this broker left, which it may take for dead only with them locked.
        self.log_manager.lock_dirs()
        try:
            await asyncio.to_thread(self.metadata.load)
        except BaseException:
            self.log_manager.unlock_dirs()
            raise

    async def stop(self) -> None:
        if not self.started or self._stopping:
            return
        self._stopping = True
        metadata = self.metadata
        if self.fetchers is not None:
            # First, as Kafka's StopReplica would: a leaving follower still fetching could
            # rejoin the ISRs the controlled shutdown takes it out of, and acks=all would
            # then wait for a broker that is gone.
            await self.fetchers.shutdown()
        if (isinstance(metadata, ZkMetadataStore) and not metadata.fenced
                and self.config.get_bool("controlled.shutdown.enable")):
            # While this broker still serves: clients keep their connections until the
            # leaders have moved.
            await controlled_shutdown(self.config, metadata, self.node_id,
                                      metadata.broker_epoch, self.inter_broker)
        self.started = False
        for listener in self.listeners:
            listener.stop_accepting()
        if self.ops_http is not None:
            await self.ops_http.stop()
        await asyncio.gather(*(listener.drain(grace_s=5.0) for listener in self.listeners))
        self.connection_limits.stop()
        for task in self._opening.values():
            task.cancel()
        await self._tasks.close()
        await asyncio.gather(*self._opening.values(), return_exceptions=True)
        coordinators.stop(self, self.coordinator_deadlines)
        await self.txn_requests.close()
        if self.controller is not None:
            await asyncio.to_thread(self.controller.stop)
        await asyncio.to_thread(self.metadata.close)
        if self.log_cleaner is not None:
            # Off the loop: a cleaner thread may be waiting for the loop to swap segments in.
            await asyncio.to_thread(self.log_cleaner.shutdown)
        self.log_manager.shutdown()
        log.info("ADS broker %d stopped cleanly", self.node_id)

    async def _close_listeners(self) -> None:
        """A failed start: the listeners already started close without serving."""
        for listener in self.listeners:
            listener.stop_accepting()
        await asyncio.gather(*(listener.drain(grace_s=0.0) for listener in self.listeners))

    def spawn(self, work: Coroutine[object, object, None], what: str = "a background job"
              ) -> None:
        """Runs `work` on the broker's loop (a failure is logged); it is cancelled when the
        broker stops."""
        self._tasks.spawn(work, what)

    def schedule(self, name: str, interval_ms: int, job: Callable[[], object],
                 off_loop: bool = False) -> None:
        """Runs `job` every `interval_ms` until the broker stops: on the broker's loop, or
        in a worker thread when it waits on disks (`off_loop`, DESIGN rule 6)."""
        interval = max(interval_ms, 10) / 1000.0
        max_interval = 3600.0

        async def loop() -> None:
            while True:
                await asyncio.sleep(min(interval, max_interval))
                try:
                    if off_loop:
                        await asyncio.to_thread(job)
                    else:
                        job()
                except Exception:
                    log.exception("background job %s failed", name)

        self.spawn(loop(), f"background job {name}")

    def _run_later(self, delay_ms: int, job: Callable[[], None]) -> None:
        """The logs' scheduler: runs `job` in a worker thread after `delay_ms` (the fsync
        after a segment roll, removing deleted files after `file.delete.delay.ms`), never on
        the event loop. Callable from any thread; before start, `job` runs at once."""
        loop = self._loop
        if loop is None or loop.is_closed():
            job()
            return

        def submit() -> None:
            if self.started:
                loop.run_in_executor(None, job).add_done_callback(_log_failure("storage job"))

        loop.call_soon_threadsafe(loop.call_later, max(delay_ms, 0) / 1000.0, submit)

    def _retention(self) -> None:
        self.log_manager.cleanup(self.clock.time_ms())

    def _flush(self) -> None:
        self.log_manager.flush_dirty(self.clock.time_ms())

    # -- topics ------------------------------------------------------------------------
    def topic_log_config(self, topic: TopicState) -> LogConfig:
        self._warn_deprecated(topic)
        return log_config_from(bconfig.effective_topic_config(self.config, topic.configs))

    def _known_partition(self, name: str, index: int) -> bool:
        topic = self.metadata.topics.get(name)
        return topic is not None and 0 <= index < len(topic.partitions)

    def _metadata_changed(self, name: str | None) -> None:
        """The store's listener (event loop): serve what the metadata says this broker
        holds, in the role it says, and drop what it no longer holds."""
        if not self.started:
            return
        names = [name] if name is not None else [*self.metadata.topics, *self._served_topics()]
        for topic_name in dict.fromkeys(names):
            topic = self.metadata.topics.get(topic_name)
            if topic is None:
                self._drop_topic(topic_name)
            elif any(self.replica_manager.get(topic_name, p.partition) is None
                     and self.node_id in p.replicas for p in topic.partitions):
                self.open_in_background(topic)
            else:
                self._open_partitions(topic)
            if topic is not None and self._applied_configs.get(topic_name) != topic.configs:
                self._applied_configs[topic_name] = dict(topic.configs)
                self._apply_topic_config(topic_name)

    def _served_topics(self) -> set[str]:
        return {part.topic for part in self.replica_manager}

    def _drop_topic(self, name: str) -> None:
        self.replica_manager.drop_topic(name)
        self.metrics.forget_topic(name)
        self._deprecated_warned = {w for w in self._deprecated_warned if w[0] != name}
        log.info("deleted topic %s", name)

    def _warn_deprecated(self, topic: TopicState) -> None:
        """Once per topic and key: a deprecated key Kafka 3.x ignores is set."""
        for key, reason in DEPRECATED_TOPIC_KEYS.items():
            if key in topic.configs and (topic.name, key) not in self._deprecated_warned:
                self._deprecated_warned.add((topic.name, key))
                log.warning("Topic configuration %s with value `%s` is ignored for `%s`: %s. "
                            "This configuration is deprecated (Kafka 4.0 removed it).",
                            key, topic.configs[key], topic.name, reason)

    def _open_partitions(self, topic: TopicState) -> None:
        self.replica_manager.apply_topic(topic, self.topic_log_config(topic),
                                         self.metadata.fenced)

    async def record_topic(self, name: str, num_partitions: int, configs: dict[str, str],
                           replication_factor: int = 1,
                           assignment: Mapping[int, list[int]] | None = None,
                           topic_id: uuid.UUID | None = None) -> TopicState:
        """Puts a new topic in the metadata with its replicas placed over the live brokers
        (or as `assignment` says); `open_new` then waits until it is served."""
        if assignment is None:
            assignment = assign_replicas(list(self.metadata.brokers.values()), num_partitions,
                                         replication_factor)
        topic = await self.metadata.create_topic(name, configs, assignment, topic_id)
        log.info("created topic %s with %d partitions (id %s, configs %s)",
                 name, len(assignment), topic.topic_id, configs)
        return topic

    async def open_new(self, topic: TopicState) -> None:
        """Waits until the topic's partitions are served: here, this broker's replicas'
        files are made in a worker thread, and every partition has a leader.

        Making a partition costs a directory and checkpoint fsyncs (a 1,000-partition topic
        took seconds), and the event loop must not wait on disks (DESIGN rule 6). Meanwhile
        the topic is in the metadata and its unserved partitions answer
        LEADER_NOT_AVAILABLE in Metadata, as a new topic's do in Kafka until its leaders are
        elected. The work belongs to the broker, not to the request that asked for it: a
        client that drops its connection cancels its wait, not the opening.
        """
        opening = self._opening.get(topic.name)
        if opening is None and any(
                self.replica_manager.get(topic.name, p.partition) is None
                and self.node_id in p.replicas for p in topic.partitions):
            opening = self._start_opening(topic)
        if opening is not None:
            await asyncio.shield(opening)
        await self.metadata.wait(lambda: self._led(topic.name), LEADER_WAIT_S)

    def _led(self, name: str) -> bool:
        topic = self.metadata.topics.get(name)
        return topic is None or all(p.leader >= 0 for p in topic.partitions)

    def open_in_background(self, topic: TopicState) -> None:
        """Makes this broker's new replicas of the topic without waiting for them."""
        self._start_opening(topic).add_done_callback(
            _log_failure(f"making the partitions of topic {topic.name}"))

    def opening(self, name: str) -> bool:
        """Whether the topic's new partitions' files are being made."""
        return name in self._opening

    def _start_opening(self, topic: TopicState) -> asyncio.Future[None]:
        # Openings of one topic run one after another, each after the one before it.
        previous = self._opening.get(topic.name)
        task = asyncio.ensure_future(self._make_and_serve(topic.name, previous))
        self._opening[topic.name] = task

        def forget(done: asyncio.Future[None]) -> None:
            if self._opening.get(topic.name) is done:
                del self._opening[topic.name]

        task.add_done_callback(forget)
        return task

    async def _make_and_serve(self, name: str, previous: asyncio.Future[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        topic = self.metadata.topics.get(name)
        if topic is None:
            return
        todo = [p for p in topic.partitions if self.node_id in p.replicas
                and self.replica_manager.get(name, p.partition) is None]
        if todo:
            await asyncio.to_thread(self._make_logs, name, todo, self.topic_log_config(topic))
        topic = self.metadata.topics.get(name)  # the newest state: it may have moved on
        if topic is not None:
            self._open_partitions(topic)
        else:  # deleted while its files were made
            for p in todo:
                self.log_manager.delete_log(name, p.partition)

    def _make_logs(self, name: str, partitions: list[PartitionState], cfg: LogConfig) -> None:
        # Worker thread: only the log manager (thread-safe) and the new logs are touched.
        for p in partitions:
            plog = self.log_manager.create_log(name, p.partition, cfg)
            # As Partition would on the loop: the epoch checkpoint's fsync happens here.
            if p.leader == self.node_id and (
                    plog.latest_epoch is None or plog.latest_epoch < p.leader_epoch):
                plog.assign_epoch(p.leader_epoch, plog.log_end_offset)

    async def delete_topic(self, name: str) -> None:
        """Deletes the topic everywhere; returns when this broker sees it gone."""
        await self.metadata.delete_topic(name)
        await self.metadata.wait(lambda: name not in self.metadata.topics, LEADER_WAIT_S)

    async def record_partitions(self, name: str, total: int,
                                assignment: Mapping[int, list[int]] | None = None
                                ) -> TopicState:
        """Grows a topic in the metadata; `open_new` then serves the new partitions."""
        topic = self.metadata.topics[name]
        if assignment is None:
            rf = len(topic.partitions[0].replicas) if topic.partitions else 1
            assignment = assign_replicas(list(self.metadata.brokers.values()),
                                         total - len(topic.partitions), rf,
                                         first_partition=len(topic.partitions))
        await self.metadata.add_partitions(name, assignment)
        return self.metadata.topics[name]

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Sets the topic's configs; the logs take them when the metadata reports it."""
        await self.metadata.set_topic_configs(name, configs)

    def _apply_topic_config(self, name: str) -> None:
        topic = self.metadata.topics.get(name)
        if topic is None:
            return
        cfg = self.topic_log_config(topic)
        self.log_manager.update_config(name, cfg)
        self.replica_manager.update_config(name, cfg)

    async def next_producer_id(self) -> int:
        pid = next(self._producer_ids, None)
        if pid is None:
            start, end = await self.metadata.allocate_producer_id_block(PRODUCER_ID_BLOCK)
            self._producer_ids = iter(range(start, end))
            pid = next(self._producer_ids)
        return pid
