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
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path

from ads.broker import config as bconfig
from ads.broker import coordinators, group_configs
from ads.broker.authentication import Authenticator
from ads.broker.authorized_operations import ALLOW_ALL, OperationsAuthorizer
from ads.broker.context import ShareStates, TxnRequests
from ads.broker.dispatch import Dispatcher
from ads.broker.fetch_sessions import FetchSessionCache
from ads.broker.handlers import all_handlers
from ads.broker.http.app import OpsHttp, start_ops_http
from ads.broker.kraft_channel import check_controller_listener, connect_controller
from ads.broker.listeners import InterBroker, advertised_endpoints, listener_tls
from ads.broker.markers import BrokerMarkerWriter
from ads.broker.metrics import BrokerMetrics
from ads.broker.quotas import ClientQuotas
from ads.broker.settings import (
    cleaner_config_from,
    fetcher_config,
    log_config_from,
    request_settings,
    share_config,
)
from ads.broker.share_partitions import SharePartitionManager
from ads.broker.share_sessions import ShareSessionCache
from ads.broker.share_state import ShareStatePersister
from ads.broker.shutdown import controlled_shutdown
from ads.broker.topic_admin import TopicAdmin, log_failure
from ads.common.clock import Clock, SystemClock
from ads.common.tasks import TaskSet
from ads.controller.controller import Controller
from ads.metadata.acl import AclStore
from ads.metadata.acl_stores import acl_store_for
from ads.metadata.cache import TopicCache
from ads.metadata.embedded import EmbeddedMetadataStore
from ads.metadata.entity_config import BROKERS, broker_entity_path
from ads.metadata.kraft import KRaftMetadataStore, KRaftSettings
from ads.metadata.kraft_quorum import parse_bootstrap
from ads.metadata.model import BrokerEndpoint
from ads.metadata.store import MetadataStore
from ads.metadata.zookeeper import ZkMetadataStore
from ads.net.limits import ConnectionLimits, parse_overrides
from ads.net.server import KafkaListener
from ads.protocol.messages import MetadataResponse
from ads.replication.fetcher import ReplicaFetcherManager
from ads.replication.replica_manager import RackAwareReplicaSelector, ReplicaManager
from ads.security.authorizer import AclAuthorizer, parse_super_users
from ads.storage.cleaner import LogCleaner
from ads.storage.fileio import OS_FILE_IO, FileIO
from ads.storage.manager import LogManager
from ads.storage.open_files import default_limit, process_limit

log = logging.getLogger("ads.broker")

PRODUCER_ID_BLOCK = 1000

def _rack(config: bconfig.BrokerConfig) -> str | None:
    rack = config.get("broker.rack")
    return str(rack) if rack else None


def _open_files_limit(config: bconfig.BrokerConfig) -> int:
    """`log.open.files.max`, or half the process's open-file limit for 0; more than that
    limit could never be open, which start-up says (`ads.storage.open_files`)."""
    configured = config.get_int("log.open.files.max")
    if configured == 0:
        return default_limit()
    if configured > process_limit():
        raise bconfig.ConfigError(
            f"log.open.files.max={configured} exceeds the process's open-file limit "
            f"{process_limit()} (ulimit -n); raise that or lower this")
    return configured


def kraft_broker(config: bconfig.BrokerConfig) -> bool:
    """`process.roles=broker`: the broker of a cluster run by KRaft controllers. Any list with
    `controller` is left as ADS always took it (embedded or ZooKeeper): ADS does not run
    the controller role."""
    roles = config.get("process.roles")
    return isinstance(roles, list) and [r.strip() for r in roles] == ["broker"]


def _kraft_store(config: bconfig.BrokerConfig) -> KRaftMetadataStore:
    if config.zookeeper_connect is not None:
        raise bconfig.ConfigError("process.roles=broker (KRaft) and zookeeper.connect "
                                  "cannot both be set", key="process.roles")
    check_controller_listener(config)
    servers, voters = config.get("controller.quorum.bootstrap.servers"), config.get(
        "controller.quorum.voters")
    try:
        bootstrap = parse_bootstrap(servers if isinstance(servers, list) else [],
                                    voters if isinstance(voters, list) else [])
    except ValueError as exc:
        raise bconfig.ConfigError(f"process.roles=broker needs the controllers: {exc}",
                                  key="controller.quorum.bootstrap.servers") from exc
    return KRaftMetadataStore(
        KRaftSettings(config.node_id, tuple(bootstrap), tuple(config.log_dirs),
                      heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
                      request_timeout_ms=config.get_int("controller.quorum.request.timeout.ms"),
                      registration_timeout_ms=config.get_int(
                          "initial.broker.registration.timeout.ms")),
        connect_controller)


