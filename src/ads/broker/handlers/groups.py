"""Group membership APIs and the group coordinator's settings.

FindCoordinator (key 10) v0-5: single keys (v0-3) and batches (v4+); group keys create
`__consumer_offsets` on first use (its files made off the loop; the answer waits for
them), transaction keys (key type 1) create `__transaction_state` the same way and name
the leader of the id's partition; share-partition keys (key type 2, "groupId:topicId:
partition", with group.share.enable) create `__share_group_state` the same way (they need
CLUSTER_ACTION on the cluster, as brokers ask for them); v6 is not advertised.
JoinGroup (key 11) v2-9, SyncGroup (key 14) v0-5, Heartbeat (key 12) v0-4, LeaveGroup
(key 13) v0-5 (batched members from v3), DescribeGroups (key 15) v0-5, ListGroups (key 16)
v0-5 (state filter v4, type filter v5), DeleteGroups (key 42) v0-2.

The protocol rules live in `ads.coordinator.group`; this module maps requests to calls of
its `GroupCoordinator` (values in `api.py`) and results back to responses. JoinGroup and
SyncGroup responses wait on the coordinator (join phase, leader's assignment, the group
record being committed), DeleteGroups on its tombstones being committed; the others answer
at once. A group whose `__consumer_offsets` partition is loading gets
COORDINATOR_LOAD_IN_PROGRESS, and so does ListGroups while any partition loads.
The broker's settings reach the coordinator through `broker/settings.py: group_config`.
DescribeGroups v3+ reports a group's authorized operations when asked (KIP-430, from
`ads.broker.authorized_operations`), for groups described without error.
Permissions (`ads.broker.permissions`): JoinGroup, SyncGroup, Heartbeat and LeaveGroup READ
on the group; FindCoordinator DESCRIBE on the group or transactional id, per key;
DescribeGroups DESCRIBE and DeleteGroups DELETE per group; ListGroups lists every group to
a principal that may DESCRIBE the cluster, else only the groups it may describe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ads.broker import permissions as P
from ads.broker.authorized_operations import NOT_REQUESTED, ResourceType
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.coordinator.group.api import JoinRequest, JoinResult, SyncResult
from ads.metadata.acl import CLUSTER_NAME
from ads.metadata.model import BrokerEndpoint, ListenerEndpoint
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext
    from ads.coordinator.runtime import CoordinatorRuntime

log = logging.getLogger("ads.broker.groups")
T = TypeVar("T")


async def wait_for(start: Callable[[Callable[[T], None]], None]) -> T:
    """Starts a coordinator call that answers through a callback and awaits the answer."""
    fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def resolve(value: T) -> None:
        if not fut.done():
            fut.set_result(value)

    start(resolve)
    return await fut


def allowed(ctx: RequestContext, rule: P.Rule, name: str) -> bool:
    return ctx.authorize(rule.resource, name, rule.operation)


def client_host(ctx: RequestContext) -> str:
    return "/" + ctx.connection.host


# -- FindCoordinator ----------------------------------------------------------------------
def handle_find_coordinator(ctx: RequestContext, req: m.FindCoordinatorRequest
                            ) -> m.FindCoordinatorResponse | Awaitable[m.FindCoordinatorResponse]:
    key_type = req.key_type if ctx.api_version >= 1 else 0
    runtime = _runtime(ctx.broker, key_type)
    if runtime is not None and not runtime.topic.ready():
        return _find_after_creating(ctx, req, runtime)
    return _find_coordinator(ctx, req, ErrorCode.NONE)


# What FindCoordinator needs, by key type.
_RULES = {0: P.COORDINATOR_GROUP, 1: P.COORDINATOR_TXN, 2: P.COORDINATOR_SHARE}


def _runtime(broker: BrokerContext, key_type: int) -> CoordinatorRuntime[Any] | None:
    """The coordinator of a key type: 0 groups (`__consumer_offsets`), 1 transactional ids
    (`__transaction_state`), 2 share-partitions ("groupId:topicId:partition",
    `__share_group_state`; with group.share.enable only)."""
    if key_type == 0:
        return broker.group_coordinator.runtime
    if key_type == 1:
        return broker.transaction_coordinator.runtime
    if key_type == 2 and broker.config.get_bool("group.share.enable"):
        return broker.share_coordinator.runtime
    return None


async def _find_after_creating(ctx: RequestContext, req: m.FindCoordinatorRequest,
                               runtime: CoordinatorRuntime[Any]) -> m.FindCoordinatorResponse:
    error = ErrorCode.NONE
    topic = runtime.topic
    try:
        await topic.create()
    except TimeoutError as exc:  # expected while brokers race to create it: no traceback
        log.warning("creating %s: %s", topic.name, exc)
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    except Exception:
        log.exception("creating %s failed", topic.name)
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return _find_coordinator(ctx, req, error)


def _find_coordinator(ctx: RequestContext, req: m.FindCoordinatorRequest,
                      group_error: ErrorCode) -> m.FindCoordinatorResponse:
    broker = ctx.broker
    keys = req.coordinator_keys if ctx.api_version >= 4 else [req.key]
    key_type = req.key_type if ctx.api_version >= 1 else 0
    runtime = _runtime(broker, key_type)
    found = []
    for key in keys:
        error, message = ErrorCode.NONE, None
        ep: ListenerEndpoint | None = None
        node = -1
        rule = _RULES.get(key_type, P.COORDINATOR_GROUP)
        if runtime is None:
            error, message = ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}"
        elif not allowed(ctx, rule, CLUSTER_NAME if key_type == 2 else key):
            error = rule.error
        else:
            error = group_error
            if error is ErrorCode.NONE:
                coordinator = _coordinator(broker, runtime, key)
                if coordinator is not None:
                    # As Kafka: a coordinator without the request's listener is unavailable.
                    node, ep = coordinator.node_id, coordinator.on(ctx.connection.listener_name)
                error = ErrorCode.NONE if ep else ErrorCode.COORDINATOR_NOT_AVAILABLE
        ok = error is ErrorCode.NONE and ep is not None
        found.append(m.FindCoordinatorResponse.Coordinator(
            key=key, node_id=node if ok else -1, host=ep.host if ok and ep else "",
            port=ep.port if ok and ep else -1, error_code=error,
            error_message=message))
    if ctx.api_version >= 4:
        return m.FindCoordinatorResponse(coordinators=found)
    one = found[0]
    return m.FindCoordinatorResponse(
        error_code=one.error_code, error_message=one.error_message, node_id=one.node_id,
        host=one.host, port=one.port)


def _coordinator(broker: BrokerContext, runtime: CoordinatorRuntime[Any], key: str
                 ) -> BrokerEndpoint | None:
    """The broker leading the key's partition of the internal topic, if it is live."""
    topic = broker.metadata.topics.get(runtime.topic.name)
    if topic is None:
        return None
    leader = topic.partitions[runtime.partition_for(key)].leader
    return broker.metadata.brokers.get(leader)


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------------
async def handle_join_group(ctx: RequestContext, req: m.JoinGroupRequest
                            ) -> m.JoinGroupResponse:
    v = ctx.api_version
    if not allowed(ctx, P.GROUP_READ, req.group_id):
        return m.JoinGroupResponse(
            error_code=P.GROUP_READ.error, generation_id=-1, member_id="", leader="",
            protocol_type=None if v >= 7 else "", protocol_name=None if v >= 7 else "",
            members=[])
    join = JoinRequest(
        group_id=req.group_id, member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=v >= 4, supports_skip_assignment=v >= 9,
        reason=req.reason if v >= 8 else None)
    coordinator = ctx.broker.group_coordinator
    r: JoinResult = await wait_for(lambda cb: coordinator.join_group(join, cb))
    Member = m.JoinGroupResponse.JoinGroupResponseMember  # noqa: N806
    return m.JoinGroupResponse(
        error_code=r.error, generation_id=r.generation_id, protocol_type=r.protocol_type,
        protocol_name=r.protocol_name if v >= 7 else (r.protocol_name or ""),
        leader=r.leader, skip_assignment=r.skip_assignment, member_id=r.member_id,
        members=[Member(member_id=mid, group_instance_id=iid, metadata=md)
                 for mid, iid, md in r.members])


