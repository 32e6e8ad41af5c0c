"""Metadata (key 3), versions 0-12, and DescribeCluster (key 60), versions 0-1.

Metadata auto-creates a requested topic when `auto.create.topics.enable` is true and the
request allows it (v4+). Its partitions' files are made off the event loop; until a
partition is served it is listed with LEADER_NOT_AVAILABLE and no leader (as in Kafka
while a new topic's leaders are elected), and clients ask again.
Authorized operations (KIP-430) are filled in when asked for: a topic's from v8, the
cluster's in v8-10 (later versions moved it to DescribeCluster), each from
`ads.broker.authorized_operations` (every operation that applies, until ACLs exist);
otherwise the fields keep their "not requested" default, -2147483648.
"""

from __future__ import annotations

import uuid
from collections.abc import Container
from typing import TYPE_CHECKING

from ads.broker.authorized_operations import NOT_REQUESTED, ResourceType
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.model import InvalidTopicError, TopicState, validate_topic_name
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext

ZERO_UUID = uuid.UUID(int=0)
CLUSTER_NAME = "kafka-cluster"  # Kafka's name of the one cluster resource
R = m.MetadataResponse


def _cached_entry(broker: BrokerContext, topic: TopicState) -> R.MetadataResponseTopic:
    """The topic's entry, built once per metadata version while all its partitions are
    served: building a 1,000-partition entry took a third of a Metadata request."""
    cache = broker.metadata_entries
    hit = cache.get(topic)
    if hit is not None:
        return hit
    entry = _topic_entry(topic, broker.replica_manager)
    if all(p.error_code == ErrorCode.NONE for p in entry.partitions):
        cache.put(topic, entry, len(broker.metadata.topics))
    return entry


def _topic_entry(topic: TopicState, served: Container[tuple[str, int]]
                 ) -> R.MetadataResponseTopic:
    parts = []
    for p in topic.partitions:
        up = (topic.name, p.partition) in served
        parts.append(R.MetadataResponseTopic.MetadataResponsePartition(
            error_code=ErrorCode.NONE if up else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.partition, leader_id=p.leader if up else -1,
            leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=[]))
    return R.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
        is_internal=topic.is_internal, partitions=parts)


def _error_entry(code: ErrorCode, name: str | None, topic_id: uuid.UUID = ZERO_UUID
                 ) -> R.MetadataResponseTopic:
    return R.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])


def handle_metadata(ctx: RequestContext, req: m.MetadataRequest) -> m.MetadataResponse:
    broker = ctx.broker
    topics: list[R.MetadataResponseTopic] = []
    if req.topics is None or (ctx.api_version == 0 and not req.topics):
        topics = [_cached_entry(broker, t) for t in broker.metadata.topics.values()]
    else:
        allow_create = (req.allow_auto_topic_creation if ctx.api_version >= 4 else True) and bool(
            broker.config.get("auto.create.topics.enable"))
        for wanted in req.topics:
            name = wanted.name
            if name is None:
                topic_id = getattr(wanted, "topic_id", ZERO_UUID)
                found = broker.metadata.topic_by_id(topic_id)
                topics.append(_cached_entry(broker, found) if found
                              else _error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id))
                continue
            topic = broker.metadata.topics.get(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                except InvalidTopicError:
                    topics.append(_error_entry(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                    continue
                if not allow_create:
                    topics.append(_error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
                    continue
                topic = broker.record_topic(name, broker.config.get_int("num.partitions"), {})
                broker.open_in_background(topic)
            topics.append(_cached_entry(broker, topic))
    v = ctx.api_version
    cluster_operations = NOT_REQUESTED
    if v >= 8:
        if req.include_topic_authorized_operations:
            # Copies: the cached entries are shared by every response.
            topics = [_with_operations(t, ctx.authorized_operations(ResourceType.TOPIC,
                                                                    t.name or ""))
                      for t in topics]
        if v <= 10 and req.include_cluster_authorized_operations:
            cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER,
                                                           CLUSTER_NAME)
    ep = broker.endpoint
    return m.MetadataResponse(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=ep.node_id, host=ep.host, port=ep.port,
                                          rack=ep.rack)],
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id,
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
    ep = broker.endpoint
    endpoint_type = getattr(req, "endpoint_type", 1)
    if endpoint_type != 1:
        return m.DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="ADS brokers have no separate controller endpoints",
            endpoint_type=endpoint_type, cluster_id=broker.metadata.cluster_id)
    operations = NOT_REQUESTED
    if req.include_cluster_authorized_operations:
        operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return m.DescribeClusterResponse(
        error_code=ErrorCode.NONE, endpoint_type=1, cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id, cluster_authorized_operations=operations,
        brokers=[m.DescribeClusterResponse.DescribeClusterBroker(
            broker_id=ep.node_id, host=ep.host, port=ep.port, rack=ep.rack)])


HANDLERS = [
    ApiHandler(m.ApiKey.METADATA, 0, 12, handle_metadata),
    ApiHandler(m.ApiKey.DESCRIBE_CLUSTER, 0, 1, handle_describe_cluster),
]
