"""Handler registration: an `ApiHandler` names its API's request and response classes and
versions within the schema's, or the broker does not start (every handler module is
imported when the dispatcher is built)."""

from __future__ import annotations

import pytest

from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.handlers import all_handlers
from ads.protocol import messages as m


def _answer(ctx: RequestContext, req: m.ListGroupsRequest) -> m.ListGroupsResponse:
    return m.ListGroupsResponse()


def test_dispatch_registration_derives_the_api_key_from_the_request_class() -> None:
    handler = ApiHandler(m.ListGroupsRequest, m.ListGroupsResponse, 0, 4, _answer)
    assert handler.api_key == m.ApiKey.LIST_GROUPS
    served = all_handlers(cluster=True)
    assert len({h.api_key for h in served}) == len(served)  # one handler per API
    for h in served:
        assert m.API_KEYS[h.api_key][1:] == (h.request, h.response)


def test_dispatch_registration_refuses_classes_of_another_api_or_versions_past_the_schema(
        ) -> None:
    with pytest.raises(TypeError, match="not the request and response of one API"):
        ApiHandler(m.ListGroupsRequest, m.DescribeGroupsResponse, 0, 4, _answer)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ApiHandler(m.GroupMetadataValue, m.ListGroupsResponse, 0, 0, _answer)  # type: ignore[arg-type]
    high = m.ListGroupsRequest.VALID_VERSIONS[1]
    with pytest.raises(ValueError, match="outside the schema"):
        ApiHandler(m.ListGroupsRequest, m.ListGroupsResponse, 0, high + 1, _answer)
