"""Following a KRaft controller quorum as a broker: where its leader is, and the metadata log
read from it as a Raft observer.

Theory of operation. The broker knows the quorum by `controller.quorum.bootstrap.servers`
(or the addresses of `controller.quorum.voters`). `Quorum` holds those addresses and, once
learnt, the leader's id, epoch and address; the leader of the Raft quorum is also the active
controller, which takes registrations, heartbeats and changes.

`LogFollower` reads `__cluster_metadata` the way Kafka's observers do, with Raft Fetch
requests (Fetch v17 on the controller listener: cluster id, this broker's id as replica id,
topic id 0...01, partition 0, fetch offset = end of what it holds, last fetched epoch,
current leader epoch):

    answer                                   what the follower does
    -------------------------------------    --------------------------------------------
    NONE, records                            keeps the batches; applies those below the
                                             high watermark (committed), in order
    NONE, diverging epoch (end offset E)     drops the uncommitted batches it holds from E
                                             (E below what it applied would undo committed
                                             records, which Raft never does: an error)
    NONE, snapshot id (end offset S)         the log before S is gone: reads the snapshot
                                             with FetchSnapshot, chunk by chunk, and hands
                                             its batches to `replace`; fetches on from S
    NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_   takes the leader and epoch the answer names
    EPOCH, UNKNOWN_LEADER_EPOCH              (with its address from NodeEndpoints) and asks
                                             again, there
    a connection failure or timeout          forgets the leader, tries the next bootstrap
                                             server after a backoff

Only committed batches are applied: a batch above the high watermark may still be truncated
by a new leader. A snapshot replaces what was applied in one step (`replace`), so the broker
never sees a model emptied on the way. The leader holds each Fetch up to `max_wait_ms` when
there is nothing new, so the loop is a long poll, not a spin.

The network is injected (`ConnectController`), as the broker layer owns sockets; a failed
connection or request is a `ControllerUnreachableError`. Not thread-safe: one event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ads.metadata.kraft_log import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    MetadataBatch,
    MetadataRecordError,
    read_batches,
)
from ads.metadata.store import MetadataUnavailableError
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.errors import ErrorCode
from ads.protocol.types import ZERO_UUID

log = logging.getLogger("ads.metadata.kraft")

FETCH_VERSION = 17
FETCH_SNAPSHOT_VERSION = 1
# Chunks of MAX_FETCH_BYTES: a metadata snapshot of up to 8 GiB.
MAX_SNAPSHOT_REQUESTS = 1024
MAX_FETCH_BYTES = 8 * 1024 * 1024  # Kafka's Raft client asks for at most this much
_LEADER_MOVED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                 ErrorCode.UNKNOWN_LEADER_EPOCH)


class ControllerUnreachableError(MetadataUnavailableError):
    """No answer from a controller: it could not be connected to, the connection failed,
    or the request timed out."""


class ControllerConnection(Protocol):
    async def request(self, api_key: int, api_version: int, body: Message, *,
                      timeout_s: float | None = None) -> Message: ...

    async def close(self) -> None: ...


ConnectController = Callable[[str, int], Awaitable[ControllerConnection]]


def parse_bootstrap(servers: list[str], voters: list[str]) -> list[tuple[str, int]]:
    """The quorum's addresses: `controller.quorum.bootstrap.servers` (host:port), else the
    addresses of `controller.quorum.voters` (id@host:port); ValueError when neither names
    one, or an entry is malformed."""
    entries = [s.strip() for s in servers if s.strip()] or [
        v.strip().partition("@")[2] for v in voters if v.strip()]
    out = []
    for entry in entries:
        host, colon, port = entry.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(f"expected host:port, got {entry!r}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no controller.quorum.bootstrap.servers or controller.quorum.voters")
    return out


class Quorum:
    """The quorum's bootstrap addresses and what is known of its leader."""

    def __init__(self, bootstrap: list[tuple[str, int]]) -> None:
        self.bootstrap = bootstrap
        self.leader_id = -1
        self.leader_epoch = 0
        self.leader_address: tuple[str, int] | None = None
        self._next = 0
        self.leader_known = asyncio.Event()

    def address(self) -> tuple[str, int]:
        """The leader's address when known, else the next bootstrap server in turn."""
        if self.leader_address is not None:
            return self.leader_address
        address = self.bootstrap[self._next % len(self.bootstrap)]
        self._next += 1
        return address

    def learn(self, leader_id: int, epoch: int, address: tuple[str, int] | None) -> None:
        if epoch < self.leader_epoch:
            return
        moved = (leader_id, address) != (self.leader_id, self.leader_address)
        if leader_id != self.leader_id or address is not None:
            # A new leader whose address the answer did not give is looked for again.
            self.leader_address = address if leader_id >= 0 else None
        self.leader_id, self.leader_epoch = leader_id, epoch
        if moved and leader_id >= 0:
            log.info("controller quorum leader is node %d (epoch %d) at %s", leader_id, epoch,
                     self.leader_address)
        if self.leader_address is not None:
            self.leader_known.set()

    def lost(self) -> None:
        """The leader's address failed: ask the bootstrap servers again."""
        self.leader_address = None
        self.leader_known.clear()


