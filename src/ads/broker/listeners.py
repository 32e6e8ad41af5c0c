"""The broker's listeners as the config names them: TLS settings per listener, the
endpoints advertised for them, and how this broker reaches the others.

TLS settings of a listener are the `ssl.*` keys, each overridden by
`listener.name.<listener name in lower case>.ssl.*` when that is set (Kafka's rule: key by
key). A listener of protocol SSL or SASL_SSL gets a server context from them
(`ads.client.tls`), built when the broker is made, so a missing or bad key or certificate stops
the start with a ConfigError naming it.

Brokers reach each other on the listener `inter.broker.listener.name` names (or the first
whose protocol is `security.inter.broker.protocol`): replica fetchers, transaction markers
and the controlled shutdown request connect to the peer's advertised endpoint of that
listener, over TLS when its protocol says so, with a client context made of this broker's
settings for that listener (its trust store to check the peer; its key store as client
certificate, for peers that ask for one; the host name checked unless
`ssl.endpoint.identification.algorithm` is empty), and, in a cluster whose inter-broker
listener is a SASL one, authenticated with `sasl.mechanism.inter.broker.protocol`
(`ads.broker.inter_broker_sasl`).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from ads.broker.config import BrokerConfig, ConfigError, Endpoint
from ads.broker.inter_broker_sasl import InterBrokerSasl
from ads.client.tls import TlsConfigError, client_context, server_context, uses_tls
from ads.metadata.model import ListenerEndpoint
from ads.metadata.store import MetadataStore
from ads.net.client import Authenticate, BrokerConnection, NetClientError
from ads.net.principal import PrincipalMappingError, SslPrincipalMapper
from ads.net.server import PrincipalOf

SSL_KEYS = (
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.principal.mapping.rules",
)


def _text(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def ssl_settings(config: BrokerConfig, listener_name: str) -> dict[str, str]:
    """The `ssl.*` keys of one listener, as text, its `listener.name.` overrides applied."""
    prefix = f"listener.name.{listener_name.lower()}."
    out: dict[str, str] = {}
    for key in SSL_KEYS:
        value = config.get(prefix + key) if config.is_given(prefix + key) else config.get(key)
        if value is not None:
            out[key] = _text(value)
    return out


@dataclass(frozen=True, slots=True)
class ListenerTls:
    context: ssl.SSLContext
    principal_of: PrincipalOf


def listener_tls(config: BrokerConfig, endpoint: Endpoint) -> ListenerTls | None:
    """The server side of a TLS listener; None for PLAINTEXT and SASL_PLAINTEXT."""
    if not uses_tls(endpoint.security_protocol):
        return None
    settings = ssl_settings(config, endpoint.listener_name)
    where = f"listener {endpoint.listener_name}"
    try:
        context = server_context(settings, where=where)
        mapper = SslPrincipalMapper(settings.get("ssl.principal.mapping.rules", "DEFAULT"))
    except TlsConfigError as exc:
        raise ConfigError(str(exc), key=exc.key) from exc
    except PrincipalMappingError as exc:
        raise ConfigError(f"{where}: {exc}", key="ssl.principal.mapping.rules") from exc
    return ListenerTls(context, mapper.principal)


def advertised_endpoints(config: BrokerConfig, bound: Mapping[str, tuple[str, int]]
                         ) -> tuple[ListenerEndpoint, ...]:
    """Every advertised listener with the port it was bound to where the config left the
    choice to the system (port 0), and a reachable host where it named every interface."""
    configured = {e.listener_name: e for e in config.listener_endpoints}
    out = []
    for adv in config.advertised_listener_endpoints:
        bound_host, bound_port = bound[adv.listener_name]
        port = adv.port
        listen_port = configured[adv.listener_name].port
        if port == 0 or (port == listen_port and listen_port == 0):
            port = bound_port
        host = adv.host
        if host in ("", "0.0.0.0"):  # noqa: S104 - only a comparison
            host = "127.0.0.1" if bound_host in ("0.0.0.0", "") else bound_host  # noqa: S104
        out.append(ListenerEndpoint(adv.listener_name, adv.security_protocol, host, port))
    return tuple(out)


def inter_broker_listener(config: BrokerConfig) -> Endpoint:
    """The listener other brokers are reached on. ConfigError when `inter.broker.listener.name`
    names no advertised listener, or, in cluster mode, no listener has
    `security.inter.broker.protocol` (a lone broker reaches nobody: its first listener)."""
    given = [k for k in ("inter.broker.listener.name", "security.inter.broker.protocol")
             if config.is_given(k)]
    if len(given) == 2:
        raise ConfigError("Only one of inter.broker.listener.name and "
                          "security.inter.broker.protocol should be set.",
                          key="inter.broker.listener.name")
    name = config.inter_broker_listener_name
    advertised = {e.listener_name: e for e in config.advertised_listener_endpoints}
    if name in advertised:
        return advertised[name]
    if config.zookeeper_connect is None and "inter.broker.listener.name" not in given:
        return config.listener_endpoints[0]
    if name is None:
        key = "security.inter.broker.protocol"
        problem = f"no advertised listener uses protocol {config.get(key)}"
    else:
        key = "inter.broker.listener.name"
        problem = f"{name} is not an advertised listener"
    raise ConfigError(f"{key}: {problem} (advertised: {', '.join(advertised)})", key=key)


class InterBroker:
    """How this broker connects to another: the listener, the TLS context and the SASL
    exchange to use."""

    def __init__(self, config: BrokerConfig, metadata: MetadataStore) -> None:
        self.listener = inter_broker_listener(config)
        self._metadata = metadata
        self.ssl_context: ssl.SSLContext | None = None
        if uses_tls(self.listener.security_protocol):
            settings = ssl_settings(config, self.listener.listener_name)
            settings["security.protocol"] = "SSL"
            settings.pop("ssl.client.auth", None)
            try:
                self.ssl_context = client_context(settings)
            except TlsConfigError as exc:
                raise ConfigError(f"inter-broker listener {self.listener.listener_name}: "
                                  f"{exc}", key=exc.key) from exc
        self.sasl: InterBrokerSasl | None = None
        # A lone broker reaches nobody, so its first listener may be a SASL one without
        # inter-broker credentials.
        if config.zookeeper_connect and self.listener.security_protocol.startswith("SASL_"):
            self.sasl = InterBrokerSasl.from_config(config, self.listener)

    @property
    def authenticate(self) -> Authenticate | None:
        return self.sasl.authenticate if self.sasl is not None else None

    def address(self, node_id: int) -> tuple[str, int] | None:
        """The peer's endpoint on the inter-broker listener; None if it is not live or
        lacks that listener."""
        broker = self._metadata.brokers.get(node_id)
        endpoint = broker.on(self.listener.listener_name) if broker is not None else None
        return (endpoint.host, endpoint.port) if endpoint is not None else None

    async def connect(self, node_id: int, *, client_id: str | None = "ads-broker",
                      connect_timeout_s: float = 10.0,
                      request_timeout_s: float = 30.0) -> BrokerConnection:
        address = self.address(node_id)
        if address is None:
            raise NetClientError(f"broker {node_id} is not live or has no listener "
                                 f"{self.listener.listener_name}", str(node_id))
        return await BrokerConnection.connect(
            address[0], address[1], client_id=client_id, connect_timeout_s=connect_timeout_s,
            request_timeout_s=request_timeout_s, ssl_context=self.ssl_context,
            authenticate=self.authenticate)
