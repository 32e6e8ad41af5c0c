"""Broker and topic configuration with Kafka's keys, precedence and DescribeConfigs view.

A broker's configuration comes from three places, later ones winning: a Java `.properties`
file (`server.properties`), command-line flags, then `--set key=value` items. Everything is
validated once, at load: a bad value stops the broker with a message naming the key, an
unknown key is kept and reported as a warning.

Some values have several keys (Kafka's synonyms): retention from `log.retention.ms`, else
`log.retention.minutes`, else `log.retention.hours`; roll time from `log.roll.ms`, else
`log.roll.hours`; the flush interval from `log.flush.interval.ms`, else
`log.flush.scheduler.interval.ms`; the node id from `node.id`, else `broker.id`; data
directories from `log.dirs`, else `log.dir`. `BrokerConfig.get` returns the resolved value for
the first key of each group.

A topic config falls back to the broker key that backs it (`retention.ms` to
`log.retention.ms`, ...), then to its own default. `describe_*` report each value with its
source and synonyms, ordered as Kafka orders them: the topic override, then broker keys set
in the file, then defaults.

Nothing here does I/O except `load_broker_config` reading its file.
"""

from __future__ import annotations

import enum
import re
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, TypeVar, overload

from ads.broker.configdefs import (
    BROKER_CONFIG_DEFS,
    BROKER_SYNONYMS,
    DYNAMIC_KEYS,
    SECURITY_PROTOCOLS,
    SYNONYM_GROUP,
    TOPIC_CONFIG_DEFS,
    TOPIC_CONFIG_KEYS,
    TOPIC_TO_BROKER,
    ConfigDef,
    ConfigError,
    ConfigType,
    render,
)
from ads.common import properties
from ads.security.sasl import SUPPORTED_MECHANISMS

SASL_MECHANISMS = (*SUPPORTED_MECHANISMS, "GSSAPI", "OAUTHBEARER")

__all__ = [
    "BrokerConfig", "ConfigEntry", "ConfigError", "ConfigSource", "ConfigSynonym", "ConfigType",
    "Endpoint", "TOPIC_CONFIG_KEYS", "describe_broker_configs", "describe_topic_configs",
    "effective_topic_config", "load_broker_config", "parse_properties",
    "validate_topic_configs",
]

LISTENER_PREFIX = "listener.name."


class ConfigSource(enum.IntEnum):
    """Where a value comes from; the numbers are DescribeConfigs' config source ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None  # None when unset, or when sensitive
    source: int
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    type: int
    documentation: str | None


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener_name: str
    security_protocol: str
    host: str  # as written; "" means every interface when binding
    port: int


# --- Java .properties -------------------------------------------------------------------------


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties` text as `ads.common.properties` reads it; a malformed entry raises
    ConfigError."""
    try:
        return properties.parse_properties(text)
    except properties.PropertiesError as exc:
        raise ConfigError(str(exc)) from exc


# --- broker configuration ------------------------------------------------------------------


T = TypeVar("T", int, bool, str)