@dataclass(frozen=True, slots=True)
class FollowerSettings:
    node_id: int
    # The directory id Fetch carries (Kafka's tools show it for the observer): the first log
    # directory's, known once `meta.properties` is read or written.
    directory_id: Callable[[], uuid.UUID] = lambda: ZERO_UUID
    request_timeout_s: float = 2.0  # controller.quorum.request.timeout.ms
    fetch_max_wait_ms: int = 500  # how long the leader may hold a Fetch with nothing new
    retry_backoff_s: float = 0.1  # controller.quorum.retry.backoff.ms, doubled up to 1 s
    max_backoff_s: float = 1.0


class LogFollower:
    """Reads the metadata log from the quorum leader and hands committed batches to
    `apply` (in order, each once), and a snapshot's batches to `replace` (what was applied
    before is forgotten)."""

    def __init__(self, quorum: Quorum, connect: ConnectController, settings: FollowerSettings,
                 cluster_id: Callable[[], str | None],
                 apply: Callable[[list[MetadataBatch]], None],
                 replace: Callable[[list[MetadataBatch]], None]) -> None:
        self._quorum = quorum
        self._connect = connect
        self._settings = settings
        self._cluster_id = cluster_id
        self._apply = apply
        self._replace = replace
        self._snapshot: tuple[int, int] | None = None  # (end offset, epoch) to read
        self.applied_offset = -1  # offset of the last record applied
        self.applied_epoch = 0
        self.high_watermark = 0
        self._pending: list[MetadataBatch] = []  # fetched, not yet committed
        self._conn: ControllerConnection | None = None
        self._address: tuple[str, int] | None = None

    @property
    def fetch_offset(self) -> int:
        return (self._pending[-1].last_offset if self._pending else self.applied_offset) + 1

    @property
    def last_fetched_epoch(self) -> int:
        return self._pending[-1].epoch if self._pending else self.applied_epoch

    async def run(self) -> None:
        """Follows the log until cancelled."""
        backoff = self._settings.retry_backoff_s
        try:
            while True:
                try:
                    if await self.fetch_once():
                        backoff = self._settings.retry_backoff_s
                    else:  # sent elsewhere: not at once, in case the quorum is electing
                        await asyncio.sleep(self._settings.retry_backoff_s)
                except ControllerUnreachableError as exc:
                    log.info("metadata fetch failed (%s); retrying", exc)
                    await self._drop_connection()
                    self._quorum.lost()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._settings.max_backoff_s)
        finally:
            await self._drop_connection()

    async def _drop_connection(self) -> None:
        conn, self._conn, self._address = self._conn, None, None
        if conn is not None:
            await conn.close()

    async def _connection(self) -> ControllerConnection:
        address = self._quorum.address()
        if self._conn is not None and self._address == address:
            return self._conn
        await self._drop_connection()
        self._conn = await self._connect(*address)
        self._address = address
        return self._conn

    def request(self) -> m.FetchRequest:
        partition = m.FetchRequest.FetchTopic.FetchPartition(
            partition=METADATA_PARTITION, current_leader_epoch=self._quorum.leader_epoch,
            fetch_offset=self.fetch_offset, last_fetched_epoch=self.last_fetched_epoch,
            partition_max_bytes=MAX_FETCH_BYTES,
            replica_directory_id=self._settings.directory_id())
        return m.FetchRequest(
            cluster_id=self._cluster_id(),
            replica_state=m.FetchRequest.ReplicaState(replica_id=self._settings.node_id),
            max_wait_ms=self._settings.fetch_max_wait_ms, min_bytes=0,
            max_bytes=MAX_FETCH_BYTES,
            topics=[m.FetchRequest.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                              partitions=[partition])])

    async def fetch_once(self) -> bool:
        conn = await self._connection()
        if self._snapshot is not None:
            await self._read_snapshot(conn, *self._snapshot)
            return True
        timeout = self._settings.request_timeout_s + self._settings.fetch_max_wait_ms / 1000
        response = await conn.request(m.FetchRequest.API_KEY, FETCH_VERSION, self.request(),
                                      timeout_s=timeout)
        assert isinstance(response, m.FetchResponse)
        return self.handle(response)

    def handle(self, response: m.FetchResponse) -> bool:
        """Applies one Fetch answer (see the table in the module's docstring); False when
        it named another leader."""
        if response.error_code != ErrorCode.NONE:
            raise ControllerUnreachableError(
                f"the controller answered Fetch with {ErrorCode(response.error_code).name}")
        data = next((p for t in response.responses for p in t.partitions
                     if p.partition_index == METADATA_PARTITION), None)
        if data is None:
            raise ControllerUnreachableError("the Fetch answer lacks the metadata partition")
        leader = data.current_leader
        endpoints = {e.node_id: (e.host, e.port) for e in response.node_endpoints}
        self._quorum.learn(leader.leader_id, leader.leader_epoch, endpoints.get(leader.leader_id))
        if data.error_code in _LEADER_MOVED:
            if self._quorum.leader_address is None:
                raise ControllerUnreachableError("the quorum has no known leader yet")
            return False
        if data.error_code != ErrorCode.NONE:
            raise ControllerUnreachableError(
                f"metadata Fetch failed: {ErrorCode(data.error_code).name}")
        if data.snapshot_id.end_offset >= 0:
            self._snapshot = (data.snapshot_id.end_offset, data.snapshot_id.epoch)
            return True
        if data.diverging_epoch.end_offset >= 0:
            self._truncate(data.diverging_epoch.end_offset)
            return True
        if data.records is not None and len(data.records):
            self._pending.extend(read_batches(bytes(data.records)))
        self.high_watermark = data.high_watermark
        self._commit()
        return True

    def _truncate(self, end_offset: int) -> None:
        if end_offset <= self.applied_offset:
            raise MetadataRecordError(
                f"the leader truncates the metadata log to {end_offset}, below the committed "
                f"offset {self.applied_offset} this broker applied")
        self._pending = [b for b in self._pending if b.last_offset < end_offset]

    def snapshot_request(self, end_offset: int, epoch: int, position: int
                         ) -> m.FetchSnapshotRequest:
        R = m.FetchSnapshotRequest  # noqa: N806
        P = R.TopicSnapshot.PartitionSnapshot  # noqa: N806
        return R(cluster_id=self._cluster_id(), replica_id=self._settings.node_id,
                 max_bytes=MAX_FETCH_BYTES,
                 topics=[R.TopicSnapshot(name=METADATA_TOPIC, partitions=[P(
                     partition=METADATA_PARTITION,
                     current_leader_epoch=self._quorum.leader_epoch,
                     snapshot_id=P.SnapshotId(end_offset=end_offset, epoch=epoch),
                     position=position)])])

    async def _read_snapshot(self, conn: ControllerConnection, end_offset: int,
                             epoch: int) -> None:
        """FetchSnapshot from position 0 to the snapshot's size, then `install_snapshot`."""
        data = bytearray()
        for _ in range(MAX_SNAPSHOT_REQUESTS):
            response = await conn.request(
                m.FetchSnapshotRequest.API_KEY, FETCH_SNAPSHOT_VERSION,
                self.snapshot_request(end_offset, epoch, len(data)),
                timeout_s=self._settings.request_timeout_s)
            assert isinstance(response, m.FetchSnapshotResponse)
            part = next((p for t in response.topics for p in t.partitions
                         if p.index == METADATA_PARTITION), None)
            error = response.error_code or (part.error_code if part is not None else 0)
            if part is None or error != ErrorCode.NONE:
                # The next Fetch names the leader, or a newer snapshot.
                self._snapshot = None
                raise ControllerUnreachableError(
                    f"FetchSnapshot failed: {ErrorCode(error).name if error else 'no answer'}")
            chunk = bytes(part.unaligned_records or b"")
            data += chunk
            if len(data) >= part.size:
                self.install_snapshot(bytes(data), end_offset, epoch)
                return
            if not chunk:
                break
        self._snapshot = None
        raise ControllerUnreachableError(f"snapshot {end_offset}-{epoch} did not arrive whole")

    def install_snapshot(self, data: bytes, end_offset: int, epoch: int) -> None:
        """Replaces what was applied by the snapshot's records; the log goes on from
        `end_offset`."""
        batches = list(read_batches(data))
        self._pending.clear()
        self.applied_offset, self.applied_epoch = end_offset - 1, epoch
        self.high_watermark = max(self.high_watermark, end_offset)
        self._snapshot = None
        log.info("read the metadata snapshot up to offset %d (epoch %d): %d bytes",
                 end_offset, epoch, len(data))
        self._replace(batches)

    def _commit(self) -> None:
        committed = [b for b in self._pending if b.last_offset < self.high_watermark]
        if not committed:
            return
        self._pending = self._pending[len(committed):]
        self.applied_offset = committed[-1].last_offset
        self.applied_epoch = committed[-1].epoch
        self._apply(committed)
