"""Produce (key 0), versions 3-11, advertised from 0.

librdkafka refuses to send compressed batches unless Produce's advertised minimum is 0
(KAFKA-18659), so 0 is advertised and versions 0-2 are answered with UNSUPPORTED_VERSION
per partition. acks=-1 waits in the replica manager's produce purgatory until the high
watermark passes the appended batches (at once while this broker is the partition's whole
ISR), answering REQUEST_TIMED_OUT for partitions still waiting at `timeout_ms`.
A batch with records its topic refuses (no key on a compacted topic, a timestamp out of
`message.timestamp.before.max.ms` / `after.max.ms`) fails whole with INVALID_RECORD or
INVALID_TIMESTAMP; from v8 the response lists every refused record in `record_errors`
with Kafka's messages (KIP-467) and says why in `error_message`.
A transactional batch is accepted only for a partition the request's transactional id has
added to its ongoing transaction with the batch's producer id and epoch (KIP-890 part 1,
`ads.broker.txn_verify`: asked of the transaction coordinator, over the network when it
runs on another broker; otherwise INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH or
INVALID_PRODUCER_ID_MAPPING). Clients may
not write to internal topics (`__consumer_offsets`). Refusals of missing features
(versions 0-2, transactional batches) are logged once per client and reason
(`RequestContext.refused`); other rejected partitions one line per request.
From v10 a NOT_LEADER_OR_FOLLOWER partition names the current leader and the response
carries its endpoint (KIP-951, `current_leader.py`).
With acks=0 no response is sent; if a partition fails, the connection is closed so the
client notices, as Kafka does.
A client over its `producer_byte_rate` quota (`ads.broker.quotas`; the request's size is
what counts, as in Kafka) is told so in `throttle_time_ms` and its connection is muted
that long after the response (after the request, with acks=0).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from ads.broker import permissions as P
from ads.broker import txn_verify
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.handlers.current_leader import LeaderEndpoints
from ads.broker.metrics import (
    BYTES_IN,
    FAILED_PRODUCE,
    MESSAGES_IN,
    PRODUCE_REQUESTS,
    UNKNOWN_TOPIC,
)
from ads.common.partitions import TopicPartition
from ads.metadata.model import INTERNAL_TOPICS
from ads.net.server import CloseConnection
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.replication.partition import AppendOrigin, PartitionError, VerificationGuard
from ads.replication.purgatory import DelayedProduce
from ads.replication.replica_manager import Appended

log = logging.getLogger("ads.broker.produce")
R = m.ProduceResponse
TopicResp = R.TopicProduceResponse
PartResp = R.TopicProduceResponse.PartitionProduceResponse
RecordErr = PartResp.BatchIndexAndErrorMessage


def _has_transactional_batch(req: m.ProduceRequest) -> bool:
    """Whether a partition's first batch is transactional (Kafka looks at the first)."""
    return any(txn_verify.is_transactional(pd.records)
               for td in req.topic_data for pd in td.partition_data)


def handle(ctx: RequestContext, req: m.ProduceRequest
           ) -> m.ProduceResponse | Awaitable[m.ProduceResponse | None] | None:
    rule = P.PRODUCE_TXN
    # As Kafka: transactional batches need WRITE on the request's transactional id (and
    # one); the check costs a byte per partition.
    if ctx.authorizing and _has_transactional_batch(req) and (
            req.transactional_id is None
            or not ctx.authorize(rule.resource, req.transactional_id, rule.operation)):
        if req.acks == 0:
            raise CloseConnection
        return m.ProduceResponse(throttle_time_ms=0, responses=[
            TopicResp(name=td.name, partition_responses=[
                PartResp(index=pd.index, error_code=rule.error, base_offset=-1)
                for pd in td.partition_data]) for td in req.topic_data])
    remote = txn_verify.remote_checks(ctx.broker, req)
    if remote is not None:
        return _after_verification(ctx, req, *remote)
    return _append(ctx, req, {})