async def handle_sync_group(ctx: RequestContext, req: m.SyncGroupRequest
                            ) -> m.SyncGroupResponse:
    v = ctx.api_version
    if not allowed(ctx, P.GROUP_READ, req.group_id):
        return m.SyncGroupResponse(error_code=P.GROUP_READ.error, assignment=b"")
    coordinator = ctx.broker.group_coordinator
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    r: SyncResult = await wait_for(lambda cb: coordinator.sync_group(
        req.group_id, req.generation_id, req.member_id,
        req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
        assignments, cb))
    return m.SyncGroupResponse(error_code=r.error, protocol_type=r.protocol_type,
                               protocol_name=r.protocol_name, assignment=r.assignment)


def handle_heartbeat(ctx: RequestContext, req: m.HeartbeatRequest) -> m.HeartbeatResponse:
    if not allowed(ctx, P.GROUP_READ, req.group_id):
        return m.HeartbeatResponse(error_code=P.GROUP_READ.error)
    error = ctx.broker.group_coordinator.heartbeat(
        req.group_id, req.generation_id, req.member_id,
        req.group_instance_id if ctx.api_version >= 3 else None)
    return m.HeartbeatResponse(error_code=error)


def handle_leave_group(ctx: RequestContext, req: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
    v = ctx.api_version
    if not allowed(ctx, P.GROUP_READ, req.group_id):
        return m.LeaveGroupResponse(error_code=P.GROUP_READ.error, members=[])
    if v >= 3:
        leaving = [(mem.member_id, mem.group_instance_id) for mem in req.members]
    else:
        leaving = [(req.member_id, None)]
    error, results = ctx.broker.group_coordinator.leave_group(req.group_id, leaving)
    if v < 3:
        return m.LeaveGroupResponse(error_code=error if results == [] else results[0])
    R = m.LeaveGroupResponse.MemberResponse  # noqa: N806
    return m.LeaveGroupResponse(error_code=error, members=[
        R(member_id=mid, group_instance_id=iid, error_code=code)
        for (mid, iid), code in zip(leaving, results, strict=False)])


# -- DescribeGroups, ListGroups, DeleteGroups ---------------------------------------------
def handle_describe_groups(ctx: RequestContext, req: m.DescribeGroupsRequest
                           ) -> m.DescribeGroupsResponse:
    D = m.DescribeGroupsResponse.DescribedGroup  # noqa: N806
    with_operations = ctx.api_version >= 3 and req.include_authorized_operations
    out = []
    for group_id in req.groups:
        if not allowed(ctx, P.GROUP_DESCRIBE, group_id):
            out.append(D(error_code=P.GROUP_DESCRIBE.error, group_id=group_id, group_state="",
                         protocol_type="", protocol_data="", members=[]))
            continue
        d = ctx.broker.group_coordinator.describe_group(group_id)
        operations = NOT_REQUESTED
        if with_operations and d.error is ErrorCode.NONE:
            operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(D(
            authorized_operations=operations,
            error_code=d.error, group_id=group_id, group_state=d.state,
            protocol_type=d.protocol_type, protocol_data=d.protocol_data,
            members=[D.DescribedGroupMember(
                member_id=mem.member_id, group_instance_id=mem.group_instance_id,
                client_id=mem.client_id, client_host=mem.client_host,
                member_metadata=mem.metadata, member_assignment=mem.assignment)
                for mem in d.members]))
    return m.DescribeGroupsResponse(groups=out)


def handle_list_groups(ctx: RequestContext, req: m.ListGroupsRequest) -> m.ListGroupsResponse:
    v = ctx.api_version
    states = req.states_filter if v >= 4 else []
    types = req.types_filter if v >= 5 else []
    error, listed = ctx.broker.group_coordinator.list_groups(states, types)
    if not allowed(ctx, P.LIST_GROUPS_CLUSTER, CLUSTER_NAME):
        listed = [g for g in listed if allowed(ctx, P.LIST_GROUPS_GROUP, g.group_id)]
    L = m.ListGroupsResponse.ListedGroup  # noqa: N806
    return m.ListGroupsResponse(
        error_code=error,
        groups=[L(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                  group_type=g.group_type) for g in listed])


async def _delete_share_state(ctx: RequestContext, groups: list[str]) -> dict[str, ErrorCode]:
    """Empty share groups' state is deleted first, as Kafka does (DeleteShareGroupState):
    the groups whose state could not be deleted, with the error they get."""
    coordinator = ctx.broker.group_coordinator
    failed: dict[str, ErrorCode] = {}
    for g in groups:
        d = coordinator.describe_share_group(g)
        if d.error is ErrorCode.NONE and not d.members:
            error = await ctx.broker.share_state.delete_group(g)
            if error is not ErrorCode.NONE:
                failed[g] = error
    return failed


async def handle_delete_groups(ctx: RequestContext, req: m.DeleteGroupsRequest
                               ) -> m.DeleteGroupsResponse:
    rule = P.GROUP_DELETE
    permitted = [g for g in req.groups_names if allowed(ctx, rule, g)]
    errors = await _delete_share_state(ctx, permitted)
    permitted = [g for g in permitted if g not in errors]
    errors.update(zip(permitted, await ctx.broker.group_coordinator.delete_groups(permitted),
                      strict=True))
    R = m.DeleteGroupsResponse.DeletableGroupResult  # noqa: N806
    return m.DeleteGroupsResponse(results=[
        R(group_id=g, error_code=errors.get(g, rule.error)) for g in req.groups_names])


HANDLERS = [
    ApiHandler(m.FindCoordinatorRequest, m.FindCoordinatorResponse, 0, 5, handle_find_coordinator),
    ApiHandler(m.JoinGroupRequest, m.JoinGroupResponse, 2, 9, handle_join_group),
    ApiHandler(m.SyncGroupRequest, m.SyncGroupResponse, 0, 5, handle_sync_group),
    ApiHandler(m.HeartbeatRequest, m.HeartbeatResponse, 0, 4, handle_heartbeat),
    ApiHandler(m.LeaveGroupRequest, m.LeaveGroupResponse, 0, 5, handle_leave_group),
    ApiHandler(m.DescribeGroupsRequest, m.DescribeGroupsResponse, 0, 5, handle_describe_groups),
    ApiHandler(m.ListGroupsRequest, m.ListGroupsResponse, 0, 5, handle_list_groups),
    ApiHandler(m.DeleteGroupsRequest, m.DeleteGroupsResponse, 0, 2, handle_delete_groups),
]
