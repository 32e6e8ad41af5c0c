"""Connections from a KRaft broker to its controllers, for `ads.metadata.kraft`.

The metadata store knows no sockets (`metadata/` sits beside `net/`, not above it): the
broker hands it this connector, which opens a `BrokerConnection` to a controller's address
and turns the connection's errors into the store's `ControllerUnreachableError` at this one
boundary. Controllers are reached over PLAINTEXT only for now; a controller listener with
TLS or SASL is refused at start-up (`check_controller_listener`).
"""

from __future__ import annotations

from ads.broker.config import BrokerConfig, ConfigError
from ads.metadata.kraft_quorum import ControllerConnection, ControllerUnreachableError
from ads.net.client import BrokerConnection, NetClientError
from ads.protocol.base import Message

CLIENT_ID = "ads-broker-to-controller"


class _Connection:
    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn

    async def request(self, api_key: int, api_version: int, body: Message, *,
                      timeout_s: float | None = None) -> Message:
        try:
            return await self._conn.request(api_key, api_version, body, timeout_s=timeout_s)
        except NetClientError as exc:
            raise ControllerUnreachableError(str(exc)) from exc

    async def close(self) -> None:
        await self._conn.close()


async def connect_controller(host: str, port: int) -> ControllerConnection:
    try:
        conn = await BrokerConnection.connect(host, port, client_id=CLIENT_ID,
                                              connect_timeout_s=5.0, request_timeout_s=30.0)
    except NetClientError as exc:
        raise ControllerUnreachableError(str(exc)) from exc
    return _Connection(conn)


def check_controller_listener(config: BrokerConfig) -> None:
    """The controller listener (the first of `controller.listener.names`) must be a
    PLAINTEXT one: TLS and SASL to controllers are not supported yet."""
    names = [n.strip().upper() for n in
             str(config.get("controller.listener.names") or "").split(",") if n.strip()]
    if not names:
        raise ConfigError("controller.listener.names is required with process.roles=broker",
                          key="controller.listener.names")
    protocols = {}
    for pair in str(config.get("listener.security.protocol.map")).split(","):
        name, _, protocol = pair.strip().partition(":")
        protocols[name.strip().upper()] = protocol.strip().upper()
    protocol = protocols.get(names[0], names[0])
    if protocol != "PLAINTEXT":
        raise ConfigError(f"controller listener {names[0]} uses {protocol}: ADS reaches "
                          "KRaft controllers over PLAINTEXT only for now",
                          key="controller.listener.names")
