"""The share coordinator's APIs (KIP-932), which share-partition leaders send to the broker
serving a share-partition's state: InitializeShareGroupState (key 83) v0,
ReadShareGroupState (key 84) v0, WriteShareGroupState (key 85) v0-1,
DeleteShareGroupState (key 86) v0 and ReadShareGroupStateSummary (key 87) v0-1.

Served with `group.share.enable=true` only, as the other share-group APIs. Each needs
CLUSTER_ACTION on the cluster (brokers send them), else CLUSTER_AUTHORIZATION_FAILED on
every partition. Every share-partition of a request is answered on its own by the share
coordinator (`ads.coordinator.share`): NOT_COORDINATOR when this broker does not lead the
partition of `__share_group_state` its key hashes to, COORDINATOR_LOAD_IN_PROGRESS while
that partition loads, UNKNOWN_TOPIC_OR_PARTITION for a topic id or partition the metadata
lacks, INVALID_REQUEST for an empty group id, a negative partition or a bad state batch,
FENCED_LEADER_EPOCH and FENCED_STATE_EPOCH for a leader or state epoch older than the one
recorded. A write, initialization or deletion is answered once its record is committed.

Gaps: WriteShareGroupState v1's DeliveryCompleteCount is not kept (ReadSummary v1 computes
it from the state batches).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.coordinator.share.records import ShareKey, StateBatch
from ads.coordinator.share.shard import Answer, WriteRequest
from ads.coordinator.share.state import ACKNOWLEDGED, ARCHIVED
from ads.metadata.acl import CLUSTER_NAME
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode


class _Part(Protocol):
    """What every request's PartitionData has."""

    partition: int


T = TypeVar("T", bound=_Part)
InitPart = m.InitializeShareGroupStateRequest.InitializeStateData.PartitionData
ReadPart = m.ReadShareGroupStateRequest.ReadStateData.PartitionData
WritePart = m.WriteShareGroupStateRequest.WriteStateData.PartitionData
DeletePart = m.DeleteShareGroupStateRequest.DeleteStateData.PartitionData
SummaryPart = m.ReadShareGroupStateSummaryRequest.ReadStateSummaryData.PartitionData


def _allowed(ctx: RequestContext) -> bool:
    rule = P.CLUSTER_ACTION
    return ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation)


async def _each(ctx: RequestContext, group_id: str,
                topics: Iterable[tuple[uuid.UUID, Iterable[T]]],
                call: Callable[[ShareKey, T], Answer | Awaitable[Answer]]
                ) -> list[tuple[uuid.UUID, list[tuple[int, Answer]]]]:
    """Every share-partition's answer, in the request's order (calls of one request run
    at once)."""
    allowed = _allowed(ctx)
    out: list[tuple[uuid.UUID, list[tuple[int, Answer]]]] = []
    waits: list[tuple[list[tuple[int, Answer]], int, Awaitable[Answer]]] = []
    for topic_id, parts in topics:
        answers: list[tuple[int, Answer]] = []
        for p in parts:
            index = p.partition
            if not allowed:
                answers.append((index, Answer(P.CLUSTER_ACTION.error)))
                continue
            answer = call(ShareKey(group_id, topic_id, index), p)
            if isinstance(answer, Answer):
                answers.append((index, answer))
            else:
                answers.append((index, Answer()))
                waits.append((answers, len(answers) - 1, answer))
        out.append((topic_id, answers))
    done = await asyncio.gather(*(w[2] for w in waits))
    for (answers, i, _), answer in zip(waits, done, strict=True):
        answers[i] = (answers[i][0], answer)
    return out


def _message(error: ErrorCode) -> str | None:
    return None if error is ErrorCode.NONE else error.name


# -- InitializeShareGroupState ---------------------------------------------------------------
async def handle_initialize(ctx: RequestContext, req: m.InitializeShareGroupStateRequest
                            ) -> m.InitializeShareGroupStateResponse:
    R = m.InitializeShareGroupStateResponse  # noqa: N806
    coordinator = ctx.broker.share_coordinator

    def call(key: ShareKey, p: InitPart) -> Awaitable[Answer]:
        return coordinator.initialize(key, p.state_epoch, p.start_offset)

    results = await _each(ctx, req.group_id, [(t.topic_id, t.partitions) for t in req.topics],
                          call)
    return R(results=[R.InitializeStateResult(topic_id=t, partitions=[
        R.InitializeStateResult.PartitionResult(partition=i, error_code=a.error,
                                                error_message=_message(a.error))
        for i, a in parts]) for t, parts in results])


