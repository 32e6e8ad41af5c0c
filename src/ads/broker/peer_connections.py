"""Outbound connections from this broker to the others, kept per broker and purpose.

The transaction machinery (`markers.py`: markers and KIP-890 verifications) and the share-
partition leaders (`share_state.py`: the share coordinator's APIs) reach other brokers
through one `PeerConnections` each. A connection is made on first use over the inter-broker
listener (`InterBroker.connect`: its TLS and SASL), kept for the next requests, and dropped
after a failure so that the next request connects again. One per purpose: a broker answers
a connection's requests one at a time, and a request that waits long (a marker waits until
it is committed) must not hold up another kind. Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ads.net.client import BrokerConnection, NetClientError
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.broker.listeners import InterBroker
    from ads.protocol.base import Message

__all__ = ["NetClientError", "PeerConnections", "error_code"]


def error_code(value: int) -> ErrorCode:
    """An error code from another broker's answer (one unknown here: UNKNOWN_SERVER_ERROR)."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class PeerConnections:
    def __init__(self, inter_broker: Callable[[], InterBroker], request_timeout_s: float
                 ) -> None:
        # Asked at each connect: the broker makes its InterBroker after its coordinators.
        self._inter_broker = inter_broker
        self.request_timeout_s = request_timeout_s
        self._connections: dict[tuple[int, str], BrokerConnection] = {}
        self._connecting: dict[tuple[int, str], asyncio.Lock] = {}

    async def request(self, node: int, purpose: str, api_key: int, api_version: int,
                      body: Message) -> Message:
        """One request to `node` on the connection kept for `purpose`; raises
        `NetClientError` (the connection is dropped) when it cannot be completed."""
        key = (node, purpose)
        try:
            conn = await self._connection(key)
            return await conn.request(api_key, api_version, body,
                                      timeout_s=self.request_timeout_s)
        except NetClientError:
            await self.drop(key)
            raise

    async def drop(self, key: tuple[int, str]) -> None:
        dropped = self._connections.pop(key, None)
        if dropped is not None:
            await dropped.close()

    async def _connection(self, key: tuple[int, str]) -> BrokerConnection:
        # One connect at a time per broker and purpose: two racing ones would leave one
        # unclosed.
        async with self._connecting.setdefault(key, asyncio.Lock()):
            conn = self._connections.get(key)
            if conn is not None and not conn.closed:
                return conn
            conn = await self._inter_broker().connect(key[0],
                                                    request_timeout_s=self.request_timeout_s)
            self._connections[key] = conn
            return conn

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