async def _after_verification(ctx: RequestContext, req: m.ProduceRequest, producer_id: int,
                              producer_epoch: int, partitions: list[TopicPartition]
                              ) -> m.ProduceResponse | None:
    assert req.transactional_id is not None
    # The guards tie the verification to the append: a marker ending the transaction
    # while the coordinator is asked drops them, and the append is refused.
    replicas = ctx.broker.replica_manager
    guards = {p: g for p in partitions
              if (g := replicas.start_verification(p.topic, p.partition, producer_id)) is not None}
    verdicts = await txn_verify.verify_remotely(ctx.broker, req.transactional_id, producer_id,
                                                producer_epoch, partitions)
    answer = _append(ctx, req, verdicts, guards)
    if answer is None or isinstance(answer, m.ProduceResponse):
        return answer
    return await answer


def _topic_refusal(ctx: RequestContext, req: m.ProduceRequest, topic: str
                   ) -> tuple[ErrorCode, str | None] | None:
    """Why every partition of `topic` in the request is refused (code, message), or None:
    these rules depend on the request and the topic only, so they are decided per topic."""
    rule = P.PRODUCE_TOPIC
    if ctx.api_version < 3:
        ctx.refused(f"Produce v{ctx.api_version}: versions 0-2 (message formats 0 "
                    "and 1) are not supported (UNSUPPORTED_VERSION)")
        return ErrorCode.UNSUPPORTED_VERSION, None
    if not ctx.authorize(rule.resource, topic, rule.operation):
        return rule.error, None
    if req.acks not in (0, 1, -1):
        return ErrorCode.INVALID_REQUIRED_ACKS, None
    if topic in INTERNAL_TOPICS:
        # Only the coordinators write their internal topics, as in Kafka.
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}"
    return None


def _append(ctx: RequestContext, req: m.ProduceRequest,
            verdicts: dict[TopicPartition, ErrorCode],
            guards: dict[TopicPartition, VerificationGuard] | None = None
            ) -> m.ProduceResponse | Awaitable[m.ProduceResponse] | None:
    broker = ctx.broker
    entries: dict[TopicPartition, memoryview | None] = {}
    refused: dict[TopicPartition, PartResp] = {}
    keys: list[TopicPartition] = []  # the request's partitions in order, each key built once
    for td in req.topic_data:
        refusal = _topic_refusal(ctx, req, td.name)
        for pd in td.partition_data:
            key = TopicPartition(td.name, pd.index)
            keys.append(key)
            if refusal is None:
                # A byte read for a batch that is not transactional.
                code = txn_verify.check(broker, req.transactional_id, key, pd.records,
                                        verdicts)
                if code is ErrorCode.NONE:
                    entries[key] = pd.records
                    continue
                log.info("transactional produce to %s-%d from %s rejected: %s", td.name,
                         pd.index, ctx.connection.peer, code.name)
                code_message: tuple[ErrorCode, str | None] = (code, None)
            else:
                code_message = refusal
            refused[key] = PartResp(index=pd.index, error_code=code_message[0],
                                    base_offset=-1, error_message=code_message[1])
    appended = broker.replica_manager.append_records(
        entries, AppendOrigin.CLIENT, req.acks, req.timeout_ms, guards)
    responses, waiting, failed = _responses(ctx, req, appended, refused, keys)
    quota = broker.quotas.produce
    throttle_ms = (quota.record(ctx.connection.principal, ctx.client_id, ctx.request_size,
                                broker.clock.time_ms()) if quota.enabled else 0)
    if throttle_ms:
        ctx.throttle(throttle_ms)
    if req.acks == 0:
        if failed:
            # No response to carry the errors: closing is how an acks=0 producer learns of
            # them (Kafka does the same), and this line is how the operator does.
            errors = ", ".join(f"{t.name}-{p.index}: {ErrorCode(p.error_code).name}"
                               for t in responses for p in t.partition_responses
                               if p.error_code != ErrorCode.NONE)
            log.info("closing connection from %s (client %r): acks=0 produce failed (%s)",
                     ctx.connection.peer, ctx.client_id, errors)
            raise CloseConnection
        return None
    response = m.ProduceResponse(responses=responses, throttle_time_ms=throttle_ms)
    if appended.pending is None:
        if failed and ctx.api_version >= 10:
            _name_leaders(ctx, response)
        return response
    return _after_commit(ctx, appended.pending, waiting, response, failed)


