"""The Spark source's view of a cluster: metadata, offset lookups and raw fetches.

The Spark source runs it on the driver (planning: partitions, leaders, offset lookups) and
in each task (fetching one offset range). Connections are ``ads.client.Connection``s (the
blocking client: framing, correlation ids, frames read into buffers of their exact size);
this module adds version negotiation, the requests the source sends, leader lookups and
retries, and turns ``ads.client.ClientError`` into ``KafkaWireError`` at its boundary. It
hands fetched record sets to ``ads.spark.columns`` as views of the response frame, never
decoding records itself.

Versions used (the highest both sides support, at most; ApiVersions v0 asks): Metadata 12,
ListOffsets 7, Fetch 12 (v13 names topics by id only). Connections are secured as the client
security properties given to ``Cluster`` say (``ads.client.security``: TLS, SASL).

Thread safety: none; each task and the driver make their own ``Cluster``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType

from ads.client import (
    ClientConfigError,
    ClientError,
    ConnectionFactory,
    choose_versions,
    parse_servers,
)
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.errors import ErrorCode

__all__ = [
    "EARLIEST",
    "LATEST",
    "BrokerConnection",
    "Cluster",
    "FetchedPartition",
    "KafkaWireError",
    "PartitionInfo",
    "TopicPartition",
]

LATEST = -1
EARLIEST = -2
_WANTED = {
    m.ApiKey.METADATA: 12,
    m.ApiKey.LIST_OFFSETS: 7,
    m.ApiKey.FETCH: 12,
}
_MIN_WANTED = {m.ApiKey.METADATA: 1, m.ApiKey.LIST_OFFSETS: 1, m.ApiKey.FETCH: 4}
_RETRIABLE_LEADER = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE,
}
# ListOffsets retried while a leader moves: the first pause, doubled up to the last.
_RETRY_PAUSE_S = 0.1
_RETRY_PAUSE_MAX_S = 1.0


class KafkaWireError(Exception):
    """A broker answered with an error, or could not be reached or understood."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class _Unreachable(Exception):
    """A broker could not be reached or dropped the connection (``error`` says how):
    retriable where a leader may be moving."""

    def __init__(self, error: KafkaWireError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch response; ``records`` views the response frame."""

    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None
    records: memoryview


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _wire_error(exc: ClientError) -> KafkaWireError:
    return KafkaWireError(str(exc), exc.code)


class BrokerConnection:
    """One connection to one broker (an ``ads.client.Connection`` whose errors become
    ``KafkaWireError``), with the API versions negotiated on connect. Requests may be
    pipelined: ``send`` several, then ``receive`` in the same order."""

    def __init__(self, host: str, port: int, connect: ConnectionFactory) -> None:
        self.address = f"{host}:{port}"
        try:
            self._conn = connect(host, port)
            ranges = self._conn.api_versions()
        except ClientError as exc:
            self.close()
            raise _wire_error(exc) from exc
        self.versions = choose_versions(ranges, _WANTED, _MIN_WANTED)

    def version(self, api_key: int) -> int:
        version = self.versions.get(api_key)
        if version is None:
            raise KafkaWireError(
                f"broker {self.address} supports no usable version of API {api_key}")
        return version

    def send(self, api_key: int, version: int, body: Message) -> None:
        try:
            self._conn.send(api_key, version, body)
        except ClientError as exc:
            raise _wire_error(exc) from exc

    def receive(self) -> Message:
        try:
            return self._conn.receive()
        except ClientError as exc:
            raise _wire_error(exc) from exc

    def request(self, api_key: int, version: int, body: Message) -> Message:
        self.send(api_key, version, body)
        return self.receive()

    def close(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()


class Cluster:
    """Metadata and connections for one cluster, reached through its bootstrap servers."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "ads-spark",
                 timeout_s: float = 30.0, security: Mapping[str, str] | None = None) -> None:
        self._bootstrap = parse_servers(bootstrap_servers)
        try:
            self._connect = ConnectionFactory(security, client_id=client_id,
                                              timeout_s=timeout_s)
        except ClientConfigError as exc:
            raise KafkaWireError(f"client property {exc.key}: {exc}") from exc
        self._timeout_s = timeout_s
        self._brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[int, BrokerConnection] = {}
        self._any: BrokerConnection | None = None
        self.topics: dict[str, list[PartitionInfo]] = {}
        self.topic_errors: dict[str, ErrorCode] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for conn in {id(c): c for c in [*self._connections.values(), self._any] if c}.values():
            conn.close()
        self._connections.clear()
        self._any = None

    def _bootstrap_connection(self) -> BrokerConnection:
        if self._any is not None:
            return self._any
        errors = []
        for host, port in self._bootstrap:
            try:
                self._any = BrokerConnection(host, port, self._connect)
                return self._any
            except KafkaWireError as exc:
                errors.append(str(exc))
        raise KafkaWireError("no bootstrap server reachable: " + "; ".join(errors))

    def refresh(self, topics: Iterable[str] | None = None) -> None:
        """Reload metadata, for the named topics or for all (without creating topics)."""
        conn = self._bootstrap_connection()
        version = conn.version(m.ApiKey.METADATA)
        wanted = None if topics is None else [
            m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        body = m.MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
        response = conn.request(m.ApiKey.METADATA, version, body)
        assert isinstance(response, m.MetadataResponse)
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            if t.name is None:
                continue
            error = _code(t.error_code)
            if error != ErrorCode.NONE:
                self.topic_errors[t.name] = error
                self.topics.pop(t.name, None)
                continue
            self.topic_errors.pop(t.name, None)
            self.topics[t.name] = sorted(
                (PartitionInfo(p.partition_index, p.leader_id, _code(p.error_code))
                 for p in t.partitions), key=lambda p: p.partition)

    def partitions(self, topic: str) -> list[int]:
        return [p.partition for p in self.topics.get(topic, [])]

    def leader(self, tp: TopicPartition) -> int:
        for p in self.topics.get(tp.topic, []):
            if p.partition == tp.partition:
                if p.leader < 0:
                    raise KafkaWireError(f"{tp} has no leader", ErrorCode.LEADER_NOT_AVAILABLE)
                return p.leader
        raise KafkaWireError(f"{tp} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is None:
            if node_id not in self._brokers:
                raise KafkaWireError(f"broker {node_id} is not in the metadata")
            host, port = self._brokers[node_id]
            conn = BrokerConnection(host, port, self._connect)
            self._connections[node_id] = conn
        return conn

    def forget(self, conn: BrokerConnection) -> None:
        """Closes a connection that failed, so the next request opens a new one."""
        for node, known in list(self._connections.items()):
            if known is conn:
                del self._connections[node]
        if self._any is conn:
            self._any = None
        conn.close()

    def list_offsets(self, wanted: Mapping[TopicPartition, int], *,
                     read_committed: bool = False) -> dict[TopicPartition, tuple[int, int]]:
        """``(offset, timestamp)`` per partition for each target timestamp (or EARLIEST /
        LATEST); offset -1 when no record has a timestamp at or after the target.

        Partitions whose leader is moving are asked again, with fresh metadata and a
        growing pause, for up to the cluster's timeout: a retriable error code, no leader
        yet, or a leader that cannot be reached (a broker that died stays the leader in
        the metadata until its session expires and the controller elects another)."""
        result: dict[TopicPartition, tuple[int, int]] = {}
        todo = dict(wanted)
        deadline = time.monotonic() + self._timeout_s
        pause = _RETRY_PAUSE_S
        stale: KafkaWireError | None = None  # why the metadata could not be refreshed
        while True:
            todo, failure = self._list_offsets_round(todo, result, read_committed)
            if failure is None:
                return result
            if time.monotonic() + pause > deadline:
                raise stale or failure
            time.sleep(pause)
            pause = min(pause * 2, _RETRY_PAUSE_MAX_S)
            try:
                self.refresh({tp.topic for tp in todo})
                stale = None
            except KafkaWireError as exc:
                # The broker asked for metadata is gone too: the next refresh goes through
                # the bootstrap servers again.
                stale = exc
                if self._any is not None:
                    self.forget(self._any)

    def _list_offsets_round(self, todo: Mapping[TopicPartition, int],
                            result: dict[TopicPartition, tuple[int, int]],
                            read_committed: bool
                            ) -> tuple[dict[TopicPartition, int], KafkaWireError | None]:
        """One ListOffsets per leader; answers go to ``result``. Returns the partitions to
        ask again and the last retriable failure (None when there are none); raises
        any other failure."""
        retry: dict[TopicPartition, int] = {}
        failure: KafkaWireError | None = None
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in todo:
            try:
                by_leader.setdefault(self.leader(tp), []).append(tp)
            except KafkaWireError as exc:
                if exc.code not in _RETRIABLE_LEADER:
                    raise
                retry[tp], failure = todo[tp], exc
        for node, tps in by_leader.items():
            try:
                answers = self._list_offsets_on(node, tps, todo, read_committed)
            except _Unreachable as exc:
                retry.update((tp, todo[tp]) for tp in tps)
                failure = exc.error
                continue
            for tp, answer in answers:
                if isinstance(answer, ErrorCode):
                    error = KafkaWireError(f"ListOffsets for {tp} failed: {answer.name}",
                                           answer)
                    if answer not in _RETRIABLE_LEADER:
                        raise error
                    retry[tp], failure = todo[tp], error
                else:
                    result[tp] = answer
        return retry, failure

    def _list_offsets_on(self, node: int, tps: list[TopicPartition],
                         targets: Mapping[TopicPartition, int], read_committed: bool
                         ) -> list[tuple[TopicPartition, tuple[int, int] | ErrorCode]]:
        try:
            conn = self.connection(node)
        except KafkaWireError as exc:
            raise _Unreachable(exc) from exc
        version = conn.version(m.ApiKey.LIST_OFFSETS)
        req = m.ListOffsetsRequest
        by_topic: dict[str, list[m.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(req.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=tp.partition, timestamp=targets[tp]))
        body = req(replica_id=-1, isolation_level=1 if read_committed else 0,
                   topics=[req.ListOffsetsTopic(name=t, partitions=ps)
                           for t, ps in by_topic.items()])
        try:
            response = conn.request(m.ApiKey.LIST_OFFSETS, version, body)
        except KafkaWireError as exc:
            self.forget(conn)
            raise _Unreachable(exc) from exc
        assert isinstance(response, m.ListOffsetsResponse)
        out: list[tuple[TopicPartition, tuple[int, int] | ErrorCode]] = []
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                error = _code(p.error_code)
                out.append((tp, error if error != ErrorCode.NONE else (p.offset, p.timestamp)))
        return out

    def send_fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int,
                   max_wait_ms: int, read_committed: bool) -> BrokerConnection:
        """Sends a Fetch for one partition to its leader; ``receive_fetch`` reads the answer
        (so the next fetch can be in flight while the last one is decoded)."""
        conn = self.connection(self.leader(tp))
        req = m.FetchRequest
        body = req(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
            isolation_level=1 if read_committed else 0, session_id=0, session_epoch=-1,
            topics=[req.FetchTopic(topic=tp.topic, partitions=[req.FetchTopic.FetchPartition(
                partition=tp.partition, fetch_offset=offset, partition_max_bytes=max_bytes)])],
        )
        conn.send(m.ApiKey.FETCH, conn.version(m.ApiKey.FETCH), body)
        return conn

    @staticmethod
    def receive_fetch(conn: BrokerConnection) -> FetchedPartition:
        response = conn.receive()
        assert isinstance(response, m.FetchResponse)
        if response.error_code:
            code = _code(response.error_code)
            raise KafkaWireError(f"Fetch failed on {conn.address}: {code.name}", code)
        if len(response.responses) != 1 or len(response.responses[0].partitions) != 1:
            raise KafkaWireError(f"broker {conn.address} answered a fetch for other partitions")
        p = response.responses[0].partitions[0]
        aborted = None
        if p.aborted_transactions is not None:
            aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
        records = p.records if p.records is not None else memoryview(b"")
        return FetchedPartition(_code(p.error_code), p.high_watermark, p.last_stable_offset,
                                p.log_start_offset, aborted, memoryview(records))
