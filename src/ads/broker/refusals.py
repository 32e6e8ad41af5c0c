"""Refusals of what ADS does not support yet, logged once per client and reason.

A request refused because ADS lacks the feature (an API version outside the advertised
range, Produce v0-2, a ListOffsets timestamp kind of tiered storage) is logged at INFO the
first time a client meets that refusal, so an operator sees why a client fails without a
line per retry. A client is its client id and host (connections of one client come from
many ports).

The memory is bounded: the oldest of `capacity` (client, reason) pairs is forgotten first,
so a stream of distinct client ids costs a bounded set and, at worst, a repeated line.
Used from the broker's event loop only.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

__all__ = ["RefusalLog"]

DEFAULT_CAPACITY = 10_000


class RefusalLog:
    def __init__(self, logger: logging.Logger, capacity: int = DEFAULT_CAPACITY) -> None:
        self._log = logger
        self._capacity = capacity
        self._seen: OrderedDict[tuple[str, str | None, str], None] = OrderedDict()

    def refused(self, peer: str, client_id: str | None, reason: str) -> bool:
        """Logs `reason` for this client unless it was logged already; returns whether it
        logged. `peer` is the connection's "host:port"."""
        host = peer.rsplit(":", 1)[0]
        key = (host, client_id, reason)
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        self._log.info("refused a request from client %r at %s: %s (logged once per client "
                       "and reason)", client_id, host, reason)
        return True
