"""Committed offsets: OffsetCommit (key 8) v2-9, OffsetFetch (key 9) v1-9, OffsetDelete
(key 47) v0, TxnOffsetCommit (key 28) v0-4.

TxnOffsetCommit writes a transactional producer's offsets as a transactional batch; they
become visible when its transaction commits (the COMMIT marker reaches the group's
`__consumer_offsets` partition) and vanish if it aborts. The transaction must have added
the group (AddOffsetsToTxn): checked with its coordinator (`ads.broker.txn_verify`),
INVALID_TXN_STATE otherwise; a coordinator that cannot be asked gives
COORDINATOR_NOT_AVAILABLE (clients retry it; Produce's NOT_ENOUGH_REPLICAS would abort
the transaction). The member and generation (v3+)
are checked as for OffsetCommit, except that a rebalancing group takes them.

Commits are answered only once their record is committed to `__consumer_offsets`, and
OffsetDelete once its tombstones are; a group whose partition is loading gets
COORDINATOR_LOAD_IN_PROGRESS.
OffsetCommit checks the member, then its generation, then the group's state, as Kafka does
(the order is in `ads.coordinator.group.state`); from v9 a commit with a generation to a
group that does not exist gets GROUP_ID_NOT_FOUND (ILLEGAL_GENERATION before).
OffsetCommit v2-v4 retention times set a per-offset expire timestamp; from v5 the broker's
`offsets.retention.minutes` alone applies. OffsetFetch v8+ takes several groups; v9 checks
the member id and epoch of KIP-848 consumers. Offsets are answered from the coordinator's
cache; a partition without a committed offset gets offset -1 and no error.
With `require_stable` (v7+, sent by read_committed consumers) a partition whose offset an
open transaction holds (TxnOffsetCommit, `ads.coordinator.group.txn_offsets`) gets
UNSTABLE_OFFSET_COMMIT, which the client retries.
Permissions (`ads.broker.permissions`): OffsetCommit READ on the group (else every
partition GROUP_AUTHORIZATION_FAILED) and READ on each topic (else its partitions
TOPIC_AUTHORIZATION_FAILED); TxnOffsetCommit WRITE on the transactional id first; OffsetFetch
DESCRIBE on the group and on each named topic (a fetch of all the group's offsets leaves
out the topics the principal may not describe); OffsetDelete DELETE on the group and READ on
each topic.
"""

from __future__ import annotations

from typing import Any

from ads.broker import permissions as perm
from ads.broker import txn_verify
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.common.partitions import TopicPartition
from ads.coordinator.group.api import CommittedOffset, OffsetCommit
from ads.coordinator.group.records import OFFSETS_TOPIC
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

CR = m.OffsetCommitResponse
FR = m.OffsetFetchResponse
ByTopic = dict[str, list[tuple[int, CommittedOffset | None]]]
# Stands for the offset of a partition that an open transaction holds (require_stable).
UNSTABLE = CommittedOffset(-1, -1, "", -1)
# Stands for the offset of a named topic the principal may not describe.
DENIED = CommittedOffset(-1, -1, "", -1)


def _denied_topics(ctx: RequestContext, rule: perm.Rule, names: list[str]) -> set[str]:
    return {n for n in names if not ctx.authorize(rule.resource, n, rule.operation)}


async def handle_offset_commit(ctx: RequestContext, req: m.OffsetCommitRequest
                               ) -> m.OffsetCommitResponse:
    v = ctx.api_version
    group_rule, topic_rule = perm.GROUP_READ, perm.TOPIC_READ
    errors: dict[TopicPartition, ErrorCode] = {}
    if not ctx.authorize(group_rule.resource, req.group_id, group_rule.operation):
        errors = {TopicPartition(t.name, p.partition_index): group_rule.error
                  for t in req.topics for p in t.partitions}
    else:
        denied = _denied_topics(ctx, topic_rule, [t.name for t in req.topics])
        commits = [
            OffsetCommit(t.name, p.partition_index, p.committed_offset,
                         p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata)
            for t in req.topics if t.name not in denied for p in t.partitions]
        results = await ctx.broker.group_coordinator.commit_offsets(
            req.group_id, req.generation_id_or_member_epoch, req.member_id,
            req.group_instance_id if v >= 7 else None,
            req.retention_time_ms if 2 <= v <= 4 else -1, commits, v)
        errors = {TopicPartition(c.topic, c.partition): e
                  for c, e in zip(commits, results, strict=True)}
        errors.update({TopicPartition(t.name, p.partition_index): topic_rule.error
                       for t in req.topics if t.name in denied for p in t.partitions})
    return m.OffsetCommitResponse(topics=[
        CR.OffsetCommitResponseTopic(name=t.name, partitions=[
            CR.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                partition_index=p.partition_index,
                error_code=errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions])
        for t in req.topics])


