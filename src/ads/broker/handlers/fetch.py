"""Fetch (key 1), versions 4-17, with incremental fetch sessions (KIP-227) from v7.

Record data is never copied: each partition's records field is a file region of its log
segment, which the network layer sends with sendfile. With too little data for
`min_bytes`, the fetch waits in purgatory until an append to one of its partitions or
`max_wait_ms`. `max_bytes` and `partition_max_bytes` are honoured, except that the first
partition with data returns at least one whole batch (KIP-74). Sessions (epochs, what an
incremental request and response carry) are described in `ads.broker.fetch_sessions`.

Gaps: follower fetches (replica id >= 0) are answered like consumer fetches until
replication exists; read_committed reads up to the high watermark, which is the last
stable offset while there are no transactions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field

from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.fetch_sessions import CachedPartition, FetchSession, TopicKey, next_epoch
from ads.broker.partitions import Partition, PartitionError
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

R = m.FetchResponse
TopicResp = R.FetchableTopicResponse
PartResp = R.FetchableTopicResponse.PartitionData
READ_COMMITTED = 1
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass(slots=True)
class _Plan:
    """What one fetch reads: the request's partitions, or its session's."""

    targets: list[CachedPartition]
    by_id: bool  # v13+: topics are named by id
    incremental: bool  # leave out partitions with nothing new
    session: FetchSession | None = None


@dataclass(slots=True)
class _Result:
    topics: list[TopicResp] = field(default_factory=list)
    bytes: int = 0
    error: bool = False
    partitions: list[Partition] = field(default_factory=list)
    sent: list[tuple[CachedPartition, PartResp]] = field(default_factory=list)


def _targets(req: m.FetchRequest, by_id: bool) -> list[CachedPartition]:
    return [CachedPartition(ft.topic_id if by_id else ft.topic, fp.partition, fp.fetch_offset,
                            fp.partition_max_bytes, fp.current_leader_epoch)
            for ft in req.topics for fp in ft.partitions]


def _plan(ctx: RequestContext, req: m.FetchRequest) -> _Plan | m.FetchResponse:
    by_id = ctx.api_version >= 13
    if ctx.api_version < 7:
        return _Plan(_targets(req, by_id), by_id, incremental=False)
    sessions = ctx.broker.fetch_sessions
    now = ctx.broker.clock.time_ms()
    session_id, epoch = req.session_id, req.session_epoch
    if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
        if session_id:
            sessions.remove(session_id)
        targets = _targets(req, by_id)
        session = sessions.create(now) if epoch == INITIAL_EPOCH else None
        if session is not None:
            for target in targets:
                session.update(target)
        return _Plan(targets, by_id, incremental=False, session=session)
    session = sessions.get(session_id, now)
    if session is None:
        return m.FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                               responses=[])
    if epoch != session.epoch:
        return m.FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0,
                               responses=[])
    for target in _targets(req, by_id):
        session.update(target)
    for forgotten in req.forgotten_topics_data:
        topic = forgotten.topic_id if by_id else forgotten.topic
        for index in forgotten.partitions:
            session.forget((topic, index))
    session.epoch = next_epoch(epoch)
    return _Plan(list(session.partitions.values()), by_id, incremental=True, session=session)


def _topic_name(ctx: RequestContext, topic: TopicKey, by_id: bool) -> str | None:
    """v13+ name topics by id; None when the id is unknown."""
    if by_id:
        state = ctx.broker.metadata.topic_by_id(topic)  # type: ignore[arg-type]
        return state.name if state else None
    return str(topic)


def _build(ctx: RequestContext, req: m.FetchRequest, plan: _Plan) -> _Result:
    broker = ctx.broker
    result = _Result()
    remaining = req.max_bytes
    read_committed = ctx.api_version >= 4 and req.isolation_level == READ_COMMITTED
    check_epoch = ctx.api_version >= 9
    by_id = plan.by_id
    groups: dict[TopicKey, list[PartResp]] = {}
    names: dict[TopicKey, str | None] = {}
    for t in plan.targets:
        if t.topic not in names:
            names[t.topic] = _topic_name(ctx, t.topic, by_id)
        name = names[t.topic]
        pr = PartResp(partition_index=t.partition, error_code=ErrorCode.NONE,
                      high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                      aborted_transactions=[] if read_committed else None,
                      preferred_read_replica=-1, records=b"")
        size = 0
        part = broker.partitions.get((name, t.partition)) if name is not None else None
        if part is None:
            pr.error_code = (ErrorCode.UNKNOWN_TOPIC_ID if by_id and name is None
                             else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            result.error = True
        else:
            result.partitions.append(part)
            pr.high_watermark = part.high_watermark
            pr.last_stable_offset = part.last_stable_offset
            pr.log_start_offset = part.log_start_offset
            try:
                if check_epoch:
                    part.check_leader_epoch(t.current_leader_epoch)
                limit = max(0, min(t.partition_max_bytes, remaining))
                max_offset = part.last_stable_offset if read_committed else part.high_watermark
                region, size = part.read(t.fetch_offset, limit, result.bytes == 0, max_offset)
            except PartitionError as exc:
                pr.error_code = exc.code
                result.error = True
            else:
                if region is not None:
                    pr.records = region
                    result.bytes += size
                    remaining -= size
        if (plan.incremental and size == 0 and pr.error_code == ErrorCode.NONE
                and pr.high_watermark == t.high_watermark
                and pr.last_stable_offset == t.last_stable_offset
                and pr.log_start_offset == t.log_start_offset):
            continue  # nothing new for this partition of the session
        groups.setdefault(t.topic, []).append(pr)
        result.sent.append((t, pr))
    for topic, parts in groups.items():
        if by_id:
            result.topics.append(TopicResp(topic_id=topic, partitions=parts))
        else:
            result.topics.append(TopicResp(topic=topic, partitions=parts))
    return result


def _response(plan: _Plan, result: _Result) -> m.FetchResponse:
    # What goes out now is what the session's next incremental response compares with.
    for target, pr in result.sent:
        target.high_watermark = pr.high_watermark
        target.last_stable_offset = pr.last_stable_offset
        target.log_start_offset = pr.log_start_offset
    return m.FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                           session_id=plan.session.id if plan.session else 0,
                           responses=result.topics)


def handle(ctx: RequestContext, req: m.FetchRequest
           ) -> m.FetchResponse | Awaitable[m.FetchResponse]:
    plan = _plan(ctx, req)
    if isinstance(plan, m.FetchResponse):
        return plan
    result = _build(ctx, req, plan)
    if (req.max_wait_ms <= 0 or result.bytes >= max(req.min_bytes, 1) or result.error
            or not result.partitions):
        return _response(plan, result)
    # Park in this same step: the coroutine below first runs a loop pass later, and an
    # append read in between (another connection's produce in the same pass) must find
    # the waiter, or this fetch would sleep through it until max_wait_ms.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000.0
    return _wait(ctx, req, plan, result.partitions, _park(loop, result.partitions), deadline)


def _park(loop: asyncio.AbstractEventLoop, partitions: list[Partition]) -> asyncio.Future[None]:
    woken: asyncio.Future[None] = loop.create_future()
    for part in partitions:
        part.add_waiter(woken)
    return woken


def _expire(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


async def _wait(ctx: RequestContext, req: m.FetchRequest, plan: _Plan,
                partitions: list[Partition], woken: asyncio.Future[None],
                deadline: float) -> m.FetchResponse:
    loop = asyncio.get_running_loop()
    min_bytes = max(req.min_bytes, 1)
    while True:
        # A timer resolving the same future is cheaper than asyncio.wait_for; either an
        # append or the deadline wakes us, and the build below tells which.
        timer = loop.call_later(max(deadline - loop.time(), 0.0), _expire, woken)
        try:
            await woken
        finally:
            timer.cancel()
            for part in partitions:
                part.remove_waiter(woken)
        result = _build(ctx, req, plan)
        if result.bytes >= min_bytes or result.error or loop.time() >= deadline:
            return _response(plan, result)
        woken = _park(loop, partitions)


HANDLERS = [ApiHandler(m.ApiKey.FETCH, 4, 17, handle)]
