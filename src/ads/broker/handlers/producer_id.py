"""InitProducerId (key 22), versions 0-5, for idempotent producers.

A producer without a transactional id gets a fresh producer id and epoch 0. A producer
that names its current id and epoch (v3+, KIP-360) gets the epoch bumped, or a new id when
the epoch is exhausted. Transactional ids are refused until the transaction coordinator
exists (a separate piece of work), with UNSUPPORTED_VERSION, logged once per client.
"""

from __future__ import annotations

from ads.broker.dispatch import ApiHandler, RequestContext
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

MAX_EPOCH = 32767


async def handle(ctx: RequestContext, req: m.InitProducerIdRequest
                 ) -> m.InitProducerIdResponse:
    if req.transactional_id is not None:
        ctx.refused("InitProducerId with a transactional id: transactions are not supported "
                    "yet (UNSUPPORTED_VERSION)")
        return m.InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
            producer_id=-1, producer_epoch=-1)
    if ctx.api_version >= 3 and req.producer_id >= 0 and 0 <= req.producer_epoch < MAX_EPOCH - 1:
        return m.InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE,
            producer_id=req.producer_id, producer_epoch=req.producer_epoch + 1)
    return m.InitProducerIdResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE,
        producer_id=await ctx.broker.next_producer_id(), producer_epoch=0)


HANDLERS = [ApiHandler(m.ApiKey.INIT_PRODUCER_ID, 0, 5, handle)]