async def handle_txn_offset_commit(ctx: RequestContext, req: m.TxnOffsetCommitRequest
                                  ) -> m.TxnOffsetCommitResponse:
    v = ctx.api_version
    T = m.TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic  # noqa: N806
    refusal = next((r.error for r, name in ((perm.TXN_WRITE, req.transactional_id),
                                             (perm.GROUP_READ, req.group_id))
                    if not ctx.authorize(r.resource, name, r.operation)), None)
    if refusal is not None:
        return m.TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            T(name=t.name, partitions=[T.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=refusal)
                for p in t.partitions]) for t in req.topics])
    denied = _denied_topics(ctx, perm.TOPIC_READ, [t.name for t in req.topics])
    commits = [
        OffsetCommit(t.name, p.partition_index, p.committed_offset,
                     p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata)
        for t in req.topics if t.name not in denied for p in t.partitions]
    groups = ctx.broker.group_coordinator
    partition = groups.partition_of(req.group_id)
    # Offsets of a transaction that did not add the group (AddOffsetsToTxn) would never
    # get a marker and stay pending for ever: refused, as Kafka's KIP-890 check does. The
    # guard left in the partition's producer state refuses the write if the transaction
    # ends while its coordinator is asked.
    guard = ctx.broker.replica_manager.start_verification(OFFSETS_TOPIC, partition,
                                                          req.producer_id)
    verdict = await txn_verify.verify(
        ctx.broker, req.transactional_id, req.producer_id, req.producer_epoch,
        TopicPartition(OFFSETS_TOPIC, partition))
    results: list[ErrorCode] = [verdict] * len(commits)
    if verdict is ErrorCode.NONE:
        results = await groups.txn_commit_offsets(
            req.group_id, req.producer_id, req.producer_epoch,
            req.generation_id if v >= 3 else -1, req.member_id if v >= 3 else "",
            req.group_instance_id if v >= 3 else None, commits, guard)
    done = {TopicPartition(c.topic, c.partition): e
            for c, e in zip(commits, results, strict=True)}
    return m.TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[
            T.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index,
                error_code=done.get(TopicPartition(t.name, p.partition_index),
                                    perm.TOPIC_READ.error))
            for p in t.partitions])
        for t in req.topics])


def _fetch_group(ctx: RequestContext, group_id: str,
                 topics: list[tuple[str, list[int]]] | None, member_id: str | None,
                 member_epoch: int, require_stable: bool) -> tuple[ErrorCode, ByTopic]:
    group_rule, topic_rule = perm.OFFSET_FETCH_GROUP, perm.DESCRIBE_TOPIC
    if not ctx.authorize(group_rule.resource, group_id, group_rule.operation):
        return group_rule.error, {t: [(p, None) for p in parts] for t, parts in topics or []}
    denied = _denied_topics(ctx, topic_rule, [t for t, _ in topics or []])
    if topics is not None and denied:
        error, permitted = _fetch_group(ctx, group_id,
                                        [t for t in topics if t[0] not in denied],
                                        member_id, member_epoch, require_stable)
        return error, {t: [(p, DENIED) for p in parts] if t in denied else permitted.get(t, [])
                       for t, parts in topics}
    wanted = (None if topics is None
              else [TopicPartition(t, p) for t, parts in topics for p in parts])
    coordinator = ctx.broker.group_coordinator
    error, found = coordinator.fetch_offsets(group_id, wanted, member_id, member_epoch)
    by_topic: ByTopic = {}
    if error is ErrorCode.NONE:
        unstable = (coordinator.unstable_offsets(group_id, [tp for tp, _ in found])
                    if require_stable else set())
        for tp, committed in found:
            topic, partition = tp
            if topics is None and ctx.authorizing and not ctx.authorize(
                    topic_rule.resource, topic, topic_rule.operation):
                continue
            by_topic.setdefault(topic, []).append(
                (partition, UNSTABLE if tp in unstable else committed))
    elif topics is not None:
        for topic, parts in topics:
            by_topic[topic] = [(p, None) for p in parts]
    return error, by_topic


