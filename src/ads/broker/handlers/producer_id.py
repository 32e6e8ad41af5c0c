"""InitProducerId (key 22), versions 0-5, for idempotent and transactional producers.

A producer without a transactional id gets a fresh producer id and epoch 0. A producer
that names its current id and epoch (v3+, KIP-360) gets the epoch bumped, or a new id when
the epoch is exhausted. A transactional id goes to the transaction coordinator
(`ads.coordinator.transaction`): its producer id is kept across instances and the epoch is
bumped, fencing the previous instance and aborting a transaction it left open (the new
instance is answered CONCURRENT_TRANSACTIONS until the abort is complete, and retries).
`transaction_timeout_ms` above `transaction.max.timeout.ms` is INVALID_TRANSACTION_TIMEOUT;
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4 (KIP-588).
"""

from __future__ import annotations

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.coordinator.transaction.state import fenced_error
from ads.metadata.acl import CLUSTER_NAME
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

MAX_EPOCH = 32767


async def handle(ctx: RequestContext, req: m.InitProducerIdRequest
                 ) -> m.InitProducerIdResponse:
    txn_rule, cluster_rule, topic_rule = P.INIT_PID_TXN, P.INIT_PID_IDEMPOTENT, P.INIT_PID_ANY_TOPIC
    if req.transactional_id is not None and not ctx.authorize(
            txn_rule.resource, req.transactional_id, txn_rule.operation):
        return _refused(txn_rule.error)
    if req.transactional_id is None and not (
            ctx.authorize(cluster_rule.resource, CLUSTER_NAME, cluster_rule.operation)
            or ctx.authorize_any(topic_rule.resource, topic_rule.operation)):
        return _refused(cluster_rule.error)
    if req.transactional_id is not None:
        pid, epoch = (req.producer_id, req.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
        answer = await ctx.broker.transaction_coordinator.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, pid, epoch)
        ok = answer.error is ErrorCode.NONE
        return m.InitProducerIdResponse(
            throttle_time_ms=0, error_code=fenced_error(answer.error, ctx.api_version >= 4),
            producer_id=answer.producer_id if ok else -1,
            producer_epoch=answer.producer_epoch if ok else -1)
    if ctx.api_version >= 3 and req.producer_id >= 0 and 0 <= req.producer_epoch < MAX_EPOCH - 1:
        return m.InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE,
            producer_id=req.producer_id, producer_epoch=req.producer_epoch + 1)
    return m.InitProducerIdResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE,
        producer_id=await ctx.broker.next_producer_id(), producer_epoch=0)


def _refused(code: ErrorCode) -> m.InitProducerIdResponse:
    return m.InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1,
                                    producer_epoch=-1)


HANDLERS = [ApiHandler(m.InitProducerIdRequest, m.InitProducerIdResponse, 0, 5, handle)]