def _responses(ctx: RequestContext, req: m.ProduceRequest, appended: Appended,
               refused: dict[TopicPartition, PartResp], keys: list[TopicPartition]
               ) -> tuple[list[TopicResp], dict[TopicPartition, PartResp], bool]:
    """The response's partitions in the request's order (`keys`: their keys in that
    order), those whose acks=all wait goes on, and whether any failed; counts the topics'
    metrics."""
    metrics = ctx.dispatcher.metrics
    topics = ctx.broker.metadata.topics
    results = appended.results
    responses = []
    waiting: dict[TopicPartition, PartResp] = {}
    failed = False
    in_order = iter(keys)
    for td in req.topic_data:
        # Counted under the topic's name only when it exists: names clients make up must
        # not grow the metrics without bound.
        counters = metrics.topic(td.name if td.name in topics else UNKNOWN_TOPIC)
        partitions = []
        for pd in td.partition_data:
            key = next(in_order)
            resp = refused.get(key)
            if resp is None:
                result = results[key]
                resp = PartResp(index=pd.index, error_code=ErrorCode.NONE, base_offset=-1)
                if isinstance(result, PartitionError):
                    _refused_append(ctx, td.name, pd.index, result, resp)
                else:
                    counters[BYTES_IN] += len(pd.records) if pd.records is not None else 0
                    counters[MESSAGES_IN] += result.next_offset - result.base_offset
                    resp.base_offset = result.base_offset
                    resp.log_append_time_ms = result.log_append_time_ms
                    resp.log_start_offset = result.log_start_offset
                    if req.acks == -1:
                        waiting[key] = resp
            counters[PRODUCE_REQUESTS] += 1
            if resp.error_code != ErrorCode.NONE:
                failed = True
                counters[FAILED_PRODUCE] += 1
            partitions.append(resp)
        responses.append(TopicResp(name=td.name, partition_responses=partitions))
    return responses, waiting, failed


def _refused_append(ctx: RequestContext, topic: str, index: int, exc: PartitionError,
                    resp: PartResp) -> None:
    if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        # also for a name Kafka would refuse to create: Produce does not judge names
        resp.error_code = exc.code
        return
    resp.error_code = exc.code
    resp.error_message = exc.message
    resp.record_errors = [RecordErr(batch_index=i, batch_index_error_message=text)
                          for i, text in exc.record_errors]
    log.info("produce to %s-%d from %s rejected: %s: %s", topic, index,
             ctx.connection.peer, exc.code.name, exc.message)


async def _after_commit(ctx: RequestContext, pending: DelayedProduce,
                        entries: dict[TopicPartition, PartResp],
                        response: m.ProduceResponse, failed: bool) -> m.ProduceResponse:
    await pending.future
    for key, code in pending.errors.items():
        entries[key].error_code = code
    if (failed or pending.errors) and ctx.api_version >= 10:
        _name_leaders(ctx, response)
    return response


def _name_leaders(ctx: RequestContext, response: m.ProduceResponse) -> None:
    """KIP-951: each NOT_LEADER_OR_FOLLOWER partition names its leader."""
    leaders = LeaderEndpoints(ctx.broker.metadata, ctx.connection.listener_name)
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leader_id, epoch = leaders.leader(topic.name, part.index)
                part.current_leader = PartResp.LeaderIdAndEpoch(leader_id=leader_id,
                                                                leader_epoch=epoch)
    response.node_endpoints = leaders.endpoints(R.NodeEndpoint)


HANDLERS = [ApiHandler(m.ProduceRequest, m.ProduceResponse, 0, 11, handle)]
