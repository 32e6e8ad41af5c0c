"""Replica fetchers: followers copy their leaders' logs.

A follower fetches from its leader the way a consumer does, with its broker id as the
replica id (Kafka's ReplicaFetcherThread). Partitions followed from one leader are spread
over `num.replica.fetchers` fetchers (by partition hash); each fetcher is one asyncio task
with one outbound connection (`ads.net.client`) and sends one Fetch per round naming every
partition it follows from that leader, so the cost is per request, not per partition.

One round:

1. Fetch v12 with, per partition, the follower's log end offset as the fetch offset, its
   latest leader epoch as `last_fetched_epoch` and the leader epoch it believes current.
   The leader long-polls it (`replica.fetch.wait.max.ms`, `replica.fetch.min.bytes`).
2. Per partition in the answer:
   - records: appended as they are through the replica manager's one append path
     (`ReplicaManager.append_records`, origin REPLICATION: CRC-checked, offsets, epochs
     and bytes kept), and the leader's high watermark taken up to the log end;
   - a diverging epoch: the log is truncated where it agrees with the leader
     (`Partition.truncate_to_leader`), then fetching goes on from there;
   - OFFSET_OUT_OF_RANGE below the leader's log start: the log restarts empty at the
     leader's log start offset;
   - NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH and other errors:
     the partition waits `replica.fetch.backoff.ms` (the metadata will move it or the
     leader will catch up with the epoch).
3. Answers for a partition whose role or epoch changed while the request was out are
   dropped: its next fetch starts from the log as it is then.

A partition whose own log fails (a storage error while appending, truncating or starting
over, or any error handling its answer) is logged and no longer fetched until its
leadership changes; the others go on (`ReplicaFetcherManager.failed`, on `/metrics`).
A failed connection (or a refused SASL authentication, logged) is made again after
`replica.fetch.backoff.ms`; a SASL session is renewed on the connection before the
lifetime the leader gave ends (``ads.net.client``). The next round starts as
soon as the answer is handled: the follower's next fetch offset is what tells the leader
the records arrived, which is what acks=all waits for.

Runs on the broker's event loop; the log appends happen there too (one write per
partition per round), as produce appends do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ads.common.partitions import TopicPartition
from ads.net.client import Authenticate, BrokerConnection, NetClientError
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.replication.partition import AppendOrigin, Partition, PartitionError

if TYPE_CHECKING:
    from ads.replication.replica_manager import ReplicaManager

log = logging.getLogger("ads.replication.fetcher")

FETCH_VERSION = 12  # topic names, last_fetched_epoch and diverging_epoch (KIP-320/595)

# (host, port) of a live broker on the inter-broker listener, or None.
EndpointLookup = Callable[[int], tuple[str, int] | None]


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The `replica.fetch.*` keys and `num.replica.fetchers`."""

    partition_max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    min_bytes: int = 1
    wait_max_ms: int = 500
    backoff_ms: int = 1000
    num_fetchers: int = 1
    request_timeout_ms: int = 30000


class ReplicaFetcherManager:
    """Which fetcher follows which partition; fetchers start and stop with their work."""

    def __init__(self, node_id: int, config: FetcherConfig, endpoint: EndpointLookup,
                 replicas: ReplicaManager, ssl_context: ssl.SSLContext | None = None,
                 authenticate: Authenticate | None = None) -> None:
        """`replicas`: where fetched batches are appended; `ssl_context`: TLS to the
        leaders when the inter-broker listener uses it; `authenticate`: the SASL exchange
        when it is a SASL one."""
        self.node_id = node_id
        self._replicas = replicas
        self.config = config
        self._endpoint = endpoint
        self._ssl_context = ssl_context
        self._authenticate = authenticate
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[TopicPartition, tuple[int, int]] = {}
        self._stopped = False
        # Partitions whose replication failed on an error of their own (their log's): no
        # longer fetched until their leadership changes (Kafka's failed partitions).
        self.failed: set[TopicPartition] = set()

    def follow(self, part: Partition) -> None:
        """Fetches `part` from its `leader_id` (moving it off any other fetcher)."""
        if self._stopped:
            return
        self.failed.discard(part.key)  # a new leader or epoch: try again
        slot = (part.leader_id, hash(part.key) % max(self.config.num_fetchers, 1))
        if self._where.get(part.key) != slot:
            self.unfollow(part.key)
        fetcher = self._fetchers.get(slot)
        if fetcher is None:
            fetcher = self._fetchers[slot] = ReplicaFetcher(
                self.node_id, part.leader_id, self.config, self._endpoint, self._replicas,
                self._ssl_context, self._authenticate, self._failed)
        self._where[part.key] = slot
        fetcher.add(part)

    def _failed(self, key: TopicPartition) -> None:
        self.failed.add(key)
        self.unfollow(key)

    def failed_partitions(self) -> int:
        return len(self.failed)

    def unfollow(self, key: TopicPartition) -> None:
        slot = self._where.pop(key, None)
        if slot is None:
            return
        fetcher = self._fetchers.get(slot)
        if fetcher is not None and fetcher.remove(key):
            del self._fetchers[slot]

    async def shutdown(self) -> None:
        self._stopped = True
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._where.clear()
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)