# -- ReadShareGroupState ---------------------------------------------------------------------
async def handle_read(ctx: RequestContext, req: m.ReadShareGroupStateRequest
                      ) -> m.ReadShareGroupStateResponse:
    R = m.ReadShareGroupStateResponse  # noqa: N806
    PR = R.ReadStateResult.PartitionResult  # noqa: N806
    coordinator = ctx.broker.share_coordinator

    def call(key: ShareKey, p: ReadPart) -> Answer:
        return coordinator.read(key, p.leader_epoch)

    results = await _each(ctx, req.group_id, [(t.topic_id, t.partitions) for t in req.topics],
                          call)

    def result(index: int, a: Answer) -> Any:
        state = a.state
        if a.error is not ErrorCode.NONE or state is None:
            # No state written: start offset -1 (Kafka's "not initialized").
            return PR(partition=index, error_code=a.error, error_message=_message(a.error),
                      state_epoch=0, start_offset=-1, state_batches=[])
        return PR(partition=index, error_code=a.error, state_epoch=state.state_epoch,
                  start_offset=state.start_offset, state_batches=[
                      PR.StateBatch(first_offset=b.first, last_offset=b.last,
                                    delivery_state=b.state, delivery_count=b.delivery_count)
                      for b in state.batches])

    return R(results=[R.ReadStateResult(topic_id=t, partitions=[result(i, a) for i, a in parts])
                      for t, parts in results])


# -- WriteShareGroupState --------------------------------------------------------------------
async def handle_write(ctx: RequestContext, req: m.WriteShareGroupStateRequest
                       ) -> m.WriteShareGroupStateResponse:
    R = m.WriteShareGroupStateResponse  # noqa: N806
    coordinator = ctx.broker.share_coordinator

    def call(key: ShareKey, p: WritePart) -> Awaitable[Answer]:
        batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                   b.delivery_count) for b in p.state_batches)
        return coordinator.write(WriteRequest(key, p.state_epoch, p.leader_epoch,
                                              p.start_offset, batches))

    results = await _each(ctx, req.group_id, [(t.topic_id, t.partitions) for t in req.topics],
                          call)
    return R(results=[R.WriteStateResult(topic_id=t, partitions=[
        R.WriteStateResult.PartitionResult(partition=i, error_code=a.error,
                                           error_message=_message(a.error))
        for i, a in parts]) for t, parts in results])


# -- DeleteShareGroupState -------------------------------------------------------------------
async def handle_delete(ctx: RequestContext, req: m.DeleteShareGroupStateRequest
                        ) -> m.DeleteShareGroupStateResponse:
    R = m.DeleteShareGroupStateResponse  # noqa: N806
    coordinator = ctx.broker.share_coordinator

    def call(key: ShareKey, _p: DeletePart) -> Awaitable[Answer]:
        return coordinator.delete(key)

    results = await _each(ctx, req.group_id, [(t.topic_id, t.partitions) for t in req.topics],
                          call)
    return R(results=[R.DeleteStateResult(topic_id=t, partitions=[
        R.DeleteStateResult.PartitionResult(partition=i, error_code=a.error,
                                            error_message=_message(a.error))
        for i, a in parts]) for t, parts in results])


# -- ReadShareGroupStateSummary --------------------------------------------------------------
async def handle_read_summary(ctx: RequestContext, req: m.ReadShareGroupStateSummaryRequest
                              ) -> m.ReadShareGroupStateSummaryResponse:
    R = m.ReadShareGroupStateSummaryResponse  # noqa: N806
    PR = R.ReadStateSummaryResult.PartitionResult  # noqa: N806
    coordinator = ctx.broker.share_coordinator

    def call(key: ShareKey, _p: SummaryPart) -> Answer:
        return coordinator.summary(key)

    results = await _each(ctx, req.group_id, [(t.topic_id, t.partitions) for t in req.topics],
                          call)

    def result(index: int, a: Answer) -> Any:
        state = a.state
        if state is None:
            return PR(partition=index, error_code=a.error, error_message=_message(a.error),
                      state_epoch=0, leader_epoch=-1, start_offset=-1)
        done = sum(b.last - b.first + 1 for b in state.batches
                   if b.state in (ACKNOWLEDGED, ARCHIVED))
        return PR(partition=index, error_code=a.error, state_epoch=state.state_epoch,
                  leader_epoch=state.leader_epoch, start_offset=state.start_offset,
                  delivery_complete_count=done)

    return R(results=[R.ReadStateSummaryResult(
        topic_id=t, partitions=[result(i, a) for i, a in parts]) for t, parts in results])


HANDLERS = [
    ApiHandler(m.InitializeShareGroupStateRequest, m.InitializeShareGroupStateResponse, 0, 0,
               handle_initialize),
    ApiHandler(m.ReadShareGroupStateRequest, m.ReadShareGroupStateResponse, 0, 0, handle_read),
    ApiHandler(m.WriteShareGroupStateRequest, m.WriteShareGroupStateResponse, 0, 1,
               handle_write),
    ApiHandler(m.DeleteShareGroupStateRequest, m.DeleteShareGroupStateResponse, 0, 0,
               handle_delete),
    ApiHandler(m.ReadShareGroupStateSummaryRequest, m.ReadShareGroupStateSummaryResponse, 0, 1,
               handle_read_summary),
]
