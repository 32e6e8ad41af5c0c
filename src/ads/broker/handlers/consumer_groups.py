"""KIP-848 consumer groups: ConsumerGroupHeartbeat (key 68) v0-1 and ConsumerGroupDescribe
(key 69) v0.

Assignment is computed by the broker ("uniform" by default, or "range" when the member
asks for it with `group.remote.assignor`). v0 lets the broker pick the member id; v1 wants
the client's. The rules (epochs, member states, answers) are in
`ads.coordinator.group.consumer_state`; this module maps requests to calls of the
`GroupCoordinator` and its results back to responses. A heartbeat is answered once the
records of what it changed are committed to `__consumer_offsets`, so members keep their
ids and epochs across a coordinator move or restart. Gaps: topic regexes use Python's
`re` syntax rather than RE2J. Authorized operations (KIP-430) are reported when asked,
for groups described without error.
"""

from __future__ import annotations

from ads.broker import permissions as P
from ads.broker.authorized_operations import NOT_REQUESTED, ResourceType
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.handlers.groups import client_host
from ads.coordinator.group.api import AssignedPartitions, HeartbeatRequest, Owned
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

HR = m.ConsumerGroupHeartbeatResponse
DR = m.ConsumerGroupDescribeResponse


async def handle_heartbeat(ctx: RequestContext, req: m.ConsumerGroupHeartbeatRequest
                           ) -> m.ConsumerGroupHeartbeatResponse:
    rule = P.GROUP_READ
    if not ctx.authorize(rule.resource, req.group_id, rule.operation):
        return m.ConsumerGroupHeartbeatResponse(error_code=rule.error, error_message=None,
                                                member_id=None, member_epoch=0,
                                                heartbeat_interval_ms=0)
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
    r = await ctx.broker.group_coordinator.consumer_heartbeat(hb, ctx.api_version)
    assignment = None
    if r.assignment is not None:
        assignment = HR.Assignment(topic_partitions=[
            HR.TopicPartitions(topic_id=t, partitions=sorted(p))
            for t, p in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))])
    return m.ConsumerGroupHeartbeatResponse(
        error_code=r.error, error_message=r.error_message, member_id=r.member_id,
        member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment)


def _assignment(owned: tuple[AssignedPartitions, ...]) -> DR.Assignment:
    return DR.Assignment(topic_partitions=[
        DR.TopicPartitions(topic_id=a.topic_id, topic_name=a.topic_name,
                           partitions=list(a.partitions))
        for a in owned])


def handle_describe(ctx: RequestContext, req: m.ConsumerGroupDescribeRequest
                    ) -> m.ConsumerGroupDescribeResponse:
    out = []
    rule = P.GROUP_DESCRIBE
    for group_id in req.group_ids:
        if not ctx.authorize(rule.resource, group_id, rule.operation):
            out.append(DR.DescribedGroup(error_code=rule.error, error_message=None,
                                         group_id=group_id, group_state=""))
            continue
        d = ctx.broker.group_coordinator.describe_consumer_group(group_id)
        if d.error is not ErrorCode.NONE:
            out.append(DR.DescribedGroup(error_code=d.error, error_message=d.error_message,
                                         group_id=group_id, group_state=d.state))
            continue
        members = [DR.DescribedGroup.Member(
            member_id=mem.member_id, instance_id=mem.instance_id, rack_id=mem.rack_id,
            member_epoch=mem.member_epoch, client_id=mem.client_id,
            client_host=mem.client_host, subscribed_topic_names=list(mem.subscribed_topic_names),
            subscribed_topic_regex=mem.subscribed_topic_regex,
            assignment=_assignment(mem.assignment),
            target_assignment=_assignment(mem.target_assignment))
            for mem in d.members]
        operations = NOT_REQUESTED
        if req.include_authorized_operations:
            operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(DR.DescribedGroup(
            authorized_operations=operations,
            error_code=ErrorCode.NONE, group_id=group_id, group_state=d.state,
            group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch,
            assignor_name=d.assignor_name, members=members))
    return m.ConsumerGroupDescribeResponse(groups=out)


HANDLERS = [
    ApiHandler(m.ConsumerGroupHeartbeatRequest, m.ConsumerGroupHeartbeatResponse,
               0, 1, handle_heartbeat),
    ApiHandler(m.ConsumerGroupDescribeRequest, m.ConsumerGroupDescribeResponse,
               0, 0, handle_describe),
]