def as_int(value: object, key: str = "setting") -> int:
    """`value` of an integer key (the config table types it); TypeError names the key."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{key} is not an integer setting: {value!r}")
    return value


def as_float(value: object, key: str = "setting") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key} is not a numeric setting: {value!r}")
    return float(value)


def as_str_list(value: object, key: str = "setting") -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise TypeError(f"{key} is not a list setting: {value!r}")
    return [str(v) for v in value]




class _Key(Generic[T]):
    """A typed read-only attribute of BrokerConfig backed by one key."""

    __slots__ = ("key", "convert")

    def __init__(self, key: str, convert: Callable[[object], T]) -> None:
        self.key = key
        self.convert: Callable[[object], T] = convert

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Key[T]: ...
    @overload
    def __get__(self, obj: BrokerConfig, owner: type | None = None) -> T: ...

    def __get__(self, obj: BrokerConfig | None, owner: type | None = None) -> T | _Key[T]:
        return self if obj is None else self.convert(obj.get(self.key))


def _definition(key: str) -> ConfigDef | None:
    """The definition governing `key`, including `listener.name.<name>.<key>` overrides and
    Kafka's per-mechanism ones, `listener.name.<name>.<mechanism>.<key>`
    (`listener.name.sasl_ssl.plain.sasl.jaas.config`)."""
    d = BROKER_CONFIG_DEFS.get(key)
    if d is None and key.startswith(LISTENER_PREFIX):
        base = key[len(LISTENER_PREFIX):].partition(".")[2]
        d = BROKER_CONFIG_DEFS.get(base)
        mechanism, _, rest = base.partition(".")
        if d is None and mechanism.upper() in SASL_MECHANISMS:
            d = BROKER_CONFIG_DEFS.get(rest)
    return d


class BrokerConfig:
    """Validated, immutable broker configuration.

    `given` holds the keys as supplied (file, flags, --set merged); every other defined key
    takes its default. Dynamic configs (KIP-226) lie over them: `dynamic_default`, the
    cluster's (`/config/brokers/<default>`), and over it `dynamic_broker`, this broker's
    own (`/config/brokers/<id>`); only `DYNAMIC_KEYS` are taken from them. Raises
    ConfigError on any invalid value or inconsistent combination.
    """

    __slots__ = ("_given", "_dynamic", "_values", "_endpoints", "_advertised",
                 "_topic_defaults")

    def __init__(self, given: Mapping[str, str] | None = None,
                 dynamic_default: Mapping[str, str] | None = None,
                 dynamic_broker: Mapping[str, str] | None = None) -> None:
        self._given: dict[str, str] = dict(given or {})
        # The dynamic layers, the higher one first, each with its source.
        self._dynamic: tuple[tuple[ConfigSource, dict[str, str]], ...] = tuple(
            (source, {k: v for k, v in (layer or {}).items() if k in DYNAMIC_KEYS})
            for source, layer in ((ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic_broker),
                                  (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_default)))
        layered = {**self._given}
        for _, layer in reversed(self._dynamic):
            layered.update(layer)
        self._values: dict[str, object] = {
            name: d.parse(layered[name]) if name in layered else d.default
            for name, d in BROKER_CONFIG_DEFS.items()}
        for key, raw in self._given.items():
            d = _definition(key)
            if d is not None and key not in BROKER_CONFIG_DEFS:
                self._values[key] = replace(d, name=key).parse(raw)
        self._check_combinations()
        self._endpoints = self._parse_listeners()
        self._advertised = self._parse_advertised()
        self._topic_defaults = self._derive_topic_defaults()

    # -- lookups ---------------------------------------------------------------------------
    def get(self, key: str) -> object:
        """Typed value of `key`, given or default. The first key of a synonym group (and
        `broker.id`, `log.dirs`) returns the value resolved over the whole group. An unknown
        key that was supplied returns its raw string; any other key raises KeyError."""
        if key in BROKER_SYNONYMS or key == "broker.id":
            return self._resolve(SYNONYM_GROUP[key])
        if key == "log.dirs":
            dirs = self._values["log.dirs"]
            return list(dirs) if isinstance(dirs, list) else [self._values["log.dir"]]
        if key in self._values:
            value = self._values[key]
            return list(value) if isinstance(value, list) else value
        return self._given[key]

    def get_int(self, key: str) -> int:
        """`get` for a key the config table types as INT or LONG."""
        return as_int(self.get(key), key)

    def get_float(self, key: str) -> float:
        return as_float(self.get(key), key)

    def get_bool(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, bool):
            raise TypeError(f"{key} is not a boolean setting: {value!r}")
        return value

    def get_list(self, key: str) -> list[str]:
        return as_str_list(self.get(key), key)

    def with_dynamic(self, dynamic_default: Mapping[str, str],
                     dynamic_broker: Mapping[str, str]) -> BrokerConfig:
        """This configuration with other dynamic layers (ConfigError if one is invalid)."""
        return BrokerConfig(self._given, dynamic_default, dynamic_broker)

    def dynamic(self, source: ConfigSource) -> dict[str, str]:
        """The keys of one dynamic layer as stored."""
        return next((dict(layer) for s, layer in self._dynamic if s is source), {})

    def source(self, key: str) -> ConfigSource:
        for layer_source, layer in self._dynamic:
            if key in layer:
                return layer_source
        if key in self._given:
            return ConfigSource.STATIC_BROKER_CONFIG
        if key in BROKER_CONFIG_DEFS:
            return ConfigSource.DEFAULT_CONFIG
        raise KeyError(key)

    def is_sensitive(self, key: str) -> bool:
        """PASSWORD keys are sensitive; so is any unknown key, since it may hold a secret."""
        d = _definition(key)
        return d is None or d.sensitive

    def items(self) -> Iterator[tuple[str, object]]:
        """(key, typed value) for every defined key and every supplied key, sorted; values
        are as given or defaulted, not resolved over synonyms."""
        for key in sorted(set(BROKER_CONFIG_DEFS) | set(self._given)):
            value = self._values.get(key, self._given.get(key))
            yield key, list(value) if isinstance(value, list) else value

    @property
    def unknown_keys(self) -> list[str]:
        return sorted(k for k in self._given if _definition(k) is None)

    def is_given(self, key: str) -> bool:
        return key in self._given

    def _resolve(self, primary: str) -> object:
        """The group's value from the highest layer that sets one of its keys (in group
        order within a layer), else from the first key with a default."""
        group = BROKER_SYNONYMS[primary]
        for layer in (*(layer for _, layer in self._dynamic), self._given):
            found = next(((n, f) for n, f in group if n in layer), None)
            if found is not None:
                return self._scaled(primary, self._values[found[0]], found[1])
        for name, factor in group:
            if self._values[name] is not None:
                return self._scaled(primary, self._values[name], factor)
        return None

    @staticmethod
    def _scaled(primary: str, value: object, factor: int) -> object:
        if value is None:
            return None
        assert isinstance(value, int)
        millis = value * factor
        # Kafka reads any negative retention as "keep forever".
        return -1 if primary == "log.retention.ms" and millis < 0 else millis

    # -- typed convenience -----------------------------------------------------------------
    @property
    def node_id(self) -> int:
        return as_int(self._resolve("node.id"))

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs")
        assert isinstance(dirs, list)
        return [Path(d) for d in dirs]

    @property
    def listener_endpoints(self) -> list[Endpoint]:
        """All `listeners` except KRaft controller listeners, which ADS does not serve."""
        return list(self._endpoints)

    @property
    def advertised_listener_endpoints(self) -> list[Endpoint]:
        return list(self._advertised)

    @property
    def listeners(self) -> list[tuple[str, int]]:
        """(host, port) to bind per listener; an empty host binds 0.0.0.0."""
        return [(e.host or "0.0.0.0", e.port) for e in self._endpoints]

    @property
    def advertised_listeners(self) -> list[tuple[str, int]]:
        return [(e.host, e.port) for e in self._advertised]

    @property
    def inter_broker_listener_name(self) -> str | None:
        name = self._values["inter.broker.listener.name"]
        if name:
            return str(name).upper()
        protocol = self._values["security.inter.broker.protocol"]
        return next((e.listener_name for e in self._endpoints
                     if e.security_protocol == protocol), None)

    @property
    def zookeeper_connect(self) -> str | None:
        value = self._values["zookeeper.connect"]
        return str(value) if value else None

    @property
    def offsets_retention_ms(self) -> int:
        return as_int(self.get("offsets.retention.minutes")) * 60_000

    @property
    def topic_defaults(self) -> dict[str, object]:
        """Typed value of every topic key for a topic without overrides."""
        return {k: list(v) if isinstance(v, list) else v for k, v in self._topic_defaults.items()}

    num_partitions = _Key("num.partitions", as_int)
    default_replication_factor = _Key("default.replication.factor", as_int)
    message_max_bytes = _Key("message.max.bytes", as_int)
    socket_request_max_bytes = _Key("socket.request.max.bytes", as_int)
    queued_max_requests = _Key("queued.max.requests", as_int)
    connections_max_idle_ms = _Key("connections.max.idle.ms", as_int)
    log_retention_ms = _Key("log.retention.ms", as_int)
    log_retention_bytes = _Key("log.retention.bytes", as_int)
    log_segment_bytes = _Key("log.segment.bytes", as_int)
    log_roll_ms = _Key("log.roll.ms", as_int)
    min_insync_replicas = _Key("min.insync.replicas", as_int)
    offsets_topic_num_partitions = _Key("offsets.topic.num.partitions", as_int)
    offsets_topic_replication_factor = _Key("offsets.topic.replication.factor", as_int)
    group_initial_rebalance_delay_ms = _Key("group.initial.rebalance.delay.ms", as_int)
    group_min_session_timeout_ms = _Key("group.min.session.timeout.ms", as_int)
    group_max_session_timeout_ms = _Key("group.max.session.timeout.ms", as_int)
    group_max_size = _Key("group.max.size", as_int)
    auto_create_topics_enable = _Key("auto.create.topics.enable", bool)
    delete_topic_enable = _Key("delete.topic.enable", bool)
    compression_type = _Key("compression.type", str)

    # -- validation ------------------------------------------------------------------------
    def _check_combinations(self) -> None:
        v, given = self._values, self._given
        if "node.id" in given and "broker.id" in given and v["node.id"] != v["broker.id"]:
            raise ConfigError(
                f"node.id ({v['node.id']}) and broker.id ({v['broker.id']}) must be equal "
                "when both are set", key="node.id")
        if as_int(v["group.min.session.timeout.ms"]) > as_int(v["group.max.session.timeout.ms"]):
            raise ConfigError("group.min.session.timeout.ms must not exceed "
                              "group.max.session.timeout.ms", key="group.min.session.timeout.ms")
        if v["remote.log.storage.system.enable"]:
            raise ConfigError("Invalid value true for configuration "
                              "remote.log.storage.system.enable: tiered storage is not "
                              "supported by ADS", key="remote.log.storage.system.enable")

    def _protocol_map(self) -> dict[str, str]:
        key = "listener.security.protocol.map"
        out: dict[str, str] = {}
        for pair in str(self._values[key]).split(","):
            name, sep, protocol = pair.strip().partition(":")
            protocol = protocol.strip().upper()
            if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(f"Invalid value {self._values[key]} for configuration {key}: "
                                  f"expected NAME:PROTOCOL pairs with PROTOCOL one of "
                                  f"{', '.join(SECURITY_PROTOCOLS)}", key=key)
            out[name.strip().upper()] = protocol
        return out

    def _endpoint_list(self, key: str, text: str) -> list[Endpoint]:
        protocols = self._protocol_map()
        controller = {n.strip().upper() for n in
                      str(self._values["controller.listener.names"] or "").split(",")}
        out: list[Endpoint] = []
        for item in (p.strip() for p in text.split(",")):
            if not item:
                continue
            name, sep, address = item.partition("://")
            host, colon, port_text = address.rpartition(":")
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            name = name.strip().upper()
            problem = None
            if not sep or not colon or not name or not re.fullmatch(r"[0-9A-Za-z\-%._:]*", host):
                problem = "expected NAME://host:port"
            elif not port_text.isdigit() or int(port_text) > 65535:
                problem = f"port {port_text} is not between 0 and 65535"
            elif name not in protocols:
                problem = f"no security protocol is mapped for listener {name}"
            elif any(e.listener_name == name for e in out):
                problem = f"listener name {name} is used twice"
            if problem is not None:
                raise ConfigError(f"Invalid value {text} for configuration {key}: {problem}",
                                  key=key)
            if name not in controller:
                out.append(Endpoint(name, protocols[name], host, int(port_text)))
        return out

    def _parse_listeners(self) -> list[Endpoint]:
        endpoints = self._endpoint_list("listeners", str(self._values["listeners"]))
        if not endpoints:
            raise ConfigError("Invalid value for configuration listeners: at least one "
                              "non-controller listener is required", key="listeners")
        return endpoints

    def _parse_advertised(self) -> list[Endpoint]:
        key = "advertised.listeners"
        raw = self._values[key]
        advertised = self._endpoint_list(key, str(raw)) if raw else self._endpoints
        names = {e.listener_name for e in self._endpoints}
        for e in advertised:
            problem = None
            if e.listener_name not in names:
                problem = f"listener {e.listener_name} is not in listeners"
            elif e.host in ("0.0.0.0", "::"):
                problem = (f"clients cannot connect to the meta-address {e.host}; "
                           f"set {key} to a routable address")
            if problem is not None:
                shown = raw or self._values["listeners"]
                raise ConfigError(f"Invalid value {shown} for configuration {key}: {problem}",
                                  key=key)
        # As Kafka: a listener without a host is advertised under the machine's name.
        return [e if e.host else Endpoint(e.listener_name, e.security_protocol,
                                          socket.gethostname(), e.port) for e in advertised]

    def _derive_topic_defaults(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for name, d in TOPIC_CONFIG_DEFS.items():
            broker_key = TOPIC_TO_BROKER.get(name)
            value = d.default if broker_key is None else self.get(broker_key)
            # Broker keys are looser than the topic keys they back (log.roll.ms=0 parses);
            # Kafka refuses such a broker config when it builds the topic defaults.
            if value is not None and d.validator is not None:
                problem = d.validator.check(value)
                if problem is not None:
                    raise ConfigError(f"Invalid value {render(d.type, value)} for configuration "
                                      f"{broker_key}: {problem} (as default of {name})",
                                      key=broker_key)
            out[name] = value
        return out

    # -- describe support ------------------------------------------------------------------
    def synonyms(self, names: tuple[str, ...]) -> list[ConfigSynonym]:
        """Kafka's synonym order: keys set dynamically for this broker, then for the
        cluster, then in the file (each layer in group order), then defaults."""
        out = [ConfigSynonym(n, None if self.is_sensitive(n) else _rendered(n, layer[n]),
                             source)
               for source, layer in self._dynamic for n in names if n in layer]
        out += [ConfigSynonym(n, None if self.is_sensitive(n) else
                              render(_type_of(n), _parsed(n, self._given[n])),
                              ConfigSource.STATIC_BROKER_CONFIG)
                for n in names if n in self._given]
        for n in names:
            d = BROKER_CONFIG_DEFS.get(n)
            if d is not None and d.default_text is not None:
                out.append(ConfigSynonym(n, None if d.sensitive else d.default_text,
                                         ConfigSource.DEFAULT_CONFIG))
        return out


def _parsed(key: str, raw: str) -> object:
    d = _definition(key)
    return raw if d is None else d.parse(raw)


def _rendered(key: str, raw: str) -> str | None:
    return render(_type_of(key), _parsed(key, raw))


def _type_of(key: str) -> ConfigType:
    d = _definition(key)
    return ConfigType.UNKNOWN if d is None else d.type


def _group_names(key: str) -> tuple[str, ...]:
    primary = SYNONYM_GROUP.get(key)
    return (key,) if primary is None else tuple(n for n, _ in BROKER_SYNONYMS[primary])


def load_broker_config(path: str | Path | None, flag_overrides: Mapping[str, str],
                       set_overrides: list[str]) -> tuple[BrokerConfig, list[str]]:
    """Builds the broker configuration from a properties file, then `flag_overrides`, then
    `--set key=value` items, each layer winning over the previous. Returns the config and one
    warning per unknown key. Raises ConfigError for an unreadable file, a malformed --set
    item or an invalid value."""
    merged: dict[str, str] = {}
    if path is not None:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"Cannot read configuration file {path}: {exc.strerror}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # what Java's Properties.load assumes
        merged.update(parse_properties(text))
    merged.update(flag_overrides)
    for item in set_overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        merged[key.strip()] = value
    config = BrokerConfig(merged)
    warnings = [f"Unknown configuration {k} is kept but not used by ADS"
                for k in config.unknown_keys]
    return config, warnings


def describe_broker_configs(broker: BrokerConfig) -> list[ConfigEntry]:
    """DescribeConfigs rows for the broker resource: every defined key plus every supplied
    key, sorted by name. All but `DYNAMIC_KEYS` are read-only."""
    out: list[ConfigEntry] = []
    for key, value in broker.items():
        d = _definition(key)
        sensitive = broker.is_sensitive(key)
        synonyms = broker.synonyms(_group_names(key))
        while synonyms and synonyms[0].name != key:
            # As Kafka: a lower-priority key is not a source of a higher one's own value.
            synonyms.pop(0)
        if key in ("node.id", "broker.id"):
            value = broker.node_id
        shown = None if sensitive else render(_type_of(key), value)
        out.append(ConfigEntry(
            key, shown, synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            key not in DYNAMIC_KEYS, sensitive, tuple(synonyms), int(_type_of(key)),
            None if d is None else d.doc))
    return out


def describe_dynamic_default(broker: BrokerConfig) -> list[ConfigEntry]:
    """DescribeConfigs rows for the cluster's default broker resource (name ""): the keys
    set there, as Kafka lists them."""
    out = []
    for key, raw in sorted(broker.dynamic(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG).items()):
        d = _definition(key)
        sensitive = broker.is_sensitive(key)
        shown = None if sensitive else _rendered(key, raw)
        synonym = ConfigSynonym(key, shown, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        out.append(ConfigEntry(key, shown, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False,
                               sensitive, (synonym,), int(_type_of(key)),
                               None if d is None else d.doc))
    return out


def check_dynamic_change(configs: Mapping[str, str]) -> None:
    """Raises ConfigError (INVALID_REQUEST, as Kafka answers) for a dynamic broker config
    that cannot be set: a key read at start only, or a value its key does not parse. Keys
    ADS does not know are kept, as Kafka keeps them."""
    fixed = sorted(k for k in configs if _definition(k) is not None and k not in DYNAMIC_KEYS)
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: [{', '.join(fixed)}]",
                          key=fixed[0], error_name="INVALID_REQUEST")
    for key, raw in configs.items():
        d = _definition(key)
        if d is not None:
            try:
                d.parse(raw)
            except ConfigError as exc:
                raise ConfigError(str(exc), key=key, error_name="INVALID_REQUEST") from exc


# --- topic configuration -------------------------------------------------------------------


def validate_topic_configs(configs: Mapping[str, str | None], *, allow_null: bool = False,
                           broker: BrokerConfig | None = None) -> dict[str, object]:
    """Typed values of topic config overrides. Raises ConfigError (INVALID_CONFIG) for an
    unknown key, an invalid value, a None value unless `allow_null` (alter-configs deletes),
    or a contradiction, checked against the broker's defaults when `broker` is given."""
    out: dict[str, object] = {}
    for name, raw in configs.items():
        d = TOPIC_CONFIG_DEFS.get(name)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {name}", key=name)
        if raw is None:
            if not allow_null:
                raise ConfigError(f"Null value not supported for topic configs: {name}",
                                  key=name)
            out[name] = None
            continue
        out[name] = d.parse(raw)
    if out.get("remote.storage.enable"):
        raise ConfigError("Invalid value true for configuration remote.storage.enable: "
                          "tiered storage is not supported by ADS", key="remote.storage.enable")
    merged = broker.topic_defaults if broker is not None else {}
    merged.update((k, v) for k, v in out.items() if v is not None)
    low, high = merged.get("min.compaction.lag.ms"), merged.get("max.compaction.lag.ms")
    if low is not None and high is not None and as_int(low) > as_int(high):
        raise ConfigError(f"Conflicting topic configs: min.compaction.lag.ms ({low}) is "
                          f"greater than max.compaction.lag.ms ({high})",
                          key="min.compaction.lag.ms")
    return out


