"""AlterPartitionReassignments (key 45) v0 and ListPartitionReassignments (key 46) v0, in
cluster mode only.

Both are the active controller's (`ads.controller.reassignment`); another broker answers
NOT_CONTROLLER for the whole request and the client asks the broker Metadata names. Alter
starts a reassignment for each partition given a replica list and cancels the one in
progress for each given null; each partition's error is Kafka's
(INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION). The
answer comes once the assignment is written; the reassignment completes when every target
replica is in the ISR. List names the partitions being reassigned (all, or those asked for)
with their replicas, adding and removing replicas.
"""

from __future__ import annotations

import asyncio

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.common.partitions import TopicPartition
from ads.controller.controller import DeposedError
from ads.metadata.acl import CLUSTER_NAME
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

A = m.AlterPartitionReassignmentsResponse
L = m.ListPartitionReassignmentsResponse
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


async def _alter(ctx: RequestContext, req: m.AlterPartitionReassignmentsRequest) -> A:
    rule = P.CLUSTER_ALTER
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        # As Kafka: the error on the request and on every partition named.
        return A(error_code=rule.error, error_message=None, responses=[
            A.ReassignableTopicResponse(name=t.name, partitions=[
                A.ReassignableTopicResponse.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=rule.error,
                    error_message=None) for p in t.partitions]) for t in req.topics])
    controller = ctx.broker.controller
    requests = {TopicPartition(t.name, p.partition_index): (
                    list(p.replicas) if p.replicas is not None else None)
                for t in req.topics for p in t.partitions}
    results = None
    if controller is not None and controller.active:
        try:
            results = await asyncio.wait_for(asyncio.wrap_future(
                controller.alter_reassignments(requests)), max(req.timeout_ms, 1) / 1000.0)
        except DeposedError:
            results = None
        except TimeoutError:
            return A(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None, responses=[])
    if results is None:
        return A(error_code=ErrorCode.NOT_CONTROLLER, error_message=NOT_CONTROLLER_MESSAGE,
                 responses=[])
    by_topic: dict[str, list[A.ReassignableTopicResponse.ReassignablePartitionResponse]] = {}
    for (topic, partition), refused in results.items():
        by_topic.setdefault(topic, []).append(
            A.ReassignableTopicResponse.ReassignablePartitionResponse(
                partition_index=partition,
                error_code=refused.code if refused else ErrorCode.NONE,
                error_message=refused.message if refused else None))
    return A(error_code=ErrorCode.NONE, error_message=None, responses=[
        A.ReassignableTopicResponse(name=t, partitions=parts) for t, parts in by_topic.items()])


async def _list(ctx: RequestContext, req: m.ListPartitionReassignmentsRequest) -> L:
    rule = P.CLUSTER_DESCRIBE
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        return L(error_code=rule.error, error_message=None, topics=[])
    controller = ctx.broker.controller
    partitions = (None if req.topics is None
                  else [TopicPartition(t.name, p) for t in req.topics for p in t.partition_indexes])
    ongoing = None
    if controller is not None and controller.active:
        try:
            ongoing = await asyncio.wait_for(asyncio.wrap_future(
                controller.list_reassignments(partitions)), max(req.timeout_ms, 1) / 1000.0)
        except DeposedError:
            ongoing = None
        except TimeoutError:
            return L(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None, topics=[])
    if ongoing is None:
        return L(error_code=ErrorCode.NOT_CONTROLLER, error_message=NOT_CONTROLLER_MESSAGE,
                 topics=[])
    by_topic: dict[str, list[L.OngoingTopicReassignment.OngoingPartitionReassignment]] = {}
    for (topic, partition), ra in ongoing.items():
        by_topic.setdefault(topic, []).append(
            L.OngoingTopicReassignment.OngoingPartitionReassignment(
                partition_index=partition, replicas=ra.replicas, adding_replicas=ra.adding,
                removing_replicas=ra.removing))
    return L(error_code=ErrorCode.NONE, error_message=None, topics=[
        L.OngoingTopicReassignment(name=t, partitions=parts) for t, parts in by_topic.items()])


CLUSTER_HANDLERS = [
    ApiHandler(m.AlterPartitionReassignmentsRequest, m.AlterPartitionReassignmentsResponse,
               0, 0, _alter),
    ApiHandler(m.ListPartitionReassignmentsRequest, m.ListPartitionReassignmentsResponse,
               0, 0, _list),
]
