"""Share groups (KIP-932): ShareGroupHeartbeat (key 76) v1, ShareGroupDescribe (key 77)
v1, ShareFetch (key 78) v1-2, ShareAcknowledge (key 79) v1-2, DescribeShareGroupOffsets
(key 90) v0-1, AlterShareGroupOffsets (key 91) v0 and DeleteShareGroupOffsets (key 92) v0.

Served only with `group.share.enable=true` (`handlers.all_handlers`); otherwise these APIs
are neither advertised nor answered, as Kafka 4.0 kept them behind the same key. Membership
and assignment are the group coordinator's (`ads.coordinator.group.share`); records are
acquired and acknowledged on the partition leaders (`ads.broker.share_partitions`), in the
share sessions of `ads.broker.share_sessions`.

Acknowledgements are answered once the share coordinator has their state
(`share_partitions.py`); a group's own configs (`group_configs.py`) set its locks, limits,
start and isolation level. DescribeShareGroupOffsets asks the share coordinator for each
share-partition's start offset (ReadShareGroupStateSummary); the lag is the partition's
high watermark less that, where this broker has a replica (-1 otherwise); without topics
named it describes the group's topics (its members' subscriptions and the topics whose
offsets were altered, until deleted: `ShareGroup.topics`). AlterShareGroupOffsets
(key 91) v0 starts share-partitions over at given offsets and DeleteShareGroupOffsets
(key 92) v0 deletes their state, both only while the group has no members (the leaders
drop a group's share-partitions from memory when its last share session closes, and a
leader that still writes the former state is fenced by the new state epoch). Authorized
operations of ShareGroupDescribe are reported when asked.

Version 2 of ShareFetch and ShareAcknowledge, as Kafka 4.2 on: ShareAcquireMode 1
(record_limit, KIP-1206) acquires at most MaxRecords records, splitting a batch; the
acknowledge type RENEW (4, KIP-1222) keeps records acquired and renews their lock, valid
only at v2 in a request whose IsRenewAck is set (INVALID_REQUEST for the partition
otherwise, as for any malformed acknowledgement batch: Kafka's checks in `_valid_acks`). A
ShareFetch with IsRenewAck fetches nothing and must ask for nothing (MaxBytes, MinBytes,
MaxRecords and MaxWaitMs 0; INVALID_REQUEST otherwise). ShareAcknowledge v2 answers with
the group's lock duration. A ShareFetch with MaxBytes 0 gets no records, as from Kafka
(which has no bytes to share out among the partitions). Gaps: the group config
`share.renew.acknowledge.enable` (RENEW is always allowed, Kafka's default).
"""

from __future__ import annotations

import asyncio
import uuid

from ads.broker import permissions as P
from ads.broker.authorized_operations import NOT_REQUESTED, ResourceType
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.handlers.current_leader import LeaderEndpoints
from ads.broker.handlers.groups import client_host
from ads.broker.share_partitions import AckBatch, RecordLimit, ShareRead
from ads.broker.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, SessionPartition, ShareSession
from ads.common.partitions import TopicPartition
from ads.coordinator.group.api import AssignedPartitions, HeartbeatRequest
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.replication.share_partition import AcknowledgeType

HR = m.ShareGroupHeartbeatResponse
DR = m.ShareGroupDescribeResponse
FQ = m.ShareFetchRequest
FR = m.ShareFetchResponse
AQ = m.ShareAcknowledgeRequest
AR = m.ShareAcknowledgeResponse
# ShareFetch v2's ShareAcquireMode: 0 batch_optimized, 1 record_limit (KIP-1206).
RECORD_LIMIT_MODE = 1


# -- ShareGroupHeartbeat -------------------------------------------------------------------
def handle_heartbeat(ctx: RequestContext, req: m.ShareGroupHeartbeatRequest
                     ) -> m.ShareGroupHeartbeatResponse:
    rule = P.GROUP_READ
    if not ctx.authorize(rule.resource, req.group_id, rule.operation):
        return HR(error_code=rule.error, member_epoch=0, heartbeat_interval_ms=0)
    hb = HeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        instance_id=None, rack_id=req.rack_id, rebalance_timeout_ms=-1,
        subscribed_topic_names=req.subscribed_topic_names, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=None, client_id=ctx.client_id or "",
        client_host=client_host(ctx))
    r = ctx.broker.group_coordinator.share_heartbeat(hb)
    assignment = None
    if r.assignment is not None:
        assignment = HR.Assignment(topic_partitions=[
            HR.TopicPartitions(topic_id=t, partitions=sorted(p))
            for t, p in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))])
    return HR(error_code=r.error, error_message=r.error_message, member_id=r.member_id,
              member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
              assignment=assignment)