def _known_overrides(overrides: Mapping[str, str]) -> dict[str, object]:
    # Stored overrides were validated when written; a key this version does not know (from a
    # newer broker, say) is skipped rather than refusing to open the topic.
    return validate_topic_configs({k: v for k, v in overrides.items() if k in TOPIC_CONFIG_KEYS})


def effective_topic_config(broker: BrokerConfig, overrides: Mapping[str, str]
                           ) -> dict[str, object]:
    """Typed value of every topic key: the override, else the broker key backing it
    (resolved over its synonyms), else the topic default."""
    return {**broker.topic_defaults, **_known_overrides(overrides)}


def describe_topic_configs(broker: BrokerConfig, overrides: Mapping[str, str]
                           ) -> list[ConfigEntry]:
    """DescribeConfigs rows for a topic resource, one per topic key, sorted by name."""
    given = _known_overrides(overrides)
    effective = effective_topic_config(broker, overrides)
    out: list[ConfigEntry] = []
    for name in sorted(TOPIC_CONFIG_DEFS):
        d = TOPIC_CONFIG_DEFS[name]
        synonyms: list[ConfigSynonym] = []
        if name in given:
            shown = None if d.sensitive else render(d.type, given[name])
            synonyms.append(ConfigSynonym(name, shown, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_key = TOPIC_TO_BROKER.get(name)
        if broker_key is not None:
            backing = broker.synonyms(_group_names(broker_key))
            # As Kafka: the broker's synonyms start at the key backing the topic's (a
            # static log.retention.hours alone is not listed for retention.ms).
            while backing and backing[0].name != broker_key:
                backing.pop(0)
            synonyms.extend(backing)
        out.append(ConfigEntry(
            name, None if d.sensitive else render(d.type, effective[name]),
            synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            False, d.sensitive, tuple(synonyms), int(d.type), d.doc))
    return out
