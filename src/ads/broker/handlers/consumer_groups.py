"""KIP-848 consumer groups: ConsumerGroupHeartbeat (key 68) v0-1 and ConsumerGroupDescribe
(key 69) v0.

Assignment is computed by the broker ("uniform" by default, or "range" when the member
asks for it with `group.remote.assignor`). v0 lets the broker pick the member id; v1 wants
the client's. Gaps: group state is not persisted (offsets are), so members rejoin after a
coordinator restart; topic regexes use Python's `re` syntax rather than RE2J; authorized
operations are not computed.
"""

from __future__ import annotations

from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.handlers.groups import client_host
from ads.coordinator.group.consumer import ConsumerGroup, HeartbeatRequest, Owned
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

HR = m.ConsumerGroupHeartbeatResponse
DR = m.ConsumerGroupDescribeResponse


def handle_heartbeat(ctx: RequestContext, req: m.ConsumerGroupHeartbeatRequest
                     ) -> m.ConsumerGroupHeartbeatResponse:
    owned: Owned | None = None
    if req.topic_partitions is not None:
        owned = {}
        for tp in req.topic_partitions:
            if tp.partitions:
                owned.setdefault(tp.topic_id, set()).update(tp.partitions)
    hb = HeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=req.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=req.server_assignor, topic_partitions=owned,
        client_id=ctx.client_id or "", client_host=client_host(ctx))
    r = ctx.broker.group_coordinator.consumer.heartbeat(hb, ctx.api_version)
    assignment = None
    if r.assignment is not None:
        assignment = HR.Assignment(topic_partitions=[
            HR.TopicPartitions(topic_id=t, partitions=sorted(p))
            for t, p in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))])
    return m.ConsumerGroupHeartbeatResponse(
        error_code=r.error, error_message=r.error_message, member_id=r.member_id,
        member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment)


def _assignment(ctx: RequestContext, owned: Owned) -> m.ConsumerGroupDescribeResponse.Assignment:
    log = ctx.broker.group_coordinator.log
    return DR.Assignment(topic_partitions=[
        DR.TopicPartitions(topic_id=t, topic_name=log.topic_name(t) or "", partitions=sorted(p))
        for t, p in sorted(owned.items(), key=lambda kv: str(kv[0])) if p])


def handle_describe(ctx: RequestContext, req: m.ConsumerGroupDescribeRequest
                    ) -> m.ConsumerGroupDescribeResponse:
    coordinator = ctx.broker.group_coordinator
    out = []
    for group_id in req.group_ids:
        error = coordinator.group_error(group_id)
        group = coordinator.groups.get(group_id)
        if error is ErrorCode.NONE and not isinstance(group, ConsumerGroup):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is not ErrorCode.NONE or not isinstance(group, ConsumerGroup):
            message = (f"Group {group_id} is not a consumer group."
                       if error is ErrorCode.GROUP_ID_NOT_FOUND else None)
            out.append(DR.DescribedGroup(error_code=error, error_message=message,
                                         group_id=group_id, group_state="Dead"))
            continue
        members = [DR.DescribedGroup.Member(
            member_id=mem.member_id, instance_id=mem.instance_id, rack_id=mem.rack_id,
            member_epoch=mem.member_epoch, client_id=mem.client_id,
            client_host=mem.client_host, subscribed_topic_names=list(mem.subscribed_topic_names),
            subscribed_topic_regex=mem.subscribed_topic_regex,
            assignment=_assignment(ctx, mem.assigned),
            target_assignment=_assignment(ctx, group.target.get(mem.member_id, {})))
            for mem in group.members.values()]
        out.append(DR.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state_name,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name, members=members))
    return m.ConsumerGroupDescribeResponse(groups=out)


HANDLERS = [
    ApiHandler(m.ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, handle_heartbeat),
    ApiHandler(m.ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 0, handle_describe),
]
