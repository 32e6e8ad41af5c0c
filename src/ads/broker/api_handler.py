"""`ApiHandler`: one API the broker serves, as the dispatcher (`dispatch.py`) sees it.

Kept out of `dispatch.py` because that module is compiled with mypyc
(tools/build_compiled.py), which cannot compile a generic frozen dataclass.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from ads.protocol.base import Message
from ads.protocol.messages import API_KEYS

if TYPE_CHECKING:
    from ads.broker.dispatch import RequestContext

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


@dataclass(frozen=True, slots=True)
class ApiHandler(Generic[Req, Resp]):
    """One API served: its request and response classes, the versions it fully implements
    and its handler, which answers at once or with an awaitable (None: no response, an
    acks=0 produce)."""

    request: type[Req]
    response: type[Resp]
    min_version: int
    max_version: int
    fn: Callable[[RequestContext, Req], Resp | None | Awaitable[Resp | None]]
    api_key: int = field(init=False)

    def __post_init__(self) -> None:
        key = self.request.API_KEY
        classes = API_KEYS.get(key) if key is not None else None
        if classes is None or classes[1:] != (self.request, self.response):
            raise TypeError(f"{self.request.__name__} and {self.response.__name__} are not "
                            "the request and response of one API")
        low, high = self.request.VALID_VERSIONS
        if not low <= self.min_version <= self.max_version <= high:
            raise ValueError(f"{classes[0]} versions {self.min_version}-{self.max_version} "
                             f"outside the schema's {low}-{high}")
        object.__setattr__(self, "api_key", key)
