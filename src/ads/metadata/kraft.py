"""The KRaft metadata store: a broker of a cluster whose controllers are a KRaft quorum
(Apache Kafka 4.x controllers, `process.roles=controller`).

What it does, in the order a broker starts:
1. `load` reads `meta.properties` from each log directory, if there: the cluster id, the
   node id (which must be this broker's) and the directory id. Kafka's `kafka-storage
   format` writes the same file, so a directory formatted by it is read as is.
2. `register` (the broker listens by then) starts two tasks on the broker's loop:
   - the log follower (`kraft_quorum.LogFollower`) reads `__cluster_metadata` from the
     quorum leader and applies its committed records to the image
     (`kraft_image.MetadataImage`), then tells the listeners which topics changed;
   - the lifecycle (`kraft_lifecycle.BrokerLifecycle`) registers the broker and keeps its
     lease with heartbeats. A broker started without `meta.properties` first asks the
     controller for the cluster id (DescribeCluster) and writes the files, with a new
     directory id per log directory.
3. Until the controller says this broker has caught up with the log, `fenced` is True: the
   replica manager leads nothing from a stale view of the log read so far.

Changes go to the active controller as Kafka's brokers send them: CreateTopics (with the
replica assignment ADS chose), DeleteTopics, CreatePartitions, IncrementalAlterConfigs
(topic, broker and group configs), AlterClientQuotas, AlterPartition for ISR changes and
AllocateProducerIds; ACL changes go as CreateAcls and DeleteAcls (`acl_stores`). The
store answers once the record the controller wrote has come back through the log, so a
caller sees its own change.

Not done yet: SCRAM credentials changed through this broker; TLS and SASL to the
controllers.

The store's state is owned by the broker's event loop; `close` may be called from a worker
thread.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path

from ads.common.files import atomic_write
from ads.metadata.entity_config import BROKERS, DEFAULT, GROUPS, desanitize, parse_entity_path
from ads.metadata.kraft_image import Changes, MetadataImage
from ads.metadata.kraft_lifecycle import (
    BrokerLifecycle,
    ControllerChannel,
    LifecycleSettings,
    State,
)
from ads.metadata.kraft_log import MetadataBatch
from ads.metadata.kraft_quorum import (
    ConnectController,
    FollowerSettings,
    LogFollower,
    Quorum,
)
from ads.metadata.model import BrokerEndpoint, TopicState, decode_topic_id, encode_topic_id
from ads.metadata.store import (
    EntityListener,
    MetadataListener,
    MetadataRequestError,
    MetadataUnavailableError,
    TopicExistsError,
)
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.errors import ErrorCode
from ads.protocol.types import ZERO_UUID

log = logging.getLogger("ads.metadata.kraft")

META_PROPERTIES = "meta.properties"
CONTROLLER_ENDPOINTS = 2  # DescribeCluster's endpoint type for controllers (KIP-919)
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
REQUEST_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class KRaftSettings:
    node_id: int
    bootstrap: tuple[tuple[str, int], ...]
    log_dirs: tuple[Path, ...]
    heartbeat_interval_ms: int = 2000  # broker.heartbeat.interval.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    fetch_max_wait_ms: int = 500
    registration_timeout_ms: int = 60_000  # initial.broker.registration.timeout.ms
    # How long a change waits to come back through the metadata log.
    change_timeout_s: float = 30.0


def _read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


class KRaftMetadataStore:
    """Cluster model of a broker whose metadata comes from a KRaft controller quorum."""

    def __init__(self, settings: KRaftSettings, connect: ConnectController) -> None:
        self.node_id = settings.node_id
        self.cluster_id = ""
        self._settings = settings
        self._connect = connect
        self._image = MetadataImage()
        self._directory_ids: dict[Path, uuid.UUID] = {}
        self.version = 0
        self.controller_id = -1
        self.fenced = True
        self._listeners: list[MetadataListener] = []
        self._entity_listeners: list[EntityListener] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._quorum = Quorum(list(settings.bootstrap))
        request_timeout_s = settings.request_timeout_ms / 1000
        self._follower = LogFollower(
            self._quorum, connect,
            FollowerSettings(settings.node_id, self._directory_id, request_timeout_s,
                             settings.fetch_max_wait_ms),
            lambda: self.cluster_id or None, self._apply, self._replace)
        self._channel = ControllerChannel(self._quorum, connect, request_timeout_s)
        self._lifecycle: BrokerLifecycle | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the model, as the broker reads it ---------------------------------------------------
    @property
    def topics(self) -> Mapping[str, TopicState]:
        return self._image.topics

    @property
    def brokers(self) -> Mapping[int, BrokerEndpoint]:
        return self._image.unfenced_brokers()

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def broker_epoch(self) -> int:
        return -1 if self._lifecycle is None else self._lifecycle.broker_epoch

    @property
    def metadata_offset(self) -> int:
        """Offset of the last metadata record applied (-1: none yet)."""
        return self._follower.applied_offset

    @property
    def entity_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._image.entity_configs

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._image.by_id.get(topic_id)

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def add_entity_listener(self, listener: EntityListener) -> None:
        self._entity_listeners.append(listener)

    async def read_entity_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self.entity_configs

    async def read_topic_configs(self, name: str) -> Mapping[str, str] | None:
        topic = self._image.topics.get(name)
        return None if topic is None else topic.configs

    # -- start and stop ----------------------------------------------------------------------
    def load(self) -> None:
        """Reads `meta.properties` where the log directories have one (may block)."""
        cluster_ids = set()
        for directory in self._settings.log_dirs:
            path = directory / META_PROPERTIES
            if not path.exists():
                continue
            props = _read_properties(path)
            if props.get("node.id") not in (None, str(self.node_id)):
                raise MetadataUnavailableError(
                    f"{path} is for node {props.get('node.id')}, not {self.node_id}")
            if "cluster.id" in props:
                cluster_ids.add(props["cluster.id"])
            if "directory.id" in props:
                self._directory_ids[directory] = decode_topic_id(props["directory.id"])
        if len(cluster_ids) > 1:
            raise MetadataUnavailableError(
                f"the log directories belong to different clusters: {sorted(cluster_ids)}")
        if cluster_ids:
            self.cluster_id = cluster_ids.pop()

    def _directory_id(self) -> uuid.UUID:
        first = self._settings.log_dirs[0] if self._settings.log_dirs else None
        return self._directory_ids.get(first, ZERO_UUID) if first is not None else ZERO_UUID

    def _write_meta_properties(self) -> None:
        for directory in self._settings.log_dirs:
            directory_id = self._directory_ids.setdefault(directory, uuid.uuid4())
            path = directory / META_PROPERTIES
            if path.exists():
                continue
            text = (f"cluster.id={self.cluster_id}\ndirectory.id={encode_topic_id(directory_id)}\n"
                    f"node.id={self.node_id}\nversion=1\n")
            atomic_write(path, text.encode())

    def register(self, endpoint: BrokerEndpoint) -> None:
        """Starts following the log and the registration (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._lifecycle = BrokerLifecycle(
            self._channel,
            LifecycleSettings(self.node_id, self._settings.heartbeat_interval_ms / 1000),
            lambda: self.cluster_id, lambda: tuple(self._directory_ids.values()),
            lambda: self._follower.applied_offset, self._caught_up)
        self._lifecycle.endpoint = endpoint
        self._tasks = [self._loop.create_task(self._run_lifecycle(), name="kraft-lifecycle"),
                       self._loop.create_task(self._supervised(self._follower.run(),
                                                               "metadata log follower"),
                                              name="kraft-follower")]

    async def _supervised(self, work: Coroutine[object, object, None], what: str) -> None:
        """Runs `work`; a failure is logged (it ends only what it owns), never raised."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the %s failed; this broker no longer follows the cluster", what)

    async def _run_lifecycle(self) -> None:
        assert self._lifecycle is not None
        if not self.cluster_id or len(self._directory_ids) < len(self._settings.log_dirs):
            await self._supervised(self._learn_cluster_id(), "cluster id lookup")
            if not self.cluster_id:
                return
        await self._supervised(self._lifecycle.run(), "broker registration")

    async def _learn_cluster_id(self) -> None:
        """Asks the quorum for the cluster id, then writes `meta.properties`, retrying with
        a backoff until a controller answers."""
        backoff = 0.1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.registration_timeout_ms / 1000
        while not self.cluster_id:
            if loop.time() > deadline:
                log.error("no controller answered within initial.broker.registration."
                          "timeout.ms (%d ms): this broker stays out of the cluster",
                          self._settings.registration_timeout_ms)
                return
            try:
                response = await self._channel.send(
                    m.DescribeClusterRequest.API_KEY, 1,
                    m.DescribeClusterRequest(endpoint_type=CONTROLLER_ENDPOINTS))
                assert isinstance(response, m.DescribeClusterResponse)
                if response.error_code == ErrorCode.NONE:
                    self.cluster_id = response.cluster_id
                    break
                log.warning("DescribeCluster to the controller: %s",
                            ErrorCode(response.error_code).name)
            except MetadataUnavailableError as exc:
                log.info("cannot ask the controller for the cluster id yet (%s)", exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
        await asyncio.to_thread(self._write_meta_properties)
        log.info("joined cluster %s", self.cluster_id)

    def close(self) -> None:
        """Stops the tasks (from any thread); `shut_down` is the orderly way."""
        loop, tasks, self._tasks = self._loop, self._tasks, []
        if loop is None or loop.is_closed():
            return
        for task in tasks:
            loop.call_soon_threadsafe(task.cancel)

    async def shut_down(self, controlled: bool, timeout_s: float) -> None:
        """Ends the lease: with `controlled`, first asks the controller to move this
        broker's leaderships away (waiting at most `timeout_s`), then stops the tasks."""
        lifecycle = self._lifecycle
        if controlled and lifecycle is not None and lifecycle.state is not State.SHUT_DOWN:
            lifecycle.begin_controlled_shutdown()
            try:
                await asyncio.wait_for(lifecycle.shut_down_allowed.wait(), timeout_s)
            except TimeoutError:
                log.warning("controlled shutdown did not finish within %.0f s", timeout_s)
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the log, applied ----------------------------------------------------------------------
    def _apply(self, batches: list[MetadataBatch]) -> None:
        changes = Changes()
        for batch in batches:
            for record in batch.records:
                self._image.replay(record, changes)
        if changes:
            self._changed(changes)

    def _replace(self, batches: list[MetadataBatch]) -> None:
        """A snapshot: the image is built aside and swapped in whole, then every listener
        reconciles with it (what the snapshot lacks was deleted meanwhile)."""
        image = MetadataImage()
        changes = Changes(brokers=True, entities=set(self._image.entity_configs))
        for batch in batches:
            for record in batch.records:
                image.replay(record, changes)
        self._image = image
        self._changed(changes)

    def _caught_up(self) -> None:
        self.fenced = False
        self._changed(Changes(brokers=True))

    def _changed(self, changes: Changes) -> None:
        self.version += 1
        live = self._image.unfenced_brokers()
        self.controller_id = min(live) if live else -1
        for listener in self._listeners:
            if changes.brokers:
                listener(None)
            else:
                for name in sorted(changes.topics):
                    listener(name)
        for path in sorted(changes.entities):
            for entity_listener in self._entity_listeners:
                entity_listener(path)
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not ready():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return ready()
        return True

    # -- changes, through the controller ----------------------------------------------------
    async def controller_request(self, api_key: int, version: int, body: Message) -> Message:
        """Sends `body` to the active controller, following it when it moves, until the
        change timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.change_timeout_s
        while True:
            try:
                response = await self._channel.send(api_key, version, body)
            except MetadataUnavailableError:
                if loop.time() > deadline:
                    raise
            else:
                if _error_code(response) != ErrorCode.NOT_CONTROLLER:
                    return response
                await self._channel.not_controller()
                if loop.time() > deadline:
                    raise MetadataRequestError(ErrorCode.NOT_CONTROLLER, None)
            await asyncio.sleep(0.1)

    async def until_seen(self, ready: Callable[[], bool], what: str) -> None:
        """Waits until `ready()` holds after the records of a change have come back;
        MetadataRequestError (REQUEST_TIMED_OUT) after the change timeout."""
        if not await self.wait(ready, self._settings.change_timeout_s):
            raise MetadataRequestError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"{what} was not seen in the metadata log within "
                f"{self._settings.change_timeout_s:g} s")

    async def create_topic(self, name: str, configs: dict[str, str],
                           assignment: Mapping[int, list[int]],
                           topic_id: uuid.UUID | None = None) -> TopicState:
        """CreateTopics with the replicas given (the controller picks the topic id)."""
        R = m.CreateTopicsRequest  # noqa: N806
        topic = R.CreatableTopic(
            name=name, num_partitions=-1, replication_factor=-1,
            assignments=[R.CreatableTopic.CreatableReplicaAssignment(
                partition_index=p, broker_ids=list(assignment[p])) for p in sorted(assignment)],
            configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                     for k, v in configs.items()])
        response = await self.controller_request(R.API_KEY, 7, R(topics=[topic],
                                                         timeout_ms=REQUEST_TIMEOUT_MS))
        assert isinstance(response, m.CreateTopicsResponse)
        result = response.topics[0]
        if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            raise TopicExistsError(result.error_message or f"Topic '{name}' already exists.")
        if result.error_code != ErrorCode.NONE:
            raise MetadataRequestError(result.error_code, result.error_message)
        await self.until_seen(lambda: len(getattr(self.topics.get(name), "partitions", ()))
                               == len(assignment), f"topic {name}")
        return self.topics[name]

    async def delete_topic(self, name: str) -> None:
        R = m.DeleteTopicsRequest  # noqa: N806
        response = await self.controller_request(R.API_KEY, 6, R(
            topics=[R.DeleteTopicState(name=name)], timeout_ms=REQUEST_TIMEOUT_MS))
        assert isinstance(response, m.DeleteTopicsResponse)
        result = response.responses[0]
        if result.error_code != ErrorCode.NONE:
            raise MetadataRequestError(result.error_code, result.error_message)

    async def add_partitions(self, name: str, assignment: Mapping[int, list[int]]) -> None:
        R = m.CreatePartitionsRequest  # noqa: N806
        total = len(self.topics[name].partitions) + len(assignment)
        response = await self.controller_request(R.API_KEY, 3, R(
            topics=[R.CreatePartitionsTopic(
                name=name, count=total,
                assignments=[R.CreatePartitionsTopic.CreatePartitionsAssignment(
                    broker_ids=list(assignment[p])) for p in sorted(assignment)])],
            timeout_ms=REQUEST_TIMEOUT_MS))
        assert isinstance(response, m.CreatePartitionsResponse)
        result = response.results[0]
        if result.error_code != ErrorCode.NONE:
            raise MetadataRequestError(result.error_code, result.error_message)
        await self.until_seen(lambda: len(self.topics[name].partitions) >= total,
                               f"partitions of {name}")

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Makes the topic's overrides exactly `configs`: sets what differs, deletes what
        is gone."""
        R = m.IncrementalAlterConfigsRequest  # noqa: N806
        Alter = R.AlterConfigsResource.AlterableConfig  # noqa: N806
        current = dict(self.topics[name].configs)
        alters = [Alter(name=k, config_operation=SET, value=v)
                  for k, v in configs.items() if current.get(k) != v]
        alters += [Alter(name=k, config_operation=DELETE, value=None)
                   for k in current if k not in configs]
        if not alters:
            return
        response = await self.controller_request(R.API_KEY, 1, R(resources=[R.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=name, configs=alters)]))
        assert isinstance(response, m.IncrementalAlterConfigsResponse)
        result = response.responses[0]
        if result.error_code != ErrorCode.NONE:
            raise MetadataRequestError(result.error_code, result.error_message)
        await self.until_seen(lambda: name not in self.topics
                               or self.topics[name].configs == configs, f"configs of {name}")

    async def update_isr(self, name: str, partition: int, leader_epoch: int,
                         isr: list[int]) -> bool:
        """AlterPartition to the controller; False when it refuses (this broker no longer
        leads at `leader_epoch`, or the partition changed meanwhile)."""
        topic = self.topics.get(name)
        if topic is None or self._lifecycle is None:
            return False
        R = m.AlterPartitionRequest  # noqa: N806
        P = R.TopicData.PartitionData  # noqa: N806
        epochs = {b.broker_id: b.epoch for b in self._image.brokers.values()}
        request = R(broker_id=self.node_id, broker_epoch=self._lifecycle.broker_epoch,
                    topics=[R.TopicData(topic_id=topic.topic_id, partitions=[P(
                        partition_index=partition, leader_epoch=leader_epoch,
                        new_isr_with_epochs=[P.BrokerState(broker_id=b,
                                                           broker_epoch=epochs.get(b, -1))
                                             for b in isr],
                        partition_epoch=self._image.partition_epochs.get(
                            (topic.topic_id, partition), 0))])])
        try:
            response = await self.controller_request(R.API_KEY, 3, request)
        except (MetadataUnavailableError, MetadataRequestError) as exc:
            log.warning("AlterPartition for %s-%d failed: %s", name, partition, exc)
            return False
        assert isinstance(response, m.AlterPartitionResponse)
        errors = [response.error_code, *(p.error_code for t in response.topics
                                         for p in t.partitions)]
        return all(e == ErrorCode.NONE for e in errors)

    async def alter_entity_configs(self, path: str, changes: Mapping[str, str | None]) -> None:
        """Broker and group configs through IncrementalAlterConfigs, client quotas through
        AlterClientQuotas; returns once the log has brought them back. SCRAM credentials
        are refused: ADS keeps only their derived keys, AlterUserScramCredentials needs the
        salted password."""
        kind, _, rest = path.partition("/")
        if kind in (BROKERS, GROUPS):
            name = "" if rest == DEFAULT else desanitize(rest)
            await self._alter_configs(BROKER_RESOURCE if kind == BROKERS else GROUP_RESOURCE,
                                      name, changes)
        elif any(key.startswith("SCRAM-") for key in changes):
            raise MetadataRequestError(
                ErrorCode.UNSUPPORTED_VERSION, "SCRAM credentials cannot be changed through "
                "ADS with KRaft controllers yet: change them at the controllers")
        else:
            await self._alter_quotas(path, changes)

        def seen() -> bool:
            current = self._image.entity_configs.get(path, {})
            return all(current.get(k) == v or (v is not None and _same_number(current.get(k), v))
                       for k, v in changes.items())
        await self.until_seen(seen, f"configs of {path}")

    async def _alter_configs(self, resource_type: int, name: str,
                             changes: Mapping[str, str | None]) -> None:
        R = m.IncrementalAlterConfigsRequest  # noqa: N806
        alters = [R.AlterConfigsResource.AlterableConfig(
            name=k, config_operation=DELETE if v is None else SET, value=v)
            for k, v in changes.items()]
        response = await self.controller_request(R.API_KEY, 1, R(resources=[R.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=alters)]))
        assert isinstance(response, m.IncrementalAlterConfigsResponse)
        result = response.responses[0]
        if result.error_code != ErrorCode.NONE:
            raise MetadataRequestError(result.error_code, result.error_message)

    async def _alter_quotas(self, path: str, changes: Mapping[str, str | None]) -> None:
        R = m.AlterClientQuotasRequest  # noqa: N806
        user, client = parse_entity_path(path)
        entity = [R.EntryData.EntityData(entity_type=kind,
                                         entity_name=None if name == DEFAULT else name)
                  for kind, name in (("user", user), ("client-id", client)) if name is not None]
        ops = [R.EntryData.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
               for k, v in changes.items()]
        response = await self.controller_request(R.API_KEY, 1, R(entries=[R.EntryData(entity=entity,
                                                                               ops=ops)]))
        assert isinstance(response, m.AlterClientQuotasResponse)
        result = response.entries[0]
        if result.error_code != ErrorCode.NONE:
            raise MetadataRequestError(result.error_code, result.error_message)

    async def allocate_producer_id_block(self, size: int) -> tuple[int, int]:
        """AllocateProducerIds: the controller hands out its own block size (1000)."""
        R = m.AllocateProducerIdsRequest  # noqa: N806
        response = await self.controller_request(R.API_KEY, 0, R(broker_id=self.node_id,
                                                          broker_epoch=self.broker_epoch))
        assert isinstance(response, m.AllocateProducerIdsResponse)
        if response.error_code != ErrorCode.NONE:
            raise MetadataRequestError(response.error_code, None)
        return response.producer_id_start, response.producer_id_start + response.producer_id_len


def _same_number(stored: str | None, wanted: str) -> bool:
    """Quotas come back from the log as numbers: 1024 asked for may read "1024" or
    "1024.0"."""
    try:
        return stored is not None and float(stored) == float(wanted)
    except ValueError:
        return False


def _error_code(response: Message) -> int:
    """The top-level error code, or that of the first result, of a controller's answer."""
    code = getattr(response, "error_code", ErrorCode.NONE)
    if code != ErrorCode.NONE:
        return int(code)
    for name in ("topics", "responses", "results"):
        for result in getattr(response, name, None) or ():
            return int(getattr(result, "error_code", ErrorCode.NONE))
    return ErrorCode.NONE