# -- ShareGroupDescribe --------------------------------------------------------------------
def _assignment(owned: tuple[AssignedPartitions, ...]) -> DR.Assignment:
    return DR.Assignment(topic_partitions=[
        DR.TopicPartitions(topic_id=a.topic_id, topic_name=a.topic_name,
                           partitions=list(a.partitions))
        for a in owned])


def handle_describe(ctx: RequestContext, req: m.ShareGroupDescribeRequest
                    ) -> m.ShareGroupDescribeResponse:
    out = []
    rule = P.GROUP_DESCRIBE
    for group_id in req.group_ids:
        if not ctx.authorize(rule.resource, group_id, rule.operation):
            out.append(DR.DescribedGroup(error_code=rule.error, group_id=group_id,
                                         group_state=""))
            continue
        d = ctx.broker.group_coordinator.describe_share_group(group_id)
        if d.error is not ErrorCode.NONE:
            out.append(DR.DescribedGroup(error_code=d.error, error_message=d.error_message,
                                         group_id=group_id, group_state=d.state))
            continue
        members = [DR.DescribedGroup.Member(
            member_id=mem.member_id, rack_id=mem.rack_id, member_epoch=mem.member_epoch,
            client_id=mem.client_id, client_host=mem.client_host,
            subscribed_topic_names=list(mem.subscribed_topic_names),
            assignment=_assignment(mem.assignment))
            for mem in d.members]
        operations = NOT_REQUESTED
        if req.include_authorized_operations:
            operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(DR.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=d.state,
            group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch,
            assignor_name=d.assignor_name, members=members,
            authorized_operations=operations))
    return DR(groups=out)


# -- DescribeShareGroupOffsets -------------------------------------------------------------
OR = m.DescribeShareGroupOffsetsResponse
OGroup = OR.DescribeShareGroupOffsetsResponseGroup
OTopic = OGroup.DescribeShareGroupOffsetsResponseTopic
OPart = OTopic.DescribeShareGroupOffsetsResponsePartition


async def handle_describe_offsets(ctx: RequestContext, req: m.DescribeShareGroupOffsetsRequest
                                  ) -> m.DescribeShareGroupOffsetsResponse:
    out = []
    rule = P.GROUP_DESCRIBE
    for g in req.groups:
        if not ctx.authorize(rule.resource, g.group_id, rule.operation):
            out.append(OGroup(group_id=g.group_id, topics=[], error_code=rule.error))
            continue
        # As Kafka: the topics named that may not be described are answered so whatever
        # the group's own answer.
        denied = [OTopic(topic_name=t.topic_name, partitions=[
            OPart(partition_index=p, start_offset=-1, leader_epoch=-1,
                  error_code=P.DESCRIBE_TOPIC.error) for p in t.partitions])
            for t in g.topics or () if not ctx.authorize(
                P.DESCRIBE_TOPIC.resource, t.topic_name, P.DESCRIBE_TOPIC.operation)]
        d = ctx.broker.group_coordinator.describe_share_group(g.group_id)
        if d.error is not ErrorCode.NONE:
            out.append(OGroup(group_id=g.group_id, topics=denied, error_code=d.error,
                              error_message=d.error_message))
            continue
        if g.topics is not None:
            hidden = {t.topic_name for t in denied}
            asked = [(t.topic_name, list(t.partitions)) for t in g.topics
                     if t.topic_name not in hidden]
        else:  # the topics its members read and those whose offsets were altered
            names = sorted(ctx.broker.group_coordinator.share_topics(g.group_id))
            asked = [(n, list(range(len(ctx.broker.metadata.topics[n].partitions))))
                     for n in names if n in ctx.broker.metadata.topics]
        topics = await asyncio.gather(*(_offsets(ctx, g.group_id, name, parts)
                                        for name, parts in asked))
        out.append(OGroup(group_id=g.group_id, topics=[*denied, *topics]))
    return OR(groups=out)