def _partition_fields(partition: int, committed: CommittedOffset | None, error: ErrorCode
                      ) -> dict[str, Any]:
    """Keyword arguments of an OffsetFetch partition entry (the v1-7 and v8+ structs have
    the same fields under different classes)."""
    if committed is UNSTABLE:
        error = ErrorCode.UNSTABLE_OFFSET_COMMIT
        committed = None
    elif committed is DENIED:
        error = perm.DESCRIBE_TOPIC.error
        committed = None
    if committed is None:
        return {"partition_index": partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": error}
    return {"partition_index": partition, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata,
            "error_code": error}


def handle_offset_fetch(ctx: RequestContext, req: m.OffsetFetchRequest
                        ) -> m.OffsetFetchResponse:
    v = ctx.api_version
    if v >= 8:
        G = FR.OffsetFetchResponseGroup  # noqa: N806
        P = G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions  # noqa: N806
        groups = []
        for g in req.groups:
            topics = None if g.topics is None else [(t.name, list(t.partition_indexes))
                                                    for t in g.topics]
            member_id = g.member_id if v >= 9 and g.member_id else None
            error, by_topic = _fetch_group(ctx, g.group_id, topics, member_id,
                                           g.member_epoch if v >= 9 else -1, req.require_stable)
            groups.append(G(group_id=g.group_id, error_code=error, topics=[] if error else [
                G.OffsetFetchResponseTopics(name=t, partitions=[
                    P(**_partition_fields(p, c, ErrorCode.NONE)) for p, c in parts])
                for t, parts in by_topic.items()]))
        return m.OffsetFetchResponse(groups=groups)
    topics = None if req.topics is None else [(t.name, list(t.partition_indexes))
                                              for t in req.topics]
    error, by_topic = _fetch_group(ctx, req.group_id, topics, None, -1,
                                   v >= 7 and req.require_stable)
    # v1 has no top-level error: a group error goes on every partition.
    part_error = error if v < 2 else ErrorCode.NONE
    T = FR.OffsetFetchResponseTopic  # noqa: N806
    return m.OffsetFetchResponse(error_code=error, topics=[
        T(name=t, partitions=[
            T.OffsetFetchResponsePartition(**_partition_fields(p, c, part_error))
            for p, c in parts])
        for t, parts in by_topic.items()])


async def handle_offset_delete(ctx: RequestContext, req: m.OffsetDeleteRequest
                               ) -> m.OffsetDeleteResponse:
    group_rule = perm.OFFSET_DELETE_GROUP
    if not ctx.authorize(group_rule.resource, req.group_id, group_rule.operation):
        return m.OffsetDeleteResponse(error_code=group_rule.error)
    denied = _denied_topics(ctx, perm.TOPIC_READ, [t.name for t in req.topics])
    wanted = [TopicPartition(t.name, p.partition_index) for t in req.topics if t.name not in denied
              for p in t.partitions]
    error, results = await ctx.broker.group_coordinator.delete_offsets(req.group_id, wanted)
    if error is not ErrorCode.NONE:
        return m.OffsetDeleteResponse(error_code=error)
    done = dict(zip(wanted, results, strict=True))
    codes = iter(done.get(TopicPartition(t.name, p.partition_index), perm.TOPIC_READ.error)
                 for t in req.topics for p in t.partitions)
    T = m.OffsetDeleteResponse.OffsetDeleteResponseTopic  # noqa: N806
    return m.OffsetDeleteResponse(error_code=ErrorCode.NONE, topics=[
        T(name=t.name, partitions=[
            T.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                            error_code=next(codes))
            for p in t.partitions])
        for t in req.topics])


HANDLERS = [
    ApiHandler(m.OffsetCommitRequest, m.OffsetCommitResponse, 2, 9, handle_offset_commit),
    ApiHandler(m.OffsetFetchRequest, m.OffsetFetchResponse, 1, 9, handle_offset_fetch),
    ApiHandler(m.OffsetDeleteRequest, m.OffsetDeleteResponse, 0, 0, handle_offset_delete),
    ApiHandler(m.TxnOffsetCommitRequest, m.TxnOffsetCommitResponse, 0, 4, handle_txn_offset_commit),
]
