"""A broker's lease with the KRaft controller: registration, heartbeats, controlled shutdown.

States, as Kafka's brokers go through them::

    REGISTERING --registered--> STARTING --caught up--> RUNNING
        ^                          |                       |
        +--- STALE_BROKER_EPOCH ---+-----------------------+
                                                           |  shut_down(controlled)
                                                           v
                                         PENDING_CONTROLLED_SHUTDOWN --should_shut_down--> done

- REGISTERING: BrokerRegistration (API 62 v4) to the active controller with a new
  incarnation id, the advertised listeners, the features this broker supports (the
  controller refuses a broker that cannot run the cluster's finalized levels), its rack and
  log directory ids; retried with a backoff on any failure.
- STARTING: heartbeats (API 63 v1) every 10 ms with `want_fence` set and the offset of the
  last metadata record applied, until the controller answers `is_caught_up` (this broker
  has applied its own registration).
- RUNNING: heartbeats every `broker.heartbeat.interval.ms` with `want_fence` clear, so the
  controller unfences the broker; missed heartbeats for `broker.session.timeout.ms` (the
  controller's setting) fence it again.
- PENDING_CONTROLLED_SHUTDOWN: heartbeats every 50 ms with `want_shut_down` until the
  controller, having moved leadership away, answers `should_shut_down`.

NOT_CONTROLLER and connection failures send the next request to the leader the quorum
names; STALE_BROKER_EPOCH (the controller no longer knows this registration) registers
again. Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ads.metadata.kraft_quorum import (
    ConnectController,
    ControllerConnection,
    ControllerUnreachableError,
    Quorum,
)
from ads.metadata.model import BrokerEndpoint
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.metadata.kraft")

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
# The feature levels this broker can run, by feature. metadata.version also sets the
# versions Kafka's brokers send other brokers without asking (their replica fetchers): from
# 27 (4.1-IV1) they fetch with Fetch v18, and from 4.2-IV1 list offsets with ListOffsets
# v11, which ADS does not serve; 26 (4.1-IV0) is the highest level a cluster with Kafka
# brokers replicating from ADS leaders runs at. The oldest, 7 (3.3-IV3), is the oldest
# Kafka 4 reads; the records of every level in between are in kraft_records.py.
# kraft.version 1 (KIP-853 dynamic quorums) adds control records a broker only skips.
# transaction.version 1 is KIP-890's first part (AddPartitionsToTxn verification), which
# ADS serves; 2 (the epoch bumped per transaction, EndTxn v5) it does not. group.version 1
# is the KIP-848 consumer group protocol, share.version 1 KIP-932's share groups.
# eligible.leader.replicas.version 1 (KIP-966) has leaders hold the high watermark while the
# ISR is below min.insync.replicas, which ADS's leaders do not, and streams.version (KIP-1071
# streams groups) is not served: both stay at 0.
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "metadata.version": (7, 26),
    "kraft.version": (0, 1),
    "transaction.version": (0, 1),
    "group.version": (0, 1),
    "share.version": (0, 1),
}
STARTING_INTERVAL_S = 0.01
SHUTDOWN_INTERVAL_S = 0.05


class State(enum.Enum):
    REGISTERING = "registering"
    STARTING = "starting"
    RUNNING = "running"
    PENDING_CONTROLLED_SHUTDOWN = "pending controlled shutdown"
    SHUT_DOWN = "shut down"


class ControllerChannel:
    """Requests to the active controller, on a connection of their own (a Raft Fetch held
    by the leader would otherwise delay a heartbeat queued behind it)."""

    def __init__(self, quorum: Quorum, connect: ConnectController,
                 request_timeout_s: float) -> None:
        self._quorum = quorum
        self._connect = connect
        self._timeout_s = request_timeout_s
        self._conn: ControllerConnection | None = None
        self._address: tuple[str, int] | None = None

    async def send(self, api_key: int, version: int, body: Message) -> Message:
        address = self._quorum.address()
        if self._conn is None or self._address != address:
            await self.close()
            self._conn = await self._connect(*address)
            self._address = address
        try:
            return await self._conn.request(api_key, version, body, timeout_s=self._timeout_s)
        except ControllerUnreachableError:
            await self.close()
            raise

    async def not_controller(self) -> None:
        """The controller answered NOT_CONTROLLER: the next request goes where the quorum's
        leader is by then."""
        await self.close()
        self._quorum.lost()

    async def close(self) -> None:
        conn, self._conn, self._address = self._conn, None, None
        if conn is not None:
            await conn.close()


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    node_id: int
    heartbeat_interval_s: float = 2.0  # broker.heartbeat.interval.ms
    retry_backoff_s: float = 0.1
    max_backoff_s: float = 1.0


class BrokerLifecycle:
    """Registers the broker and keeps its lease (see the module's docstring)."""

    def __init__(self, channel: ControllerChannel, settings: LifecycleSettings,
                 cluster_id: Callable[[], str], log_dir_ids: Callable[[], tuple[uuid.UUID, ...]],
                 metadata_offset: Callable[[], int], caught_up: Callable[[], None]) -> None:
        self._channel = channel
        self._settings = settings
        self._cluster_id = cluster_id
        self._log_dir_ids = log_dir_ids
        self._metadata_offset = metadata_offset
        self._caught_up = caught_up
        self.state = State.REGISTERING
        self.broker_epoch = -1
        self.incarnation_id = uuid.uuid4()
        self.endpoint: BrokerEndpoint | None = None
        self.shut_down_allowed = asyncio.Event()
        self._wake = asyncio.Event()

    def registration(self) -> m.BrokerRegistrationRequest:
        assert self.endpoint is not None
        R = m.BrokerRegistrationRequest  # noqa: N806
        return R(
            broker_id=self._settings.node_id, cluster_id=self._cluster_id(),
            incarnation_id=self.incarnation_id,
            listeners=[R.Listener(name=e.listener_name, host=e.host, port=e.port,
                                  security_protocol=SECURITY_PROTOCOL_IDS[e.security_protocol])
                       for e in self.endpoint.endpoints],
            features=[R.Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                      for name, (lo, hi) in SUPPORTED_FEATURES.items()],
            rack=self.endpoint.rack, log_dirs=list(self._log_dir_ids()))

    def heartbeat(self) -> m.BrokerHeartbeatRequest:
        return m.BrokerHeartbeatRequest(
            broker_id=self._settings.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self._metadata_offset(),
            want_fence=self.state is State.STARTING,
            want_shut_down=self.state is State.PENDING_CONTROLLED_SHUTDOWN)

    def begin_controlled_shutdown(self) -> None:
        if self.state in (State.STARTING, State.RUNNING):
            self.state = State.PENDING_CONTROLLED_SHUTDOWN
            self._wake.set()
        else:
            self.shut_down_allowed.set()

    async def run(self) -> None:
        """Registers, then heartbeats, until cancelled or the controller lets it go."""
        backoff = self._settings.retry_backoff_s
        try:
            while self.state is not State.SHUT_DOWN:
                try:
                    delay = await self._step()
                    backoff = self._settings.retry_backoff_s
                except ControllerUnreachableError as exc:
                    log.info("controller unreachable (%s); retrying", exc)
                    delay = backoff
                    backoff = min(backoff * 2, self._settings.max_backoff_s)
                self._wake.clear()
                # Bounded by `delay`; a controlled shutdown asked for meanwhile cuts it short.
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except TimeoutError:
                    pass
        finally:
            await self._channel.close()

    async def _step(self) -> float:
        """One request; returns how long to wait before the next."""
        if self.state is State.REGISTERING:
            return await self._register()
        response = await self._channel.send(m.BrokerHeartbeatRequest.API_KEY, HEARTBEAT_VERSION,
                                            self.heartbeat())
        assert isinstance(response, m.BrokerHeartbeatResponse)
        return await self._heartbeat_answered(response)

    async def _register(self) -> float:
        response = await self._channel.send(m.BrokerRegistrationRequest.API_KEY,
                                            REGISTRATION_VERSION, self.registration())
        assert isinstance(response, m.BrokerRegistrationResponse)
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            await self._channel.not_controller()
            return self._settings.retry_backoff_s
        if response.error_code != ErrorCode.NONE:
            log.warning("the controller refused this broker's registration: %s",
                        ErrorCode(response.error_code).name)
            return self._settings.max_backoff_s
        self.broker_epoch = response.broker_epoch
        self.state = State.STARTING
        log.info("registered broker %d with the controller, broker epoch %d",
                 self._settings.node_id, self.broker_epoch)
        return 0.0

    async def _heartbeat_answered(self, response: m.BrokerHeartbeatResponse) -> float:
        error = response.error_code
        if error == ErrorCode.NOT_CONTROLLER:
            await self._channel.not_controller()
            return self._settings.retry_backoff_s
        if error == ErrorCode.STALE_BROKER_EPOCH:
            if self.state is State.PENDING_CONTROLLED_SHUTDOWN:
                # No registration left to hand leadership away from: done.
                log.info("the controller no longer knows this broker: shutting down")
                self.state = State.SHUT_DOWN
                self.shut_down_allowed.set()
                return 0.0
            log.warning("the controller no longer knows broker epoch %d: registering again",
                        self.broker_epoch)
            self.state = State.REGISTERING
            return 0.0
        if error != ErrorCode.NONE:
            log.warning("broker heartbeat refused: %s", ErrorCode(error).name)
            return self._settings.retry_backoff_s
        if self.state is State.STARTING:
            if not response.is_caught_up:
                return STARTING_INTERVAL_S
            log.info("caught up with the cluster metadata: asking to be unfenced")
            self.state = State.RUNNING
            self._caught_up()
            return 0.0
        if self.state is State.PENDING_CONTROLLED_SHUTDOWN:
            if not response.should_shut_down:
                return SHUTDOWN_INTERVAL_S
            log.info("the controller ended this broker's controlled shutdown")
            self.state = State.SHUT_DOWN
            self.shut_down_allowed.set()
        return self._settings.heartbeat_interval_s
