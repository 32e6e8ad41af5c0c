"""How this broker authenticates to the others when the inter-broker listener is a SASL one.

As Kafka: the mechanism is `sasl.mechanism.inter.broker.protocol` (default GSSAPI, which
ADS does not support), and it must be enabled on the inter-broker listener; the broker's
own user and password are the `username` / `password` options of the JAAS line
`listener.name.<listener>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config` (for
PLAIN, the same line that lists the `user_<name>` entries). Anything missing stops the
broker at start-up with a ConfigError naming the key.

`InterBrokerSasl.authenticate` is the exchange handed to `ads.net.client.BrokerConnection`
(which knows no mechanism): SaslHandshake v1, then SaslAuthenticate v1 until the mechanism
is complete; it returns the session lifetime the peer gave (KIP-368), which the connection
renews before it ends. A refusal raises `AuthenticationError`, which the callers log and
retry after their usual backoff.
"""

from __future__ import annotations

from dataclasses import dataclass

from ads.broker.authentication import JAAS_KEY, listener_settings
from ads.broker.config import LISTENER_PREFIX, BrokerConfig, ConfigError, Endpoint
from ads.client.sasl import SaslClientError, sasl_client
from ads.common.jaas import JaasError, parse_jaas_config
from ads.net.client import AuthenticationError, Send
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.security.sasl import SUPPORTED_MECHANISMS

MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"


@dataclass(frozen=True, slots=True)
class InterBrokerSasl:
    mechanism: str
    username: str
    password: str

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: Endpoint) -> InterBrokerSasl:
        """The settings for `listener` (a SASL one); ConfigError when they are unusable."""
        name = listener.listener_name
        mechanism = str(config.get(MECHANISM_KEY)).strip().upper()
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                f"Invalid value {mechanism} for configuration {MECHANISM_KEY}: brokers "
                f"authenticate to each other on {name} ({listener.security_protocol}) with "
                f"{', '.join(SUPPORTED_MECHANISMS)} only", key=MECHANISM_KEY)
        enabled = listener_settings(config, name).mechanisms
        if mechanism not in enabled:
            raise ConfigError(
                f"Invalid value {mechanism} for configuration {MECHANISM_KEY}: the "
                f"inter-broker listener {name} does not enable it (it offers "
                f"{', '.join(enabled)})", key=MECHANISM_KEY)
        specific = f"{LISTENER_PREFIX}{name.lower()}.{mechanism.lower()}.{JAAS_KEY}"
        key = specific if config.is_given(specific) else JAAS_KEY
        text = config.get(key) if config.is_given(key) else None
        if text is None:
            raise ConfigError(
                f"Brokers authenticate to each other with {mechanism} on {name} but neither "
                f"{specific} nor {JAAS_KEY} is set: give a JAAS line with username= and "
                "password=", key=specific)
        try:
            modules = parse_jaas_config(str(text))
        except JaasError as exc:
            raise ConfigError(f"Invalid value for configuration {key}: {exc}",
                              key=key) from exc
        for module in modules:
            user, password = module.options.get("username"), module.options.get("password")
            if user is not None and password is not None:
                return cls(mechanism, user, password)
        raise ConfigError(
            f"{key} has no username and password options, which brokers need to "
            f"authenticate to each other with {mechanism} on {name}", key=key)

    async def authenticate(self, send: Send) -> int:
        shake = await send(m.ApiKey.SASL_HANDSHAKE, 1,
                           m.SaslHandshakeRequest(mechanism=self.mechanism))
        assert isinstance(shake, m.SaslHandshakeResponse)
        if shake.error_code:
            raise AuthenticationError(
                f"the broker does not offer SASL mechanism {self.mechanism} (it offers "
                f"{', '.join(shake.mechanisms) or 'none'}): "
                f"{ErrorCode(shake.error_code).name}", "")
        client = sasl_client(self.mechanism, self.username, self.password)
        token: bytes | None = client.first()
        lifetime_ms = 0
        try:
            while token is not None:
                answer = await send(m.ApiKey.SASL_AUTHENTICATE, 1,
                                    m.SaslAuthenticateRequest(auth_bytes=token))
                assert isinstance(answer, m.SaslAuthenticateResponse)
                if answer.error_code:
                    raise AuthenticationError(
                        f"authentication as {self.username} with {self.mechanism} failed: "
                        f"{answer.error_message or ErrorCode(answer.error_code).name}", "")
                lifetime_ms = answer.session_lifetime_ms
                token = client.respond(bytes(answer.auth_bytes))
        except SaslClientError as exc:
            raise AuthenticationError(f"authentication with {self.mechanism} failed: {exc}",
                                      "") from exc
        return lifetime_ms
