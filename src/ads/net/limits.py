"""Connection limits, shared by every listener of a broker: Kafka's `max.connections`,
`max.connections.per.ip` (+ `max.connections.per.ip.overrides`) and
`connections.max.idle.ms`.

Refusals. A connection beyond `max.connections.per.ip` (or its address's override) is
closed as soon as it is accepted, as Kafka's acceptor does. One beyond `max.connections`
is closed at once too; Kafka instead stops accepting until a connection goes, leaving the
new ones waiting in the listen backlog, which asyncio's server cannot do without reaching
into its accept loop. Either way the client sees its connection end and retries after its
backoff, and the connections already open keep being served. Refusals are logged at INFO
at most once per address and `_LOG_INTERVAL_S`, so a client retrying in a tight loop
cannot flood the log. Kafka's exemption of the inter-broker listener from
`max.connections` and per-listener `listener.name.<name>.max.connections` are not
implemented.

Idle connections. Each connection notes when it last received a request or wrote a
response (`ConnectionInfo.last_active`, a `perf_counter()` the network layer takes anyway);
one timer for all connections looks at them every quarter of `connections.max.idle.ms`
(at most every 30 s) and closes those idle longer, so a connection is closed between one
and one and a quarter of the limit after its last request. A connection answering a
request (a long-polling fetch) or muted by a quota is not idle.

Not thread-safe: used from the event loop only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import Mapping
from typing import Protocol

log = logging.getLogger("ads.net")

UNLIMITED = 2**31 - 1
_LOG_INTERVAL_S = 60.0
_MAX_IDLE_CHECK_S = 30.0


class LimitedConnection(Protocol):
    """What the limits need of a connection (`ads.net.server.KafkaConnection`)."""

    def idle_since(self) -> float | None:
        """perf_counter() of its last activity; None while it is busy or muted."""

    def close_idle(self) -> None: ...


def parse_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: "host:count,..." by IP address; host names are
    resolved once, here. ValueError names the entry that is not one."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not host:count")
        out[_address(host.strip())] = int(count)
    return out


def _address(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise ValueError(f"cannot resolve host {host!r}: {exc}") from exc


class ConnectionLimits:
    def __init__(self, max_connections: int = UNLIMITED, max_per_ip: int = UNLIMITED,
                 overrides: Mapping[str, int] | None = None, max_idle_ms: int = -1) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides or {})
        self.max_idle_ms = max_idle_ms
        self.count = 0
        self._per_ip: dict[str, int] = {}
        self._logged: dict[str, float] = {}  # address -> monotonic time of its last log line
        self._connections: set[LimitedConnection] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.refused = 0  # since start, for /metrics
        self.idle_closed = 0

    @property
    def per_ip_limited(self) -> bool:
        return self.max_per_ip < UNLIMITED or bool(self.overrides)

    def admit(self, conn: LimitedConnection, ip: str) -> bool:
        """Counts a new connection from `ip`; False (counting nothing) if it must be closed."""
        if self.per_ip_limited:
            limit = self.overrides.get(ip, self.max_per_ip)
            if self._per_ip.get(ip, 0) >= limit:
                self._refuse(ip, f"max.connections.per.ip ({limit}) reached")
                return False
        if self.count >= self.max_connections:
            self._refuse(ip, f"max.connections ({self.max_connections}) reached")
            return False
        self.count += 1
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        self._connections.add(conn)
        if self.max_idle_ms >= 0 and self._timer is None:
            self._schedule()
        return True

    def release(self, conn: LimitedConnection, ip: str) -> None:
        """The admitted connection `conn` from `ip` is gone."""
        if conn not in self._connections:
            return
        self._connections.discard(conn)
        self.count -= 1
        left = self._per_ip.get(ip, 0) - 1
        if left > 0:
            self._per_ip[ip] = left
        else:
            self._per_ip.pop(ip, None)
        if not self._connections and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _refuse(self, ip: str, reason: str) -> None:
        self.refused += 1
        now = time.monotonic()
        last = self._logged.get(ip)
        if last is None or now - last >= _LOG_INTERVAL_S:
            if len(self._logged) > 10_000:  # many addresses: forget who was logged
                self._logged.clear()
            self._logged[ip] = now
            log.info("closing a new connection from %s: %s (logged once a minute per "
                     "address)", ip, reason)

    def _schedule(self) -> None:
        interval = min(max(self.max_idle_ms / 4000.0, 0.01), _MAX_IDLE_CHECK_S)
        self._timer = asyncio.get_running_loop().call_later(interval, self._close_idle)

    def _close_idle(self) -> None:
        self._timer = None
        deadline = time.perf_counter() - self.max_idle_ms / 1000.0
        for conn in list(self._connections):
            since = conn.idle_since()
            if since is not None and since < deadline:
                self.idle_closed += 1
                conn.close_idle()
        if self._connections:
            self._schedule()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
