"""ListOffsets (key 2) v1-10, OffsetForLeaderEpoch (key 23) v2-4, DeleteRecords (key 21) v0-2.

ListOffsets special timestamps: -2 earliest (log start offset), -1 latest (high watermark,
or the last stable offset for read_committed; the log end offset for a request with a
replica id, as Kafka answers followers and tools), -3 the offset of the largest timestamp,
-4 earliest local (same as earliest: there is no tiered storage), -5 earliest pending
upload (none: -1). A timestamp lookup returns the first record whose timestamp is at or
after the target, as Kafka does. Replica id -2 (Kafka's debugging id, used by
`ads topics describe --replica-offsets`) may ask any replica, leader or follower.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.acl import CLUSTER_NAME
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.replication.partition import PartitionError

if TYPE_CHECKING:
    from ads.replication.replica_manager import ReplicaManager

log = logging.getLogger("ads.broker")

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2
LR = m.ListOffsetsResponse
LP = m.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition


def _list_one(replicas: ReplicaManager, topic: str, p: LP, version: int,
              read_committed: bool | None, any_replica: bool) -> tuple[int, int, int]:
    """Returns (timestamp, offset, leader_epoch) for a ListOffsets lookup; `read_committed`
    None: not a client's request, latest is the log end offset."""
    index, timestamp = p.partition_index, p.timestamp
    part = replicas.replica(topic, index) if any_replica else replicas.partition(topic, index)
    if timestamp < EARLIEST_PENDING_UPLOAD or (timestamp == MAX_TIMESTAMP and version < 7):
        raise PartitionError(ErrorCode.UNSUPPORTED_VERSION,
                             f"ListOffsets v{version} with timestamp {timestamp}")
    if version >= 4:
        part.check_leader_epoch(p.current_leader_epoch)
    epoch = part.leader_epoch
    if timestamp == LATEST:
        if read_committed is None:
            return -1, part.log_end_offset, epoch
        return -1, (part.last_stable_offset if read_committed else part.high_watermark), epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, part.log_start_offset, epoch
    if timestamp == EARLIEST_PENDING_UPLOAD:
        return -1, -1, -1
    try:
        found = part.offset_for_timestamp(timestamp)
    except PartitionError as exc:
        # A stored batch the lookup must read inside does not decode (a decompression bomb
        # is stored as produced): this partition's answer fails, as Kafka's would.
        log.warning("ListOffsets on %s-%d by timestamp %d: %s", topic, index, timestamp, exc)
        raise
    if found is None:
        return -1, -1, -1
    offset, ts, leader_epoch = found
    return ts, offset, leader_epoch


def _denied(ctx: RequestContext, rule: P.Rule, names: list[str]) -> set[str]:
    """The topics of a request the principal may not act on as `rule` requires."""
    return {n for n in names if not ctx.authorize(rule.resource, n, rule.operation)}


def handle_list_offsets(ctx: RequestContext, req: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
    replicas = ctx.broker.replica_manager
    read_committed: bool | None = ctx.api_version >= 2 and req.isolation_level == 1
    if req.replica_id != CONSUMER_REPLICA_ID:
        read_committed = None
    any_replica = req.replica_id == DEBUGGING_REPLICA_ID
    denied = _denied(ctx, P.DESCRIBE_TOPIC, [t.name for t in req.topics])
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            resp = LR.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=ErrorCode.NONE,
                timestamp=-1, offset=-1, leader_epoch=-1)
            if t.name in denied:
                resp.error_code = P.DESCRIBE_TOPIC.error
            else:
                try:
                    resp.timestamp, resp.offset, resp.leader_epoch = _list_one(
                        replicas, t.name, p, ctx.api_version, read_committed, any_replica)
                except PartitionError as exc:
                    if exc.code is ErrorCode.UNSUPPORTED_VERSION:
                        ctx.refused(f"{exc.message}: not supported (UNSUPPORTED_VERSION)")
                    resp.error_code = exc.code
            parts.append(resp)
        topics.append(LR.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return m.ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def handle_offset_for_leader_epoch(ctx: RequestContext, req: m.OffsetForLeaderEpochRequest
                                   ) -> m.OffsetForLeaderEpochResponse:
    replicas = ctx.broker.replica_manager
    R = m.OffsetForLeaderEpochResponse  # noqa: N806
    cluster = P.LEADER_EPOCH_CLUSTER
    denied = set() if ctx.authorize(cluster.resource, CLUSTER_NAME, cluster.operation) else (
        _denied(ctx, P.DESCRIBE_TOPIC, [t.topic for t in req.topics]))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            resp = R.OffsetForLeaderTopicResult.EpochEndOffset(
                partition=p.partition, error_code=ErrorCode.NONE, leader_epoch=-1, end_offset=-1)
            if t.topic in denied:
                resp.error_code = P.DESCRIBE_TOPIC.error
            else:
                try:
                    resp.leader_epoch, resp.end_offset = replicas.end_offset_for_epoch(
                        t.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
                except PartitionError as exc:
                    resp.error_code = exc.code
            parts.append(resp)
        topics.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return m.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def handle_delete_records(ctx: RequestContext, req: m.DeleteRecordsRequest
                          ) -> m.DeleteRecordsResponse:
    replicas = ctx.broker.replica_manager
    R = m.DeleteRecordsResponse  # noqa: N806
    denied = _denied(ctx, P.DELETE_RECORDS, [t.name for t in req.topics])
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            resp = R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE)
            if t.name in denied:
                resp.error_code = P.DELETE_RECORDS.error
            else:
                try:
                    resp.low_watermark = replicas.delete_records(t.name, p.partition_index,
                                                                 p.offset)
                except PartitionError as exc:
                    resp.error_code = exc.code
            parts.append(resp)
        topics.append(R.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return m.DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


HANDLERS = [
    ApiHandler(m.ListOffsetsRequest, m.ListOffsetsResponse, 1, 10, handle_list_offsets),
    ApiHandler(m.OffsetForLeaderEpochRequest, m.OffsetForLeaderEpochResponse,
               2, 4, handle_offset_for_leader_epoch),
    ApiHandler(m.DeleteRecordsRequest, m.DeleteRecordsResponse, 0, 2, handle_delete_records),
]