async def _offsets(ctx: RequestContext, group_id: str, name: str, partitions: list[int]
                   ) -> OTopic:
    state = ctx.broker.metadata.topics.get(name)
    if state is None:
        return OTopic(topic_name=name, partitions=[
            OPart(partition_index=p, start_offset=-1, leader_epoch=-1,
                  error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in partitions])

    async def one(index: int) -> OPart:
        if not 0 <= index < len(state.partitions):
            return OPart(partition_index=index, start_offset=-1, leader_epoch=-1,
                         error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        found = await ctx.broker.share_state.summary(group_id, TopicPartition(name, index))
        if isinstance(found, ErrorCode):
            return OPart(partition_index=index, start_offset=-1, leader_epoch=-1,
                         error_code=found)
        start, epoch = found
        replica = ctx.broker.replica_manager.get(name, index)
        lag = replica.high_watermark - start if replica is not None and start >= 0 else -1
        return OPart(partition_index=index, start_offset=start, leader_epoch=epoch, lag=lag)

    parts = await asyncio.gather(*(one(p) for p in partitions))
    return OTopic(topic_name=name, topic_id=state.topic_id, partitions=list(parts))


# -- AlterShareGroupOffsets and DeleteShareGroupOffsets ------------------------------------
AltR = m.AlterShareGroupOffsetsResponse
AltTopic = AltR.AlterShareGroupOffsetsResponseTopic
AltPart = AltTopic.AlterShareGroupOffsetsResponsePartition
DelR = m.DeleteShareGroupOffsetsResponse
DelTopic = DelR.DeleteShareGroupOffsetsResponseTopic


def _alter_refused(req: m.AlterShareGroupOffsetsRequest, error: ErrorCode,
                   message: str | None = None) -> m.AlterShareGroupOffsetsResponse:
    return AltR(error_code=error, error_message=message, responses=[
        AltTopic(topic_name=t.topic_name, partitions=[
            AltPart(partition_index=p.partition_index, error_code=error, error_message=message)
            for p in t.partitions]) for t in req.topics])


async def handle_alter_offsets(ctx: RequestContext, req: m.AlterShareGroupOffsetsRequest
                               ) -> m.AlterShareGroupOffsetsResponse:
    """Each named share-partition starts over at its start offset (a new state with the
    share coordinator, `ShareStatePersister.reset`); only while the group has no members.
    An unknown group id becomes an empty share group, as Kafka does."""
    rule = P.GROUP_READ
    if not ctx.authorize(rule.resource, req.group_id, rule.operation):
        return _alter_refused(req, rule.error)
    error, message = ctx.broker.group_coordinator.share_offsets_changeable(req.group_id,
                                                                            create=True)
    if error is not ErrorCode.NONE:
        return _alter_refused(req, error, message)
    topics = await asyncio.gather(*(_alter_topic(ctx, req.group_id, t) for t in req.topics))
    ctx.broker.group_coordinator.share_topics(req.group_id, added=[
        t.topic_name for t in topics
        if any(p.error_code == ErrorCode.NONE for p in t.partitions)])
    return AltR(error_code=ErrorCode.NONE, responses=list(topics))


async def _alter_topic(ctx: RequestContext, group_id: str,
                       topic: m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
                       ) -> AltTopic:
    state = ctx.broker.metadata.topics.get(topic.topic_name)
    refused = None
    if not ctx.authorize(P.TOPIC_READ.resource, topic.topic_name, P.TOPIC_READ.operation):
        refused = P.TOPIC_READ.error
    elif state is None:
        refused = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def one(p: m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
                  .AlterShareGroupOffsetsRequestPartition) -> AltPart:
        error = refused
        if error is None and state is not None and not 0 <= p.partition_index < len(
                state.partitions):
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if error is None:
            error = await ctx.broker.share_state.reset(
                group_id, TopicPartition(topic.topic_name, p.partition_index), p.start_offset)
        return AltPart(partition_index=p.partition_index, error_code=error)

    parts = await asyncio.gather(*(one(p) for p in topic.partitions))
    return AltTopic(topic_name=topic.topic_name,
                    topic_id=state.topic_id if state is not None else uuid.UUID(int=0),
                    partitions=list(parts))


async def handle_delete_offsets(ctx: RequestContext, req: m.DeleteShareGroupOffsetsRequest
                                ) -> m.DeleteShareGroupOffsetsResponse:
    """The state of the group's share-partitions of each named topic is deleted (the next
    member starts there at `share.auto.offset.reset`); only while the group has no
    members."""
    rule = P.OFFSET_DELETE_GROUP
    if not ctx.authorize(rule.resource, req.group_id, rule.operation):
        return DelR(error_code=rule.error, responses=[])
    error, message = ctx.broker.group_coordinator.share_offsets_changeable(req.group_id,
                                                                            create=False)
    if error is not ErrorCode.NONE:
        return DelR(error_code=error, error_message=message, responses=[])
    out: list[DelTopic] = []
    deletable: list[str] = []
    for t in req.topics:
        state = ctx.broker.metadata.topics.get(t.topic_name)
        if not ctx.authorize(P.TOPIC_READ.resource, t.topic_name, P.TOPIC_READ.operation):
            out.append(DelTopic(topic_name=t.topic_name, error_code=P.TOPIC_READ.error))
        elif state is None:
            out.append(DelTopic(topic_name=t.topic_name,
                                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            deletable.append(t.topic_name)
    if deletable:
        error = await ctx.broker.share_state.delete(req.group_id, deletable)
        if error is ErrorCode.NONE:
            ctx.broker.group_coordinator.share_topics(req.group_id, removed=deletable)
        for name in deletable:
            out.append(DelTopic(topic_name=name, error_code=error,
                                topic_id=ctx.broker.metadata.topics[name].topic_id))
    return DelR(error_code=ErrorCode.NONE, responses=out)


# -- shared by ShareFetch and ShareAcknowledge ---------------------------------------------
def _names(ctx: RequestContext, ids: set[uuid.UUID]) -> dict[uuid.UUID, str | ErrorCode]:
    """Each topic id's name, or the error its partitions get: UNKNOWN_TOPIC_ID, or
    TOPIC_AUTHORIZATION_FAILED without READ on the topic."""
    names: dict[uuid.UUID, str | ErrorCode] = {}
    rule = P.TOPIC_READ
    for topic_id in ids:
        state = ctx.broker.metadata.topic_by_id(topic_id)
        if state is None:
            names[topic_id] = ErrorCode.UNKNOWN_TOPIC_ID
        elif not ctx.authorize(rule.resource, state.name, rule.operation):
            names[topic_id] = rule.error
        else:
            names[topic_id] = state.name
    return names


async def _acknowledge(ctx: RequestContext, group_id: str, member_id: str,
                       names: dict[uuid.UUID, str | ErrorCode],
                       acks: dict[SessionPartition, list[AckBatch]], version: int,
                       renew: bool) -> dict[SessionPartition, ErrorCode]:
    """Each partition's acknowledgements, all at once; answered once their state is
    written."""
    out: dict[SessionPartition, ErrorCode] = {}
    pending = {}
    for key, batches in acks.items():
        name = names[key[0]]
        if isinstance(name, ErrorCode):
            out[key] = name
            continue
        if not _valid_acks(batches, version, renew):
            out[key] = ErrorCode.INVALID_REQUEST
            continue
        pending[key] = ctx.broker.share_partitions.acknowledge(
            group_id, member_id, TopicPartition(name, key[1]), batches)
    done = await asyncio.gather(*pending.values())
    out.update(zip(pending, done, strict=True))
    return out


def _ack_batches(batches: list[FQ.FetchTopic.FetchPartition.AcknowledgementBatch]
                 | list[AQ.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch]
                 ) -> list[AckBatch]:
    return [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches]


def _valid_acks(batches: list[AckBatch], version: int, renew: bool) -> bool:
    """Kafka's checks of one partition's acknowledgement batches, refused as a whole
    (INVALID_REQUEST) when one fails: offsets in order, a type per batch or per offset, and
    types known at the version; RENEW (v2) only in a request that says it carries renewals
    (IsRenewAck)."""
    highest = AcknowledgeType.RENEW if version >= 2 else AcknowledgeType.REJECT
    previous_last = -1
    for first, last, types in batches:
        if (first > last or first < previous_last or not types
                or len(types) not in (1, last - first + 1)
                or any(not 0 <= t <= highest for t in types)
                or (not renew and AcknowledgeType.RENEW in types)):
            return False
        previous_last = last
    return True


# -- ShareFetch ----------------------------------------------------------------------------
async def handle_fetch(ctx: RequestContext, req: m.ShareFetchRequest) -> m.ShareFetchResponse:
    group_id, member_id = req.group_id or "", req.member_id or ""
    # The group's own lock duration (a group config) when it sets one.
    lock_ms = ctx.broker.share_partitions.lock_duration_ms(group_id)
    rule = P.GROUP_READ
    if not ctx.authorize(rule.resource, group_id, rule.operation):
        return FR(error_code=rule.error, acquisition_lock_timeout_ms=lock_ms)
    acks: dict[SessionPartition, list[AckBatch]] = {}
    added: list[SessionPartition] = []
    for topic in req.topics:
        for part in topic.partitions:
            added.append((topic.topic_id, part.partition_index))
            if part.acknowledgement_batches:
                acks[(topic.topic_id, part.partition_index)] = _ack_batches(
                    part.acknowledgement_batches)
    if not group_id or not member_id or (req.share_session_epoch == INITIAL_EPOCH and acks):
        return FR(error_code=ErrorCode.INVALID_REQUEST, acquisition_lock_timeout_ms=lock_ms)
    # A fetch that carries renewals fetches nothing, so it must ask for nothing (Kafka).
    renew = ctx.api_version >= 2 and req.is_renew_ack
    if renew and (req.max_bytes or req.min_bytes or req.max_records or req.max_wait_ms):
        return FR(error_code=ErrorCode.INVALID_REQUEST, acquisition_lock_timeout_ms=lock_ms)
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    session = ctx.broker.share_sessions.fetch(group_id, member_id, req.share_session_epoch,
                                              added, forgotten)
    if isinstance(session, ErrorCode):
        return FR(error_code=session, acquisition_lock_timeout_ms=lock_ms)
    names = _names(ctx, {k[0] for k in session.partitions} | {k[0] for k in acks})
    ack_errors = await _acknowledge(ctx, group_id, member_id, names, acks, ctx.api_version,
                                    renew)
    if req.share_session_epoch == FINAL_EPOCH:
        # The member's acquired records go with it (`SharePartitionManager.member_left`).
        ctx.broker.share_sessions.close(session)
        return _fetch_response(ctx, {}, ack_errors, names, lock_ms)
    if renew or req.max_bytes <= 0:
        # Kafka reads nothing for a fetch of at most 0 bytes (it has no bytes to share out
        # among the partitions) and answers it at once, as one that renews locks.
        return _fetch_response(ctx, {}, ack_errors, names, lock_ms)
    tps = {key: TopicPartition(name, key[1]) for key in session.partitions
           if isinstance(name := names[key[0]], str)}
    limit = RecordLimit(req.max_records if req.max_records > 0 else 500,
                        ctx.api_version >= 2 and req.share_acquire_mode == RECORD_LIMIT_MODE)
    # Acknowledgements alone are answered at once (the client waits for their result).
    max_wait = 0 if acks else req.max_wait_ms
    reads = ctx.broker.share_partitions.fetch(group_id, member_id, list(tps.values()),
                                              max_wait, req.max_bytes, limit)
    done = reads if isinstance(reads, dict) else await reads
    return _fetch_response(ctx, _by_key(tps, done, session, names), ack_errors, names, lock_ms)


def _by_key(tps: dict[SessionPartition, TopicPartition],
            reads: dict[TopicPartition, ShareRead], session: ShareSession,
            names: dict[uuid.UUID, str | ErrorCode]) -> dict[SessionPartition, ShareRead]:
    out = {key: reads[tp] for key, tp in tps.items() if tp in reads}
    for key in session.partitions:  # named by an unknown (or denied) topic id
        name = names[key[0]]
        if isinstance(name, ErrorCode):
            out[key] = ShareRead(name)
    return out


def _fetch_response(ctx: RequestContext, reads: dict[SessionPartition, ShareRead],
                    ack_errors: dict[SessionPartition, ErrorCode],
                    names: dict[uuid.UUID, str | ErrorCode], lock_ms: int
                    ) -> m.ShareFetchResponse:
    Part = FR.ShareFetchableTopicResponse.PartitionData  # noqa: N806
    Acquired = Part.AcquiredRecords  # noqa: N806
    topics: dict[uuid.UUID, list[FR.ShareFetchableTopicResponse.PartitionData]] = {}
    leaders = LeaderEndpoints(ctx.broker.metadata, ctx.connection.listener_name)
    moved = False
    for key in dict.fromkeys([*reads, *ack_errors]):
        read = reads.get(key, ShareRead())
        ack = ack_errors.get(key)
        if not read.acquired and read.error is ErrorCode.NONE and ack is None:
            continue  # nothing to say of this partition of the session
        name = names[key[0]]
        part = Part(partition_index=key[1], error_code=read.error,
                    acknowledge_error_code=ack if ack is not None else ErrorCode.NONE,
                    records=read.records if read.records is not None else b"",
                    acquired_records=[Acquired(first_offset=a[0], last_offset=a[1],
                                               delivery_count=a[2]) for a in read.acquired])
        if isinstance(name, str):
            leader_id, epoch = leaders.leader(name, key[1])
            part.current_leader = Part.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch)
            moved |= read.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        topics.setdefault(key[0], []).append(part)
    # The leaders' endpoints, so that a client goes to a partition's new leader at once.
    endpoints = leaders.endpoints(FR.NodeEndpoint) if moved else []
    return FR(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms,
              responses=[FR.ShareFetchableTopicResponse(topic_id=t, partitions=parts)
                         for t, parts in topics.items()], node_endpoints=endpoints)


# -- ShareAcknowledge ----------------------------------------------------------------------
async def handle_acknowledge(ctx: RequestContext, req: m.ShareAcknowledgeRequest
                             ) -> m.ShareAcknowledgeResponse:
    group_id, member_id = req.group_id or "", req.member_id or ""
    lock_ms = ctx.broker.share_partitions.lock_duration_ms(group_id)
    rule = P.GROUP_READ
    if not ctx.authorize(rule.resource, group_id, rule.operation):
        return AR(error_code=rule.error, acquisition_lock_timeout_ms=lock_ms)
    if not group_id or not member_id:
        return AR(error_code=ErrorCode.INVALID_REQUEST, acquisition_lock_timeout_ms=lock_ms)
    session = ctx.broker.share_sessions.acknowledge(group_id, member_id,
                                                    req.share_session_epoch)
    if isinstance(session, ErrorCode):
        return AR(error_code=session, acquisition_lock_timeout_ms=lock_ms)
    acks = {(t.topic_id, p.partition_index): _ack_batches(p.acknowledgement_batches)
            for t in req.topics for p in t.partitions}
    names = _names(ctx, {k[0] for k in session.partitions} | {k[0] for k in acks})
    errors = await _acknowledge(ctx, group_id, member_id, names, acks, ctx.api_version,
                                ctx.api_version >= 2 and req.is_renew_ack)
    if req.share_session_epoch == FINAL_EPOCH:
        # The member's acquired records go with it (`SharePartitionManager.member_left`).
        ctx.broker.share_sessions.close(session)
    Part = AR.ShareAcknowledgeTopicResponse.PartitionData  # noqa: N806
    topics: dict[uuid.UUID, list[AR.ShareAcknowledgeTopicResponse.PartitionData]] = {}
    leaders = LeaderEndpoints(ctx.broker.metadata, ctx.connection.listener_name)
    moved = False
    for (topic_id, index), error in errors.items():
        part = Part(partition_index=index, error_code=error)
        name = names[topic_id]
        if error is ErrorCode.NOT_LEADER_OR_FOLLOWER and isinstance(name, str):
            leader_id, epoch = leaders.leader(name, index)
            part.current_leader = Part.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch)
            moved = True
        topics.setdefault(topic_id, []).append(part)
    return AR(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms, responses=[
        AR.ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts)
        for t, parts in topics.items()],
        node_endpoints=leaders.endpoints(AR.NodeEndpoint) if moved else [])


HANDLERS = [
    ApiHandler(m.DescribeShareGroupOffsetsRequest, m.DescribeShareGroupOffsetsResponse, 0, 1,
               handle_describe_offsets),
    ApiHandler(m.AlterShareGroupOffsetsRequest, m.AlterShareGroupOffsetsResponse, 0, 0,
               handle_alter_offsets),
    ApiHandler(m.DeleteShareGroupOffsetsRequest, m.DeleteShareGroupOffsetsResponse, 0, 0,
               handle_delete_offsets),
    ApiHandler(m.ShareGroupHeartbeatRequest, m.ShareGroupHeartbeatResponse, 1, 1,
               handle_heartbeat),
    ApiHandler(m.ShareGroupDescribeRequest, m.ShareGroupDescribeResponse, 1, 1,
               handle_describe),
    ApiHandler(m.ShareFetchRequest, m.ShareFetchResponse, 1, 2, handle_fetch),
    ApiHandler(m.ShareAcknowledgeRequest, m.ShareAcknowledgeResponse, 1, 2,
               handle_acknowledge),
]
