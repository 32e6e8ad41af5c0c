"""SASL on the broker's SASL listeners: which mechanisms each offers, PLAIN's users from
Kafka's JAAS configuration, SCRAM credentials from the metadata store, session lifetimes.

Settings per listener, in Kafka's precedence (listener names lower-cased in keys):
- mechanisms: `listener.name.<l>.sasl.enabled.mechanisms`, else `sasl.enabled.mechanisms`;
  PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are supported (GSSAPI and OAUTHBEARER are not: a
  SASL listener offering one refuses to start).
- PLAIN's users are the `user_<name>="<password>"` options of the PlainLoginModule entry
  found first in `listener.name.<l>.plain.sasl.jaas.config`, `listener.name.<l>.sasl.jaas.config`,
  `sasl.jaas.config`, then the `<l>.KafkaServer` and `KafkaServer` sections of the JAAS file
  `java.security.auth.login.config` names (Kafka reads that file from the JVM property of
  that name). A listener offering PLAIN without users refuses to start.
- SCRAM credentials are the users' entity configs (`/config/users/<user>`, key = mechanism
  name), read from the store's view at each authentication, so a credential altered on any
  broker applies to the next login everywhere. No JAAS entry is needed for SCRAM.
- the session lifetime: `listener.name.<l>.<mechanism>.connections.max.reauth.ms`, else
  `listener.name.<l>.connections.max.reauth.ms`, else `connections.max.reauth.ms`.
Every `*sasl.jaas.config` key given is parsed at start-up; a malformed one is a ConfigError.
(How this broker authenticates to others: `ads.broker.inter_broker_sasl`.)
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ads.broker.config import LISTENER_PREFIX, BrokerConfig, ConfigError
from ads.metadata.entity_config import entity_path
from ads.net.server import ConnectionInfo, Response
from ads.security.jaas import JaasError, LoginModule, parse_jaas_config, parse_jaas_file
from ads.security.sasl import (
    PLAIN,
    SUPPORTED_MECHANISMS,
    PlainServer,
    SaslAuthenticationError,
    SaslServer,
)
from ads.security.scram import MECHANISMS, ScramCredential, ScramServer

log = logging.getLogger("ads.broker.sasl")

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAAS_KEY = "sasl.jaas.config"
JAAS_FILE_KEY = "java.security.auth.login.config"


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    listener_name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    reauth_ms: Mapping[str, int]  # by mechanism


class SaslExchange:
    """A connection's SASL state (kept in `ConnectionInfo.sasl`).

    `server` is the mechanism exchange under way (after SaslHandshake, until it succeeds or
    fails); `mechanism` the one negotiated last; `reauth_supported` whether the client
    authenticated with SaslAuthenticate v1+, which KIP-368 re-authentication requires;
    `reauthenticating` whether the exchange under way renews an authenticated session."""

    __slots__ = ("mechanism", "server", "reauth_supported", "reauthenticating", "raw_tokens")

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.server: SaslServer | None = None
        self.reauth_supported = False
        self.reauthenticating = False
        # After SaslHandshake v0 the tokens come as bare size-prefixed frames, without
        # Kafka headers, and are answered the same way.
        self.raw_tokens = False


def _prefix(listener: str) -> str:
    return f"{LISTENER_PREFIX}{listener.lower()}."


def _given(config: BrokerConfig, *keys: str) -> str | None:
    """The first of `keys` that is set."""
    return next((k for k in keys if config.is_given(k)), None)


def _parse_jaas(config: BrokerConfig, key: str) -> list[LoginModule]:
    try:
        return parse_jaas_config(str(config.get(key)))
    except JaasError as exc:
        raise ConfigError(f"Invalid value for configuration {key}: {exc}", key=key) from exc


def _jaas_file(config: BrokerConfig) -> dict[str, list[LoginModule]]:
    path = config.get(JAAS_FILE_KEY)
    if not path:
        return {}
    try:
        text = Path(str(path)).read_text()
    except OSError as exc:
        raise ConfigError(f"Cannot read the JAAS file {path} ({JAAS_FILE_KEY}): "
                          f"{exc.strerror}", key=JAAS_FILE_KEY) from exc
    try:
        return parse_jaas_file(text)
    except JaasError as exc:
        raise ConfigError(f"Invalid JAAS file {path} ({JAAS_FILE_KEY}): {exc}",
                          key=JAAS_FILE_KEY) from exc


def _plain_users(config: BrokerConfig, listener: str,
                 jaas_file: dict[str, list[LoginModule]]) -> dict[str, str]:
    prefix = _prefix(listener)
    key = _given(config, f"{prefix}plain.{JAAS_KEY}", f"{prefix}{JAAS_KEY}", JAAS_KEY)
    if key is not None:
        source, modules = key, _parse_jaas(config, key)
    else:
        section = next((s for s in (f"{listener.lower()}.KafkaServer", "KafkaServer")
                        if s in jaas_file), None)
        if section is None:
            raise ConfigError(
                f"Listener {listener} offers SASL PLAIN but no JAAS configuration names its "
                f"users: set {prefix}plain.{JAAS_KEY}={PLAIN_LOGIN_MODULE} required "
                f'user_<name>="<password>" ...;', key=f"{prefix}plain.{JAAS_KEY}")
        source, modules = f"section {section} of the JAAS file", jaas_file[section]
    plain = [m for m in modules if m.class_name == PLAIN_LOGIN_MODULE]
    if not plain:
        raise ConfigError(f"{source} has no {PLAIN_LOGIN_MODULE} entry, which SASL PLAIN "
                          f"on listener {listener} needs", key=key)
    users = {name[5:]: value for m in plain for name, value in m.options.items()
             if name.startswith("user_") and len(name) > 5}
    if not users:
        raise ConfigError(f"{source} names no PLAIN users (user_<name>=\"<password>\")",
                          key=key)
    return users


def listener_settings(config: BrokerConfig, listener: str) -> ListenerSasl:
    prefix = _prefix(listener)
    key = _given(config, f"{prefix}sasl.enabled.mechanisms") or "sasl.enabled.mechanisms"
    mechanisms = tuple(m.strip().upper() for m in config.get_list(key) if m.strip())
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(
            f"Invalid value {','.join(mechanisms)} for configuration {key} (SASL listener "
            f"{listener}): ADS supports {', '.join(SUPPORTED_MECHANISMS)}"
            + (f", not {', '.join(unsupported)}" if unsupported else ""), key=key)
    users = _plain_users(config, listener, _jaas_file(config)) if PLAIN in mechanisms else {}
    reauth = {}
    for mechanism in mechanisms:
        reauth_key = _given(config, f"{prefix}{mechanism.lower()}.connections.max.reauth.ms",
                            f"{prefix}connections.max.reauth.ms") or "connections.max.reauth.ms"
        reauth[mechanism] = config.get_int(reauth_key)
    return ListenerSasl(listener, mechanisms, users, reauth)


def _check_same_principal(old: str, new: str) -> None:
    if new != old:
        raise SaslAuthenticationError("Cannot change principals during re-authentication from "
                                      f"{old.replace(':', '.')}: {new.replace(':', '.')}")


class Authenticator:
    """The broker's SASL settings and the factory of mechanism exchanges.

    `entity_configs` returns the metadata store's view of users' configs. Raises
    ConfigError for a SASL listener it cannot serve or a malformed JAAS value."""

    def __init__(self, config: BrokerConfig,
                 entity_configs: Callable[[], Mapping[str, Mapping[str, str]]]) -> None:
        for key, _ in config.items():
            if key.endswith(JAAS_KEY) and config.is_given(key):
                _parse_jaas(config, key)
        _jaas_file(config)
        self.listeners = {e.listener_name: listener_settings(config, e.listener_name)
                          for e in config.listener_endpoints
                          if e.security_protocol.startswith("SASL_")}
        self.failure_delay_s = config.get_int("connection.failed.authentication.delay.ms") / 1e3
        self._entity_configs = entity_configs
        # Keys the fake salts of unknown SCRAM users; see ads.security.scram.
        self._secret = secrets.token_bytes(32)

    def new_server(self, listener: ListenerSasl, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(listener.plain_users)
        scram = MECHANISMS[mechanism]
        return ScramServer(scram, lambda user: self.scram_credential(scram.name, user),
                           self._secret)

    def step(self, conn: ConnectionInfo, ex: SaslExchange, token: bytes,
             reauth_supported: bool) -> tuple[bytes, int]:
        """Feeds the client's token to the exchange under way; returns the answer token and,
        once the client is authenticated, its session lifetime in ms (0: unlimited, and
        while the exchange goes on). Raises SaslAuthenticationError, logged, when it fails:
        the exchange is over and the connection must be answered and closed."""
        server = ex.server
        assert server is not None and ex.mechanism is not None
        what = "re-authentication" if ex.reauthenticating else "authentication"
        try:
            answer = server.evaluate(token)
            principal = f"User:{server.username}"
            if server.complete and ex.reauthenticating:
                _check_same_principal(conn.principal, principal)
        except SaslAuthenticationError as exc:
            log.info("failed %s of %s (listener %s, %s): %s", what, conn.peer,
                     conn.listener_name, ex.mechanism, exc.reason)
            ex.server = None
            raise
        if not server.complete:
            return answer, 0
        lifetime_ms = self.listeners[conn.listener_name].reauth_ms.get(ex.mechanism, 0)
        ex.server = None
        ex.reauth_supported = reauth_supported
        conn.principal = principal
        conn.authenticated = True
        conn.session_deadline = time.perf_counter() + lifetime_ms / 1e3 if lifetime_ms else 0.0
        log.debug("%s: %s of %s as %s with %s", conn.listener_name, what, conn.peer,
                  principal, ex.mechanism)
        return answer, lifetime_ms

    def raw_token(self, frame: memoryview, conn: ConnectionInfo, ex: SaslExchange
                  ) -> Response | Awaitable[Response]:
        """A bare token after SaslHandshake v0: answered bare; a failure closes the
        connection without an answer, after the failure delay (as Kafka does for v0)."""
        try:
            answer, _ = self.step(conn, ex, bytes(frame), reauth_supported=False)
        except SaslAuthenticationError:
            conn.close_after_response = True
            return self._closing_after_delay()
        return [len(answer).to_bytes(4, "big"), answer]

    async def _closing_after_delay(self) -> Response:
        if self.failure_delay_s > 0:
            await asyncio.sleep(self.failure_delay_s)
        return []

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        text = self._entity_configs().get(entity_path(user=user), {}).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_config(text)
        except ValueError as exc:
            log.warning("the stored %s credential of user %r cannot be read: %s",
                        mechanism, user, exc)
            return None