def _metadata_store(config: bconfig.BrokerConfig, first_dir: Path) -> MetadataStore:
    if kraft_broker(config):
        return _kraft_store(config)
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
        self.config = config  # with the dynamic configs over it (`_apply_dynamic_configs`)
        self._static_config = config
        self.settings = request_settings(config)
        self.clock: Clock = clock or SystemClock()
        self.node_id: int = config.node_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        # ConfigError for SASL settings it cannot serve (a bad JAAS line, GSSAPI, ...)
        self.authenticator = Authenticator(config, lambda: self.metadata.entity_configs)
        self.metadata: MetadataStore = _metadata_store(config, self.log_dirs[0])
        self.controller: Controller | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.log_manager = LogManager(
            self.log_dirs, clock=self.clock,
            default_config=log_config_from(bconfig.effective_topic_config(config, {})),
            scheduler=self._run_later, file_io=file_io,
            open_files_limit=_open_files_limit(config))
        self.replica_manager = ReplicaManager(self.node_id, self._known_partition, self.clock)
        self.replica_manager.isr_writer = self.metadata.update_isr
        self.metrics = BrokerMetrics()
        self.topics = TopicAdmin(self.node_id, self.metadata, self.replica_manager,
                                 self.log_manager, lambda: self.config, self.metrics)
        self.metadata.add_listener(self.topics.metadata_changed)
        self.replica_manager.logs = self.log_manager
        if str(config.get("replica.selector.class")).endswith(".RackAwareReplicaSelector"):
            self.replica_manager.replica_selector = RackAwareReplicaSelector(self._rack_of)
        self.fetchers: ReplicaFetcherManager | None = None
        self.quotas = ClientQuotas(config.get_int("quota.window.num"),
                                   config.get_int("quota.window.size.seconds"))
        self.metadata.add_entity_listener(self._entity_configs_changed)
        self.connection_limits = _connection_limits(config)
        self.dispatcher = Dispatcher(
            self, all_handlers(config.zookeeper_connect is not None, len(self.log_dirs),
                               share=config.get_bool("group.share.enable")),
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
        self.share_coordinator = coordinators.create_share_coordinator(self)
        self.share_state: ShareStates = ShareStatePersister(self)
        self.share_partitions = SharePartitionManager(
            self.replica_manager, share_config(config),
            str(config.get("group.share.auto.offset.reset")), self.clock, self.share_state,
            group_configs.own_settings(config, lambda: self.metadata.entity_configs))
        self.share_sessions = ShareSessionCache(
            self.clock, config.get_int("group.share.session.timeout.ms"),
            self.share_partitions.member_left)
        self.replica_manager.add_leadership_listener(self.share_partitions.leadership_changed)
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
        self._producer_ids: Iterator[int] = iter(())
        self.started = False
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._lock_and_load()
        await self._start_authorizer()
        self.quotas.update(self.metadata.entity_configs)
        self._apply_dynamic_configs()
        self.log_manager.startup()
        self.fetchers = ReplicaFetcherManager(self.node_id, fetcher_config(self.config),
                                              self.inter_broker.address,
                                              self.replica_manager,
                                              self.inter_broker.ssl_context,
                                              self.inter_broker.authenticate)
        self.replica_manager.fetchers = self.fetchers
        self.topics.serve_all()
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
        self.started = self.topics.active = True
        try:
            self.metadata.register(self.endpoint)
        except Exception:
            self.started = self.topics.active = False
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
        if isinstance(metadata, KRaftMetadataStore):
            # As for ZooKeeper, while still serving; the controller moves the leaders.
            await metadata.shut_down(self.config.get_bool("controlled.shutdown.enable"),
                                     self.config.get_int("controller.socket.timeout.ms") / 1000)
        self.started = self.topics.active = False
        for listener in self.listeners:
            listener.stop_accepting()
        if self.ops_http is not None:
            await self.ops_http.stop()
        await asyncio.gather(*(listener.drain(grace_s=5.0) for listener in self.listeners))
        self.connection_limits.stop()
        await asyncio.gather(self._tasks.close(), self.topics.close())
        coordinators.stop(self, self.coordinator_deadlines)
        await self.txn_requests.close()
        await self.share_partitions.close()
        await self.share_state.close()
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
                loop.run_in_executor(None, job).add_done_callback(log_failure("storage job"))

        loop.call_soon_threadsafe(loop.call_later, max(delay_ms, 0) / 1000.0, submit)

    def _retention(self) -> None:
        self.log_manager.cleanup(self.clock.time_ms())

    def _flush(self) -> None:
        self.log_manager.flush_dirty(self.clock.time_ms())

    def _rack_of(self, node_id: int) -> str | None:
        broker = self.metadata.brokers.get(node_id)
        return None if broker is None else broker.rack

    # -- dynamic configs (KIP-226) -------------------------------------------------------
    def _entity_configs_changed(self, path: str) -> None:
        if path.startswith(f"{BROKERS}/"):
            self._apply_dynamic_configs()
        else:
            self.quotas.update(self.metadata.entity_configs)

    def _apply_dynamic_configs(self) -> None:
        """Lays the cluster's and this broker's dynamic configs over the static ones and
        hands every topic's log the defaults that changed with them."""
        view = self.metadata.entity_configs
        try:
            config = self._static_config.with_dynamic(
                view.get(broker_entity_path(None), {}),
                view.get(broker_entity_path(self.node_id), {}))
        except bconfig.ConfigError as exc:
            log.warning("dynamic broker configs not applied, the previous ones stay: %s", exc)
            return
        src = bconfig.ConfigSource
        layers = (src.DYNAMIC_DEFAULT_BROKER_CONFIG, src.DYNAMIC_BROKER_CONFIG)
        if all(config.dynamic(s) == self.config.dynamic(s) for s in layers):
            return
        self.config = config
        self.settings = request_settings(config)
        self.log_manager.default_config = log_config_from(
            bconfig.effective_topic_config(config, {}))
        for name in list(self.metadata.topics):
            self.topics.apply_config(name)
        log.info("dynamic broker configs: cluster default %s, this broker %s",
                 config.dynamic(src.DYNAMIC_DEFAULT_BROKER_CONFIG),
                 config.dynamic(src.DYNAMIC_BROKER_CONFIG))

    def _known_partition(self, name: str, index: int) -> bool:
        topic = self.metadata.topics.get(name)
        return topic is not None and 0 <= index < len(topic.partitions)

    # -- producer ids --------------------------------------------------------------------
    async def next_producer_id(self) -> int:
        pid = next(self._producer_ids, None)
        if pid is None:
            start, end = await self.metadata.allocate_producer_id_block(PRODUCER_ID_BLOCK)
            self._producer_ids = iter(range(start, end))
            pid = next(self._producer_ids)
        return pid
