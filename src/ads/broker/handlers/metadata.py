"""Metadata (key 3), versions 0-12, DescribeCluster (key 60), versions 0-1, and
DescribeTopicPartitions (key 75, KIP-966), version 0.

Brokers are the live ones the metadata store knows, each with its endpoint of the listener
the request came in on (a broker without that listener is left out, and a partition it
leads answers LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before, as Kafka); the
controller is the store's controller. A
partition is listed with its leader when that leader is live and, if it is this broker,
serves it; otherwise with LEADER_NOT_AVAILABLE and no leader (a new topic while its leaders
are elected and its files made, or a partition whose replicas are all down), and clients
ask again. Replicas on brokers that are not live are listed as offline.

From v12 a requested topic may be named by its topic id: an entry with a topic id is looked
up by it whatever its name (null, or "" as Kafka's Java client leaves it), and an unknown
id answers UNKNOWN_TOPIC_ID.

Metadata auto-creates a requested topic when `auto.create.topics.enable` is true and the
request allows it (v4+), with `num.partitions` and `default.replication.factor`.
Authorized operations (KIP-430) are filled in when asked for: a topic's from v8, the
cluster's in v8-10 (later versions moved it to DescribeCluster), each from
`ads.broker.authorized_operations` (every operation that applies, until ACLs exist);
otherwise the fields keep their "not requested" default, -2147483648.

With an authorizer (`ads.broker.permissions`): a listing of all topics shows only those the
principal may DESCRIBE; a named topic it may not describe is answered
TOPIC_AUTHORIZATION_FAILED (whether or not it exists, so names do not leak); auto-creation
needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. The cluster's
authorized operations are reported only to a principal that may DESCRIBE the cluster.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, NamedTuple

from ads.broker import permissions as P
from ads.broker.authorized_operations import NOT_REQUESTED, ResourceType
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.common.partitions import TopicPartition
from ads.metadata.acl import CLUSTER_NAME
from ads.metadata.assignment import AssignmentError
from ads.metadata.model import (
    BrokerEndpoint,
    InvalidTopicError,
    ListenerEndpoint,
    PartitionState,
    TopicState,
    validate_topic_name,
)
from ads.metadata.store import TopicExistsError
from ads.net.server import CloseConnection
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext

log = logging.getLogger("ads.broker.metadata")
ZERO_UUID = uuid.UUID(int=0)
_NONE: list[int] = []  # shared by every partition with no offline replica; never changed
R = m.MetadataResponse


def _cached_entry(ctx: RequestContext, topic: TopicState, everywhere: bool
                  ) -> R.MetadataResponseTopic:
    """The topic's entry, built once per metadata version while all its partitions are
    served: building a 1,000-partition entry took a third of a Metadata request. Entries
    are the same on every listener that every live broker has; only those are cached."""
    broker = ctx.broker
    listener = ctx.connection.listener_name
    cache = broker.metadata_entries
    hit = cache.get(topic) if everywhere else None
    if hit is not None:
        return hit
    entry = _topic_entry(topic, broker, listener,
                         ErrorCode.LISTENER_NOT_FOUND if ctx.api_version >= 6
                         else ErrorCode.LEADER_NOT_AVAILABLE)
    if everywhere and all(p.error_code == ErrorCode.NONE for p in entry.partitions):
        cache.put(topic, entry, len(broker.metadata.topics))
    return entry


class _PartitionView(NamedTuple):
    """A partition as Metadata and DescribeTopicPartitions list it."""

    error: ErrorCode
    state: PartitionState
    leader: int  # -1 when it has none the client can reach
    offline: list[int]


def _partition_views(topic: TopicState, broker: BrokerContext, listener: str,
                     no_listener: ErrorCode, first: int = 0, count: int | None = None
                     ) -> list[_PartitionView]:
    live = broker.metadata.brokers
    here = broker.node_id
    rm = broker.replica_manager
    views = []
    end = len(topic.partitions) if count is None else first + count
    for p in topic.partitions[first:end]:
        up = p.leader in live and (p.leader != here
                                   or TopicPartition(topic.name, p.partition) in rm)
        error = ErrorCode.NONE if up else ErrorCode.LEADER_NOT_AVAILABLE
        if up and live[p.leader].on(listener) is None:
            up, error = False, no_listener
        offline = [r for r in p.replicas if r not in live]
        views.append(_PartitionView(error, p, p.leader if up else -1, offline or _NONE))
    return views


def _topic_entry(topic: TopicState, broker: BrokerContext, listener: str,
                 no_listener: ErrorCode) -> R.MetadataResponseTopic:
    # The state's own lists, not copies: an entry is cached for as long as the metadata
    # version it was built from, and a change replaces a state's lists rather than editing
    # them; entries are only encoded, never changed. Three lists per partition were a
    # tenth of what a partition costs the broker in memory.
    parts = [R.MetadataResponseTopic.MetadataResponsePartition(
        error_code=v.error, partition_index=v.state.partition, leader_id=v.leader,
        leader_epoch=v.state.leader_epoch, replica_nodes=v.state.replicas,
        isr_nodes=v.state.isr, offline_replicas=v.offline)
        for v in _partition_views(topic, broker, listener, no_listener)]
    return R.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
        is_internal=topic.is_internal, partitions=parts)


def _error_entry(code: ErrorCode, name: str | None, topic_id: uuid.UUID = ZERO_UUID
                 ) -> R.MetadataResponseTopic:
    return R.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])


def _all_topics(ctx: RequestContext, req: m.MetadataRequest) -> bool:
    return req.topics is None or (ctx.api_version == 0 and not req.topics)


def handle_metadata(ctx: RequestContext, req: m.MetadataRequest
                    ) -> m.MetadataResponse | Awaitable[m.MetadataResponse]:
    broker = ctx.broker
    if ctx.api_version < 12 and any(w.name is None for w in req.topics or []):
        # v10 and v11 let the name be null on the wire but look topics up by name only, and
        # their response cannot carry a null name; Kafka refuses such a request as invalid.
        log.warning("closing connection from %s (client %r): Metadata v%d with a null topic "
                    "name (topic ids are looked up from v12)", ctx.connection.peer,
                    ctx.client_id, ctx.api_version)
        raise CloseConnection
    if _all_topics(ctx, req) or not _auto_create(ctx, req):
        return _answer(ctx, req, set())
    missing = [w.name for w in req.topics or [] if w.name is not None
               and w.name not in broker.metadata.topics and _valid(w.name)
               and _describable(ctx, w.name) and _creatable(ctx, w.name)]
    if not missing:
        return _answer(ctx, req, set())
    return _create_then_answer(ctx, req, missing)


def _auto_create(ctx: RequestContext, req: m.MetadataRequest) -> bool:
    return bool((req.allow_auto_topic_creation if ctx.api_version >= 4 else True)
                and ctx.broker.settings.auto_create_topics)


def _describable(ctx: RequestContext, name: str) -> bool:
    rule = P.DESCRIBE_TOPIC
    return ctx.authorize(rule.resource, name, rule.operation)


def _creatable(ctx: RequestContext, name: str) -> bool:
    cluster, topic = P.AUTO_CREATE_CLUSTER, P.AUTO_CREATE_TOPIC
    return (ctx.authorize(cluster.resource, CLUSTER_NAME, cluster.operation)
            or ctx.authorize(topic.resource, name, topic.operation))


def _valid(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


async def _create_then_answer(ctx: RequestContext, req: m.MetadataRequest,
                              missing: list[str]) -> m.MetadataResponse:
    broker = ctx.broker
    refused: set[str] = set()
    for name in dict.fromkeys(missing):
        if name in broker.metadata.topics:
            continue
        try:
            await broker.topics.record_topic(name, broker.settings.num_partitions, {},
                                      broker.settings.default_replication_factor)
        except TopicExistsError:
            pass  # created meanwhile by another request or broker
        except AssignmentError as exc:
            log.info("not auto-creating topic %s: %s", name, exc)
            refused.add(name)
    return _answer(ctx, req, refused)


def _answer(ctx: RequestContext, req: m.MetadataRequest, refused: set[str]
            ) -> m.MetadataResponse:
    broker = ctx.broker
    everywhere = all(b.on(ctx.connection.listener_name) is not None
                     for b in broker.metadata.brokers.values())
    topics: list[R.MetadataResponseTopic] = []
    if _all_topics(ctx, req):
        topics = [_cached_entry(ctx, t, everywhere) for t in broker.metadata.topics.values()
                  if not ctx.authorizing or _describable(ctx, t.name)]
    else:
        for wanted in req.topics or []:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", ZERO_UUID)
            # From v12 a topic id given names the topic, as in Kafka: Kafka's Java client
            # asks by id with the name left at its default, "" (to resolve a KIP-848
            # assignment to names).
            if name is None or (topic_id != ZERO_UUID and ctx.api_version >= 12):
                found = broker.metadata.topic_by_id(topic_id)
                if found is not None and not _describable(ctx, found.name):
                    topics.append(_error_entry(P.DESCRIBE_TOPIC.error, None, topic_id))
                    continue
                topics.append(_cached_entry(ctx, found, everywhere) if found
                              else _error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id))
                continue
            if not _describable(ctx, name):
                topics.append(_error_entry(P.DESCRIBE_TOPIC.error, name))
                continue
            topic = broker.metadata.topics.get(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                except InvalidTopicError:
                    topics.append(_error_entry(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                    continue
                code = (ErrorCode.INVALID_REPLICATION_FACTOR if name in refused
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and _auto_create(ctx, req) \
                        and not _creatable(ctx, name):
                    code = P.AUTO_CREATE_TOPIC.error
                topics.append(_error_entry(code, name))
                continue
            topics.append(_cached_entry(ctx, topic, everywhere))
    v = ctx.api_version
    cluster_operations = NOT_REQUESTED
    if v >= 8:
        if req.include_topic_authorized_operations:
            # Copies: the cached entries are shared by every response.
            topics = [_with_operations(t, ctx.authorized_operations(ResourceType.TOPIC,
                                                                    t.name or ""))
                      for t in topics]
        rule = P.DESCRIBE_CLUSTER_OPS
        if v <= 10 and req.include_cluster_authorized_operations and ctx.authorize(
                rule.resource, CLUSTER_NAME, rule.operation):
            cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER,
                                                           CLUSTER_NAME)
    return m.MetadataResponse(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=b.node_id, host=e.host, port=e.port,
                                          rack=b.rack)
                 for b, e in listener_endpoints(broker, ctx.connection.listener_name)],
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.metadata.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )


def _with_operations(entry: R.MetadataResponseTopic, operations: int
                     ) -> R.MetadataResponseTopic:
    return R.MetadataResponseTopic(
        error_code=entry.error_code, name=entry.name, topic_id=entry.topic_id,
        is_internal=entry.is_internal, partitions=entry.partitions,
        topic_authorized_operations=operations)


def handle_describe_cluster(ctx: RequestContext, req: m.DescribeClusterRequest
                            ) -> m.DescribeClusterResponse:
    broker = ctx.broker
    endpoint_type = getattr(req, "endpoint_type", 1)
    if endpoint_type != 1:
        return m.DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="ADS brokers have no separate controller endpoints",
            endpoint_type=endpoint_type, cluster_id=broker.metadata.cluster_id)
    operations = NOT_REQUESTED
    rule = P.DESCRIBE_CLUSTER_OPS
    if req.include_cluster_authorized_operations:
        operations = (ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
                      if ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation) else 0)
    return m.DescribeClusterResponse(
        error_code=ErrorCode.NONE, endpoint_type=1, cluster_id=broker.metadata.cluster_id,
        controller_id=broker.metadata.controller_id,
        cluster_authorized_operations=operations,
        brokers=[m.DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.node_id, host=e.host, port=e.port, rack=b.rack)
            for b, e in listener_endpoints(broker, ctx.connection.listener_name)])


D = m.DescribeTopicPartitionsResponse
DTopic = D.DescribeTopicPartitionsResponseTopic
DPartition = DTopic.DescribeTopicPartitionsResponsePartition


def handle_describe_topic_partitions(ctx: RequestContext,
                                     req: m.DescribeTopicPartitionsRequest
                                     ) -> m.DescribeTopicPartitionsResponse:
    """KIP-966: the named topics (none: every topic the principal may describe), by name,
    from the cursor on, at most `response_partition_limit` partitions (and at most
    `max.request.partition.size.limit`) per response; `next_cursor` says where the next
    page starts. Errors per topic as Metadata's: UNKNOWN_TOPIC_OR_PARTITION (nothing is
    created), TOPIC_AUTHORIZATION_FAILED, INVALID_TOPIC_EXCEPTION."""
    broker = ctx.broker
    cursor = req.cursor
    if req.topics:
        names = sorted({t.name for t in req.topics})
        if cursor is not None and cursor.topic_name not in names:
            log.info("DescribeTopicPartitions from %s: the cursor's topic %r is not asked for",
                     ctx.connection.peer, cursor.topic_name)
            return D(throttle_time_ms=0, topics=[_described_error(
                ErrorCode.INVALID_REQUEST, cursor.topic_name)])
    else:
        names = sorted(n for n in broker.metadata.topics if _describable(ctx, n))
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    left = min(req.response_partition_limit,
               broker.settings.describe_partition_limit)
    topics: list[DTopic] = []
    next_cursor = None
    for name in names:
        entry = _described_topic(ctx, name)
        if isinstance(entry, DTopic):  # an error: no partitions, nothing of the limit
            topics.append(entry)
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if left <= 0:
            next_cursor = D.Cursor(topic_name=name, partition_index=first)
            break
        views = _partition_views(entry, broker, ctx.connection.listener_name,
                                 ErrorCode.LISTENER_NOT_FOUND, first, left)
        left -= len(views)
        topics.append(DTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=entry.topic_id,
            is_internal=entry.is_internal, partitions=[DPartition(
                error_code=v.error, partition_index=v.state.partition, leader_id=v.leader,
                leader_epoch=v.state.leader_epoch, replica_nodes=list(v.state.replicas),
                isr_nodes=list(v.state.isr), eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=v.offline) for v in views],
            topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
        shown = first + len(views)
        if shown < len(entry.partitions):
            next_cursor = D.Cursor(topic_name=name, partition_index=shown)
            break
    return D(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _described_topic(ctx: RequestContext, name: str) -> TopicState | DTopic:
    """The topic, or its entry with the error that keeps it from being described."""
    if not _describable(ctx, name):
        return _described_error(P.DESCRIBE_TOPIC.error, name)
    topic = ctx.broker.metadata.topics.get(name)
    if topic is not None:
        return topic
    return _described_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if _valid(name)
                            else ErrorCode.INVALID_TOPIC_EXCEPTION, name)


def _described_error(code: ErrorCode, name: str) -> DTopic:
    return DTopic(error_code=code, name=name, topic_id=ZERO_UUID, partitions=[])


def listener_endpoints(broker: BrokerContext, listener: str
                       ) -> list[tuple[BrokerEndpoint, ListenerEndpoint]]:
    """The live brokers that have `listener`, by node id, each with its endpoint there."""
    out = []
    for b in sorted(broker.metadata.brokers.values(), key=lambda b: b.node_id):
        e = b.on(listener)
        if e is not None:
            out.append((b, e))
    return out


HANDLERS = [
    ApiHandler(m.MetadataRequest, m.MetadataResponse, 0, 12, handle_metadata),
    ApiHandler(m.DescribeClusterRequest, m.DescribeClusterResponse, 0, 1, handle_describe_cluster),
    ApiHandler(m.DescribeTopicPartitionsRequest, m.DescribeTopicPartitionsResponse, 0, 0,
               handle_describe_topic_partitions),
]
