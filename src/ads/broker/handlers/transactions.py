"""The transaction APIs: AddPartitionsToTxn (key 24) v0-5, AddOffsetsToTxn (key 25) v0-4,
EndTxn (key 26) v0-3, WriteTxnMarkers (key 27) v0-1, DescribeProducers (key 61) v0,
DescribeTransactions (key 65) v0, ListTransactions (key 66) v0-1.

The rules are the transaction coordinator's (`ads.coordinator.transaction`, the answer
tables in its `state.py`); this module maps requests and results. A transactional id
whose `__transaction_state` partition is loading gets COORDINATOR_LOAD_IN_PROGRESS, one
this broker does not coordinate NOT_COORDINATOR. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
for clients before KIP-588 (AddPartitionsToTxn, AddOffsetsToTxn and EndTxn before v2).

AddPartitionsToTxn v0-3 carry one transaction (clients); v4-5 a batch of them, each of
which may be `verify_only` (KIP-890 part 1: a partition leader on another broker asks
whether a write belongs to the ongoing transaction, `ads.broker.txn_verify`; nothing is
added). An unknown topic or partition fails
the request with UNKNOWN_TOPIC_OR_PARTITION for it and OPERATION_NOT_ATTEMPTED for the rest.

WriteTxnMarkers is what a coordinator sends to the leaders of a transaction's partitions;
each marker is written to a partition led here as acks=all and answered once committed
(`ads.broker.markers.write_local`). The
tools (`ads transactions abort`, Kafka's `kafka-transactions.sh abort`) send it too, to end
a transaction a partition holds open that no coordinator will end.

DescribeProducers answers, per partition with a replica here (leader or follower, as in
Kafka: the tools may ask a given broker), the producer state of its log: every producer id
with state, its epoch, last sequence, last write time, the coordinator epoch of its last
marker and the first offset of its open transaction (-1: none). A partition without a
replica here gets UNKNOWN_TOPIC_OR_PARTITION.

Gaps: EndTxn v4+ (KIP-890 part 2, the epoch bumped per transaction) is not advertised; no
broker feature `transaction.version` is advertised, so clients use the classic protocol.
"""

from __future__ import annotations

import asyncio

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.markers import by_topics, write_local
from ads.common.partitions import TopicPartition
from ads.coordinator.group.records import OFFSETS_TOPIC
from ads.coordinator.transaction.state import fenced_error
from ads.metadata.acl import CLUSTER_NAME
from ads.metadata.model import INTERNAL_TOPICS
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.replication.partition import PartitionError

APR = m.AddPartitionsToTxnResponse