class ReplicaFetcher:
    """Fetches a set of partitions from one leader, one request at a time."""

    def __init__(self, node_id: int, leader_id: int, config: FetcherConfig,
                 endpoint: EndpointLookup, replicas: ReplicaManager,
                 ssl_context: ssl.SSLContext | None = None,
                 authenticate: Authenticate | None = None,
                 on_failed: Callable[[TopicPartition], None] | None = None) -> None:
        """`replicas`: where fetched batches are appended; `on_failed(key)`: the partition
        failed on an error of its own log and is no longer fetched here."""
        self.node_id = node_id
        self._replicas = replicas
        self.leader_id = leader_id
        self._on_failed = on_failed
        self.config = config
        self._endpoint = endpoint
        self._ssl_context = ssl_context
        self._authenticate = authenticate
        self.partitions: dict[TopicPartition, Partition] = {}
        self._delayed: dict[TopicPartition, float] = {}  # key -> loop time it may fetch again
        self._conn: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()

    def add(self, part: Partition) -> None:
        self.partitions[part.key] = part
        self._delayed.pop(part.key, None)
        self._wakeup.set()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def remove(self, key: TopicPartition) -> bool:
        """Stops fetching `key`; True when nothing is left (the fetcher then stops)."""
        self.partitions.pop(key, None)
        self._delayed.pop(key, None)
        if self.partitions:
            return False
        if self._task is not None:
            self._task.cancel()
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close()

    async def _close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def _run(self) -> None:
        backoff = self.config.backoff_ms / 1000.0
        try:
            while self.partitions:
                try:
                    await self._round()
                except NetClientError as exc:
                    log.info("fetching from broker %d: %s; again in %.1f s", self.leader_id,
                             exc, backoff)
                    await self._close()
                    await asyncio.sleep(backoff)
                except Exception:  # noqa: BLE001 - a round's fault must not end replication
                    log.exception("fetching from broker %d failed; again in %.1f s",
                                  self.leader_id, backoff)
                    await self._close()
                    await asyncio.sleep(backoff)
        finally:
            await self._close()

    async def _connection(self) -> BrokerConnection | None:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        address = self._endpoint(self.leader_id)
        if address is None:
            return None
        self._conn = await BrokerConnection.connect(
            address[0], address[1], client_id=f"ads-replica-fetcher-{self.node_id}",
            request_timeout_s=self.config.request_timeout_ms / 1000.0,
            ssl_context=self._ssl_context, authenticate=self._authenticate)
        return self._conn

    async def _round(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        ready = {k: p for k, p in self.partitions.items() if self._delayed.get(k, 0.0) <= now}
        conn = await self._connection() if ready else None
        if conn is None:
            # Nothing to fetch now (every partition backing off) or the leader is unknown.
            waits = [t - now for t in self._delayed.values()]
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout=max(
                    min(waits, default=self.config.backoff_ms / 1000.0), 0.01))
            return
        sent = {k: (p, p.leader_epoch, p.log.log_end_offset) for k, p in ready.items()}
        request = self._request(sent)
        timeout = (self.config.request_timeout_ms + self.config.wait_max_ms) / 1000.0
        response = await conn.request(m.ApiKey.FETCH, FETCH_VERSION, request, timeout_s=timeout)
        assert isinstance(response, m.FetchResponse)
        if response.error_code != ErrorCode.NONE:
            raise _RoundError(self.leader_id, ErrorCode(response.error_code))
        for topic in response.responses:
            for data in topic.partitions:
                key = TopicPartition(topic.topic, data.partition_index)
                if key in sent:
                    try:
                        self._handle(key, sent[key], data)
                    except Exception:  # noqa: BLE001 - one partition's fault stays its own
                        log.exception("%s-%d: replicating from broker %d failed; the "
                                      "partition is no longer fetched until its leadership "
                                      "changes", key[0], key[1], self.leader_id)
                        self._fail(key)

    def _fail(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self._delayed.pop(key, None)
        if self._on_failed is not None:
            self._on_failed(key)

    def _request(self, sent: dict[TopicPartition, tuple[Partition, int, int]]) -> m.FetchRequest:
        topics: dict[str, list[m.FetchRequest.FetchTopic.FetchPartition]] = {}
        for (topic, index), (part, epoch, offset) in sent.items():
            topics.setdefault(topic, []).append(m.FetchRequest.FetchTopic.FetchPartition(
                partition=index, current_leader_epoch=epoch, fetch_offset=offset,
                last_fetched_epoch=part.log.latest_epoch,
                log_start_offset=part.log.log_start_offset,
                partition_max_bytes=self.config.partition_max_bytes))
        return m.FetchRequest(
            replica_id=self.node_id, max_wait_ms=self.config.wait_max_ms,
            min_bytes=self.config.min_bytes, max_bytes=self.config.response_max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[m.FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()])

    def _handle(self, key: TopicPartition, sent: tuple[Partition, int, int],
                data: m.FetchResponse.FetchableTopicResponse.PartitionData) -> None:
        part, epoch, offset = sent
        if (self.partitions.get(key) is not part or part.is_leader
                or part.leader_epoch != epoch or part.log.log_end_offset != offset):
            return  # its role changed while the request was out
        code = ErrorCode(data.error_code)
        try:
            if code == ErrorCode.NONE:
                diverging = data.diverging_epoch
                if diverging.epoch >= 0 or diverging.end_offset >= 0:
                    before = (part.log.log_end_offset, part.log.latest_epoch)
                    part.truncate_to_leader(diverging.epoch, diverging.end_offset)
                    if (part.log.log_end_offset, part.log.latest_epoch) != before:
                        return
                    # Nothing left to cut, yet the leader still sees a divergence: wait
                    # rather than ask again at once.
                    log.warning("%s-%d: the leader reports a divergence (epoch %d ends at %d) "
                                "with nothing left to truncate", key[0], key[1],
                                diverging.epoch, diverging.end_offset)
                    self._delayed[key] = (asyncio.get_running_loop().time()
                                          + self.config.backoff_ms / 1000.0)
                else:
                    result = self._replicas.append_records(
                        {key: memoryview(data.records or b"")}, AppendOrigin.REPLICATION, 1, 0,
                        leader_offsets={key: (data.high_watermark, data.log_start_offset)}
                    ).results[key]
                    if isinstance(result, PartitionError):
                        raise result
                return
            if code == ErrorCode.OFFSET_OUT_OF_RANGE and data.log_start_offset > offset:
                log.warning("%s-%d: the leader's log starts at %d, past this log's end %d: "
                            "starting over there", key[0], key[1], data.log_start_offset, offset)
                part.restart_at(data.log_start_offset)
                return
        except PartitionError as exc:
            if exc.code is ErrorCode.KAFKA_STORAGE_ERROR:
                raise  # the log itself failed: the partition fails (`_fail`)
            code = exc.code
            log.warning("%s-%d: replicating from broker %d failed: %s", key[0], key[1],
                        self.leader_id, exc)
        if code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                        ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            log.warning("%s-%d: fetch from broker %d answered %s", key[0], key[1],
                        self.leader_id, code.name)
        self._delayed[key] = asyncio.get_running_loop().time() + self.config.backoff_ms / 1000.0


class _RoundError(NetClientError):
    def __init__(self, leader_id: int, code: ErrorCode) -> None:
        super().__init__(f"broker {leader_id} answered the fetch with {code.name}",
                         str(leader_id))
