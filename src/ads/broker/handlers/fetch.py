"""Fetch (key 1), versions 4-17, with incremental fetch sessions (KIP-227) from v7.

Record data is never copied: each partition's records field is a file region of its log
segment, which the network layer sends with sendfile. With too little data for
`min_bytes`, the fetch waits in the replica manager's fetch purgatory
(`ads.replication.purgatory`) until an append to one of its partitions or `max_wait_ms`.
Reading and waiting are the replica manager's (`ReplicaManager.fetch`); this module maps
requests, sessions and results. `max_bytes` and `partition_max_bytes` are honoured, except
that the first partition with data returns at least one whole batch (KIP-74). Sessions
(epochs, what an incremental request and response carry) are described in
`ads.broker.fetch_sessions`.

A fetch with a replica id (`replica_id`, or `replica_state` from v15) is a follower's: it
reads up to the log end offset instead of the high watermark, its `last_fetched_epoch` is
checked for divergence (the answer's `diverging_epoch`), and it reports the follower's log
end offset to the leader (`ads.replication.replica_manager`). Followers never use fetch
sessions.

read_committed (isolation level 1) reads up to the last stable offset and carries the
aborted transactions overlapping the read (from the segments' `.txnindex`), so clients drop
aborted records batch by batch.

From v16 a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its
current leader, and the response carries the leader's endpoint (KIP-951,
`current_leader.py`).

A consumer over its `consumer_byte_rate` quota (`ads.broker.quotas`) gets, as from Kafka,
an empty response with `throttle_time_ms` (what was read is not counted against it), and
its connection is muted that long; a fetch asks for at most what the quota allows over
its measuring span. Followers' fetches are not held to client quotas.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.fetch_sessions import CachedPartition, FetchSession, TopicKey, next_epoch
from ads.broker.handlers.current_leader import LeaderEndpoints
from ads.broker.metrics import (
    BYTES_OUT,
    FAILED_FETCH,
    FETCH_REQUESTS,
    REPLICATION_BYTES_OUT,
    UNKNOWN_TOPIC,
    BrokerMetrics,
)
from ads.common.later import Later
from ads.metadata.acl import CLUSTER_NAME
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.replication.replica_manager import (
    UNKNOWN_READ,
    FetchParams,
    FetchPartition,
    FetchResult,
)

if TYPE_CHECKING:
    from ads.storage.txn_index import AbortedTxn

R = m.FetchResponse
TopicResp = R.FetchableTopicResponse
PartResp = R.FetchableTopicResponse.PartitionData
READ_COMMITTED = 1
_NAMES_LEADER = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass(slots=True)
class _Plan:
    """What one fetch reads: the request's partitions, or its session's."""

    targets: list[CachedPartition]
    by_id: bool  # v13+: topics are named by id
    incremental: bool  # leave out partitions with nothing new
    session: FetchSession | None = None
    names: dict[TopicKey, str | None] = field(default_factory=dict)  # None: unknown topic id
    denied: set[TopicKey] = field(default_factory=set)  # not read: TOPIC_AUTHORIZATION_FAILED


def _targets(req: m.FetchRequest, by_id: bool) -> list[CachedPartition]:
    return [CachedPartition(ft.topic_id if by_id else ft.topic, fp.partition, fp.fetch_offset,
                            fp.partition_max_bytes, fp.current_leader_epoch,
                            last_fetched_epoch=fp.last_fetched_epoch)
            for ft in req.topics for fp in ft.partitions]


def _replica_id(ctx: RequestContext, req: m.FetchRequest) -> int:
    return req.replica_state.replica_id if ctx.api_version >= 15 else req.replica_id


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


def _topic_name(ctx: RequestContext, topic: TopicKey) -> str | None:
    """v13+ name topics by id; None when the id is unknown."""
    if isinstance(topic, uuid.UUID):
        state = ctx.broker.metadata.topic_by_id(topic)
        return state.name if state else None
    return topic


def _read(ctx: RequestContext, req: m.FetchRequest, plan: _Plan, quota_cap: float | None
          ) -> FetchResult | Later[FetchResult]:
    """Reads the partitions the principal may read and that name a known topic id; the
    others are answered at once without being read (Kafka's "erroneous" partitions), so
    they neither end nor extend a long poll: a fetch of denied topics only answers at once,
    one mixing them with readable topics waits for those as any fetch does."""
    names = plan.names
    readable: list[int] = []  # indexes into plan.targets of the partitions read
    targets = []
    replica_id = _replica_id(ctx, req)
    # A follower must be allowed CLUSTER_ACTION, a consumer READ on each topic.
    rule = P.FETCH_FOLLOWER if replica_id >= 0 else P.FETCH_TOPIC
    follower_allowed = replica_id < 0 or ctx.authorize(rule.resource, CLUSTER_NAME,
                                                       rule.operation)
    for i, t in enumerate(plan.targets):
        if t.topic not in names:
            name = names[t.topic] = _topic_name(ctx, t.topic)
            if name is not None and not (follower_allowed if replica_id >= 0 else
                                         ctx.authorize(rule.resource, name, rule.operation)):
                plan.denied.add(t.topic)
        name = names[t.topic]
        if name is None or t.topic in plan.denied:
            continue
        readable.append(i)
        targets.append(FetchPartition(name, t.partition, t.fetch_offset, t.partition_max_bytes,
                                      t.current_leader_epoch, t.last_fetched_epoch))
    if plan.targets and not targets:
        return _merged(plan, readable, FetchResult([], 0, True, []))
    # As in Kafka, the broker's fetch.max.bytes caps what a client asks for.
    max_bytes = req.max_bytes if replica_id >= 0 else min(
        req.max_bytes, ctx.broker.settings.fetch_max_bytes)
    if quota_cap is not None:
        max_bytes = max(1, min(max_bytes, int(quota_cap)))
    # KIP-392: from v11 a consumer names its rack and may read from a follower.
    client_rack = req.rack_id if ctx.api_version >= 11 and replica_id < 0 else None
    params = FetchParams(max_bytes, req.min_bytes, req.max_wait_ms,
                         req.isolation_level == READ_COMMITTED, ctx.api_version >= 9,
                         replica_id, client_rack)
    result = ctx.broker.replica_manager.fetch(targets, params)
    if len(targets) == len(plan.targets):
        return result
    if isinstance(result, FetchResult):
        return _merged(plan, readable, result)
    return result.then(partial(_merged, plan, readable))


def _merged(plan: _Plan, readable: list[int], result: FetchResult) -> FetchResult:
    """The reads of every target in request order: the partitions not read answer as unknown
    ones (`_response` turns a denied topic's into TOPIC_AUTHORIZATION_FAILED and an unknown
    topic id's into UNKNOWN_TOPIC_ID)."""
    reads = [UNKNOWN_READ] * len(plan.targets)
    for i, read in zip(readable, result.reads, strict=True):
        reads[i] = read
    return FetchResult(reads, result.bytes, True, result.keys)


def _aborted(aborted: list[AbortedTxn] | None) -> list[PartResp.AbortedTransaction]:
    if not aborted:
        return []
    return [PartResp.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in aborted]


def _count(metrics: BrokerMetrics, plan: _Plan, result: FetchResult, follower: bool) -> None:
    """Per partition read: bytes out, fetches and failed fetches of its topic."""
    out = REPLICATION_BYTES_OUT if follower else BYTES_OUT
    names = plan.names
    for t, read in zip(plan.targets, result.reads, strict=True):
        name = names.get(t.topic)
        # Names clients make up must not grow the metrics without bound (a denied name may
        # be one).
        if (name is None or t.topic in plan.denied
                or read.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            name = UNKNOWN_TOPIC
        counters = metrics.topic(name)
        counters[FETCH_REQUESTS] += 1
        counters[out] += read.size
        if read.error:
            counters[FAILED_FETCH] += 1


def _response(ctx: RequestContext, plan: _Plan, result: FetchResult, read_committed: bool
              ) -> m.FetchResponse:
    by_id = plan.by_id
    groups: dict[TopicKey, list[PartResp]] = {}
    leaders: LeaderEndpoints | None = None
    for t, read in zip(plan.targets, result.reads, strict=True):
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.topic in plan.denied else read.error
        if (plan.incremental and read.size == 0 and code == ErrorCode.NONE
                and read.high_watermark == t.high_watermark
                and read.last_stable_offset == t.last_stable_offset
                and read.log_start_offset == t.log_start_offset):
            continue  # nothing new for this partition of the session
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and by_id and plan.names[t.topic] is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID
        resp = PartResp(
            partition_index=t.partition, error_code=code, high_watermark=read.high_watermark,
            last_stable_offset=read.last_stable_offset, log_start_offset=read.log_start_offset,
            aborted_transactions=_aborted(read.aborted) if read_committed else None,
            preferred_read_replica=read.preferred_read_replica,
            records=read.records if read.records is not None else b"")
        if read.diverging_end_offset >= 0 or read.diverging_epoch >= 0:
            resp.diverging_epoch = PartResp.EpochEndOffset(
                epoch=read.diverging_epoch, end_offset=read.diverging_end_offset)
        if code in _NAMES_LEADER and ctx.api_version >= 16 and plan.names[t.topic]:
            # KIP-951, as Kafka fills it: from v16, where node_endpoints exist.
            leaders = leaders or LeaderEndpoints(ctx.broker.metadata, ctx.connection.listener_name)
            leader_id, epoch = leaders.leader(plan.names[t.topic] or "", t.partition)
            resp.current_leader = PartResp.LeaderIdAndEpoch(leader_id=leader_id,
                                                            leader_epoch=epoch)
        groups.setdefault(t.topic, []).append(resp)
        # What goes out now is what the session's next incremental response compares with.
        t.high_watermark = read.high_watermark
        t.last_stable_offset = read.last_stable_offset
        t.log_start_offset = read.log_start_offset
    topics = [TopicResp(topic_id=topic, partitions=parts) if isinstance(topic, uuid.UUID)
              else TopicResp(topic=topic, partitions=parts) for topic, parts in groups.items()]
    return m.FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                           session_id=plan.session.id if plan.session else 0,
                           responses=topics,
                           node_endpoints=leaders.endpoints(R.NodeEndpoint) if leaders else [])


def handle(ctx: RequestContext, req: m.FetchRequest
           ) -> m.FetchResponse | Later[m.FetchResponse]:
    plan = _plan(ctx, req)
    if isinstance(plan, m.FetchResponse):
        return plan
    read_committed = req.isolation_level == READ_COMMITTED
    follower = _replica_id(ctx, req) >= 0
    quota = ctx.broker.quotas.fetch
    cap = None
    if follower:
        ctx.quota_exempt = True
    elif quota.enabled:
        cap = quota.max_value_in_window(ctx.connection.principal, ctx.client_id,
                                        ctx.broker.clock.time_ms())
    result = _read(ctx, req, plan, cap)
    metrics = ctx.dispatcher.metrics
    if isinstance(result, FetchResult):
        return _answer(ctx, plan, result, read_committed, metrics, follower)
    return result.then(lambda later: _answer(ctx, plan, later, read_committed, metrics,
                                             follower))


def _answer(ctx: RequestContext, plan: _Plan, result: FetchResult, read_committed: bool,
            metrics: BrokerMetrics, follower: bool) -> m.FetchResponse:
    quota = ctx.broker.quotas.fetch
    if quota.enabled and not follower:
        size = sum(read.size for read in result.reads)
        principal, now = ctx.connection.principal, ctx.broker.clock.time_ms()
        throttle_ms = quota.record(principal, ctx.client_id, size, now)
        if throttle_ms:
            # As Kafka: nothing is sent, so nothing counts; the consumer asks again.
            quota.unrecord(principal, ctx.client_id, size, now)
            ctx.throttle(throttle_ms)
            session_id = plan.session.id if plan.session else 0
            if plan.session is not None and not plan.incremental:
                # As Kafka's throttled full fetch, which makes no session: the consumer
                # starts afresh after the throttle.
                ctx.broker.fetch_sessions.remove(session_id)
                session_id = 0
            return m.FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE,
                                   session_id=session_id, responses=[])
    _count(metrics, plan, result, follower)
    return _response(ctx, plan, result, read_committed)


HANDLERS = [ApiHandler(m.FetchRequest, m.FetchResponse, 4, 17, handle)]