def _topic_results(errors: dict[TopicPartition, ErrorCode]
                   ) -> list[APR.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[APR.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(APR.AddPartitionsToTxnPartitionResult(
            partition_index=index, partition_error_code=error))
    return [APR.AddPartitionsToTxnTopicResult(name=t, results_by_partition=p)
            for t, p in by_topic.items()]


def _refused_partitions(ctx: RequestContext, txn_id: str, wanted: list[TopicPartition]
                        ) -> dict[TopicPartition, ErrorCode] | None:
    """A client's AddPartitionsToTxn needs WRITE on its transactional id and on each topic;
    when a topic is denied the others are not attempted, as in Kafka. None: all allowed."""
    txn_rule, topic_rule = P.TXN_WRITE, P.TXN_TOPIC_WRITE
    if not ctx.authorize(txn_rule.resource, txn_id, txn_rule.operation):
        return dict.fromkeys(wanted, txn_rule.error)
    denied = {t for t, _ in wanted if t not in INTERNAL_TOPICS
              and not ctx.authorize(topic_rule.resource, t, topic_rule.operation)}
    if not denied:
        return None
    return {tp: topic_rule.error if tp.topic in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted}


def _txn_error(ctx: RequestContext, txn_id: str, group_id: str | None = None
               ) -> ErrorCode | None:
    """WRITE on the transactional id, then READ on the group (AddOffsetsToTxn)."""
    checks = [(P.TXN_WRITE, txn_id)] + ([(P.GROUP_READ, group_id)] if group_id else [])
    return next((r.error for r, name in checks
                 if not ctx.authorize(r.resource, name, r.operation)), None)


async def handle_add_partitions(ctx: RequestContext, req: m.AddPartitionsToTxnRequest
                                ) -> m.AddPartitionsToTxnResponse:
    coordinator = ctx.broker.transaction_coordinator
    v = ctx.api_version
    if v <= 3:
        wanted = [TopicPartition(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        refused = _refused_partitions(ctx, req.v3_and_below_transactional_id, wanted)
        if refused is not None:
            return APR(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(refused))
        errors = await coordinator.add_partitions(
            req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch, wanted)
        fenced = {p: fenced_error(e, v >= 2) for p, e in errors.items()}
        return APR(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(fenced))
    rule = P.ADD_PARTITIONS_BROKERS
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        return APR(throttle_time_ms=0, error_code=rule.error, results_by_transaction=[])
    results = []
    for txn in req.transactions:
        wanted = [TopicPartition(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            errors = coordinator.verify_partitions(txn.transactional_id, txn.producer_id,
                                                   txn.producer_epoch, wanted)
        else:
            errors = await coordinator.add_partitions(txn.transactional_id, txn.producer_id,
                                                      txn.producer_epoch, wanted)
        results.append(APR.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                    topic_results=_topic_results(errors)))
    return APR(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)


async def handle_add_offsets(ctx: RequestContext, req: m.AddOffsetsToTxnRequest
                             ) -> m.AddOffsetsToTxnResponse:
    denied = _txn_error(ctx, req.transactional_id, req.group_id)
    if denied is not None:
        return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=denied)
    groups = ctx.broker.group_coordinator
    error = await ctx.broker.transaction_coordinator.add_offsets(
        req.transactional_id, req.producer_id, req.producer_epoch,
        TopicPartition(OFFSETS_TOPIC, groups.partition_of(req.group_id)))
    return m.AddOffsetsToTxnResponse(throttle_time_ms=0,
                                     error_code=fenced_error(error, ctx.api_version >= 2))


async def handle_end_txn(ctx: RequestContext, req: m.EndTxnRequest) -> m.EndTxnResponse:
    denied = _txn_error(ctx, req.transactional_id)
    if denied is not None:
        return m.EndTxnResponse(throttle_time_ms=0, error_code=denied)
    answer = await ctx.broker.transaction_coordinator.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    return m.EndTxnResponse(throttle_time_ms=0,
                            error_code=fenced_error(answer.error, ctx.api_version >= 2))


async def handle_write_txn_markers(ctx: RequestContext, req: m.WriteTxnMarkersRequest
                                   ) -> m.WriteTxnMarkersResponse:
    R = m.WriteTxnMarkersResponse.WritableTxnMarkerResult  # noqa: N806
    T = R.WritableTxnMarkerTopicResult  # noqa: N806
    alter, action = P.MARKERS_ALTER, P.CLUSTER_ACTION
    allowed = (ctx.authorize(alter.resource, CLUSTER_NAME, alter.operation)
               or ctx.authorize(action.resource, CLUSTER_NAME, action.operation))
    # Each marker is committed (acks=all) before the answer; all of them at once.
    written = await asyncio.gather(*(
        write_local(ctx.broker, marker.producer_id, marker.producer_epoch,
                    marker.transaction_result, marker.coordinator_epoch,
                    [TopicPartition(t.name, index)
                     for t in marker.topics for index in t.partition_indexes])
        for marker in (req.markers if allowed else [])))
    results = []
    for i, marker in enumerate(req.markers):
        errors = written[i] if allowed else {}
        topics = [T(name=t.name, partitions=[T.WritableTxnMarkerPartitionResult(
            partition_index=index,
            error_code=(errors.get(TopicPartition(t.name, index), ErrorCode.NONE) if allowed
                        else action.error))
            for index in t.partition_indexes]) for t in marker.topics]
        results.append(R(producer_id=marker.producer_id, topics=topics))
    return m.WriteTxnMarkersResponse(markers=results)


def handle_describe_producers(ctx: RequestContext, req: m.DescribeProducersRequest
                              ) -> m.DescribeProducersResponse:
    TR = m.DescribeProducersResponse.TopicResponse  # noqa: N806
    PR = TR.PartitionResponse  # noqa: N806
    topics = []
    rule = P.DESCRIBE_PRODUCERS
    for t in req.topics:
        parts = []
        allowed = ctx.authorize(rule.resource, t.name, rule.operation)
        for index in t.partition_indexes:
            if not allowed:
                parts.append(PR(partition_index=index, error_code=rule.error,
                                error_message=None, active_producers=[]))
                continue
            try:
                active = ctx.broker.replica_manager.active_producers(t.name, index)
            except PartitionError as exc:
                parts.append(PR(partition_index=index, error_code=exc.code,
                                error_message=None, active_producers=[]))
                continue
            producers = [PR.ProducerState(
                producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=(-1 if e.current_txn_first_offset is None
                                          else e.current_txn_first_offset))
                for e in active]
            parts.append(PR(partition_index=index, error_code=ErrorCode.NONE,
                            error_message=None, active_producers=producers))
        topics.append(TR(name=t.name, partitions=parts))
    return m.DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def handle_describe_transactions(ctx: RequestContext, req: m.DescribeTransactionsRequest
                                 ) -> m.DescribeTransactionsResponse:
    TS = m.DescribeTransactionsResponse.TransactionState  # noqa: N806
    states = []
    rule = P.TXN_DESCRIBE
    for txn_id in req.transactional_ids:
        if not ctx.authorize(rule.resource, txn_id, rule.operation):
            states.append(TS(error_code=rule.error, transactional_id=txn_id,
                             transaction_state="", transaction_timeout_ms=0,
                             transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                             topics=[]))
            continue
        d = ctx.broker.transaction_coordinator.describe(txn_id)
        shown = P.TXN_DESCRIBE_TOPICS
        by_topic = {t: parts for t, parts in by_topics(d.partitions).items()
                    if ctx.authorize(shown.resource, t, shown.operation)}
        states.append(TS(
            error_code=d.error, transactional_id=txn_id, transaction_state=d.state,
            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_ms,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[TS.TopicData(topic=t, partitions=p) for t, p in by_topic.items()]))
    return m.DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


def handle_list_transactions(ctx: RequestContext, req: m.ListTransactionsRequest
                             ) -> m.ListTransactionsResponse:
    duration = req.duration_filter if ctx.api_version >= 1 else -1
    error, unknown, found = ctx.broker.transaction_coordinator.list_transactions(
        list(req.state_filters), list(req.producer_id_filters), duration)
    TS = m.ListTransactionsResponse.TransactionState  # noqa: N806
    return m.ListTransactionsResponse(
        throttle_time_ms=0, error_code=error, unknown_state_filters=unknown,
        transaction_states=[TS(transactional_id=t.transactional_id, producer_id=t.producer_id,
                               transaction_state=t.state.kafka_name) for t in found
                            if ctx.authorize(P.LIST_TXNS.resource, t.transactional_id,
                                             P.LIST_TXNS.operation)])


HANDLERS = [
    ApiHandler(m.AddPartitionsToTxnRequest, m.AddPartitionsToTxnResponse,
               0, 5, handle_add_partitions),
    ApiHandler(m.AddOffsetsToTxnRequest, m.AddOffsetsToTxnResponse, 0, 4, handle_add_offsets),
    ApiHandler(m.EndTxnRequest, m.EndTxnResponse, 0, 3, handle_end_txn),
    ApiHandler(m.WriteTxnMarkersRequest, m.WriteTxnMarkersResponse, 0, 1, handle_write_txn_markers),
    ApiHandler(m.DescribeProducersRequest, m.DescribeProducersResponse,
               0, 0, handle_describe_producers),
    ApiHandler(m.DescribeTransactionsRequest, m.DescribeTransactionsResponse,
               0, 0, handle_describe_transactions),
    ApiHandler(m.ListTransactionsRequest, m.ListTransactionsResponse,
               0, 1, handle_list_transactions),
]
