"""Fetch (key 1), versions 4-17, sessionless.

Record data is never copied: each partition's records field is a file region of its log
segment, which the network layer sends with sendfile. With too little data for
`min_bytes`, the fetch waits in purgatory until an append to one of its partitions or
`max_wait_ms`. `max_bytes` and `partition_max_bytes` are honoured, except that the first
partition with data returns at least one whole batch (KIP-74).

Gaps: fetch sessions (KIP-227) are not created — the response's session id is 0, which
tells clients to keep sending full fetches; follower fetches (replica id >= 0) are answered
like consumer fetches until replication exists; read_committed reads up to the high
watermark, which is the last stable offset while there are no transactions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field

from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.partitions import Partition, PartitionError
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

R = m.FetchResponse
TopicResp = R.FetchableTopicResponse
PartResp = R.FetchableTopicResponse.PartitionData
READ_COMMITTED = 1


@dataclass(slots=True)
class _Result:
    topics: list[TopicResp] = field(default_factory=list)
    bytes: int = 0
    error: bool = False
    partitions: list[Partition] = field(default_factory=list)


def _topic_name(ctx: RequestContext, topic: m.FetchRequest.FetchTopic) -> str | None:
    """v13+ name topics by id; None when the id is unknown."""
    if ctx.api_version >= 13:
        state = ctx.broker.metadata.topic_by_id(topic.topic_id)
        return state.name if state else None
    return str(topic.topic)


def _build(ctx: RequestContext, req: m.FetchRequest) -> _Result:
    broker = ctx.broker
    result = _Result()
    remaining = req.max_bytes
    read_committed = ctx.api_version >= 4 and req.isolation_level == READ_COMMITTED
    by_id = ctx.api_version >= 13
    for ft in req.topics:
        name = _topic_name(ctx, ft)
        parts: list[PartResp] = []
        for fp in ft.partitions:
            pr = PartResp(partition_index=fp.partition, error_code=ErrorCode.NONE,
                          high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                          aborted_transactions=[] if read_committed else None,
                          preferred_read_replica=-1, records=b"")
            part = broker.partitions.get((name, fp.partition)) if name is not None else None
            if part is None:
                pr.error_code = (ErrorCode.UNKNOWN_TOPIC_ID if by_id and name is None
                                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                result.error = True
                parts.append(pr)
                continue
            result.partitions.append(part)
            pr.high_watermark = part.high_watermark
            pr.last_stable_offset = part.last_stable_offset
            pr.log_start_offset = part.log_start_offset
            try:
                if ctx.api_version >= 9:
                    part.check_leader_epoch(fp.current_leader_epoch)
                limit = max(0, min(fp.partition_max_bytes, remaining))
                max_offset = part.last_stable_offset if read_committed else part.high_watermark
                region, size = part.read(fp.fetch_offset, limit, result.bytes == 0, max_offset)
            except PartitionError as exc:
                pr.error_code = exc.code
                result.error = True
            else:
                if region is not None:
                    pr.records = region
                    result.bytes += size
                    remaining -= size
            parts.append(pr)
        if by_id:
            result.topics.append(TopicResp(topic_id=ft.topic_id, partitions=parts))
        else:
            result.topics.append(TopicResp(topic=ft.topic, partitions=parts))
    return result


def _response(result: _Result) -> m.FetchResponse:
    return m.FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0,
                           responses=result.topics)


def handle(ctx: RequestContext, req: m.FetchRequest
           ) -> m.FetchResponse | Awaitable[m.FetchResponse]:
    if ctx.api_version >= 7 and req.session_epoch > 0:
        # We never hand out sessions, so an incremental fetch names one we do not know.
        return m.FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                               responses=[])
    result = _build(ctx, req)
    if (req.max_wait_ms <= 0 or result.bytes >= max(req.min_bytes, 1) or result.error
            or not result.partitions):
        return _response(result)
    # Park in this same step: the coroutine below first runs a loop pass later, and an
    # append read in between (another connection's produce in the same pass) must find
    # the waiter, or this fetch would sleep through it until max_wait_ms.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000.0
    return _wait(ctx, req, result.partitions, _park(loop, result.partitions), deadline)


def _park(loop: asyncio.AbstractEventLoop, partitions: list[Partition]) -> asyncio.Future[None]:
    woken: asyncio.Future[None] = loop.create_future()
    for part in partitions:
        part.add_waiter(woken)
    return woken


def _expire(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


async def _wait(ctx: RequestContext, req: m.FetchRequest, partitions: list[Partition],
                woken: asyncio.Future[None], deadline: float) -> m.FetchResponse:
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
        result = _build(ctx, req)
        if result.bytes >= min_bytes or result.error or loop.time() >= deadline:
            return _response(result)
        woken = _park(loop, partitions)


HANDLERS = [ApiHandler(m.ApiKey.FETCH, 4, 17, handle)]
