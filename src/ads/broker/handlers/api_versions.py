"""ApiVersions (key 18), versions 0-4.

Advertises exactly the dispatcher's table. Unsupported request versions are answered by
the dispatcher in the v0 layout (KIP-511). No features are advertised (no KRaft here).
"""

from __future__ import annotations

from ads.broker.dispatch import ApiHandler, RequestContext
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode


def handle(ctx: RequestContext, req: m.ApiVersionsRequest) -> m.ApiVersionsResponse:
    ApiVersion = m.ApiVersionsResponse.ApiVersion  # noqa: N806
    keys = [ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in ctx.dispatcher.api_ranges()]
    return m.ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0)


HANDLERS = [ApiHandler(m.ApiVersionsRequest, m.ApiVersionsResponse, 0, 4, handle)]
