"""Group configs (KIP-848, KIP-932): settings one group overrides over the broker's.

A group's configs are kept as an entity config (`/config/groups/<group>` in ZooKeeper,
`ads.metadata.entity_config`), set with IncrementalAlterConfigs or AlterConfigs on a
resource of type GROUP and described with DescribeConfigs, as Kafka 4.x serves them. Each
key is backed by a broker key (its default) and kept between two broker keys that bound
it (`group.share.min.record.lock.duration.ms` ...), with Kafka's messages for a value out
of range. ADS serves the keys it acts on; the others Kafka knows (streams groups,
assignment intervals, dead-letter queues, renew acknowledgements) are refused as unknown.

`settings_of(broker_config, overrides)` gives the typed values a group runs with;
`own_settings` looks a group's up in the metadata store's view, for the group coordinator
(session timeouts, heartbeat intervals) and the share-partitions (locks, delivery limit,
where a partition starts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ads.broker.config import (
    BrokerConfig,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
)
from ads.broker.configdefs import ConfigType, OneOf, Range, invalid, parse_typed, render
from ads.metadata.entity_config import group_entity_path

SHARE_AUTO_OFFSET_RESET = ("earliest", "latest")
SHARE_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
GROUP_CONFIG_SOURCE = 8  # DescribeConfigs' GROUP_CONFIG


@dataclass(frozen=True, slots=True)
class GroupKey:
    name: str
    type: ConfigType
    # The broker key giving its default; None: `default` is the default.
    broker_key: str | None
    check: Range | OneOf
    bounds: tuple[str, str] | None  # broker keys of the smallest and largest value
    doc: str
    default: str = ""


GROUP_KEYS: dict[str, GroupKey] = {k.name: k for k in (
    GroupKey("consumer.heartbeat.interval.ms", ConfigType.INT,
             "group.consumer.heartbeat.interval.ms", Range(1),
             ("group.consumer.min.heartbeat.interval.ms",
              "group.consumer.max.heartbeat.interval.ms"),
             "Heartbeat interval given to the members of this consumer-protocol group."),
    GroupKey("consumer.session.timeout.ms", ConfigType.INT,
             "group.consumer.session.timeout.ms", Range(1),
             ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
             "Session timeout of the members of this consumer-protocol group."),
    GroupKey("share.auto.offset.reset", ConfigType.STRING, "group.share.auto.offset.reset",
             OneOf(SHARE_AUTO_OFFSET_RESET), None,
             "Where the share group starts on a partition it has no state for."),
    GroupKey("share.delivery.count.limit", ConfigType.INT, "group.share.delivery.count.limit",
             Range(2), ("group.share.min.delivery.count.limit",
                        "group.share.max.delivery.count.limit"),
             "Deliveries of a record to this share group before it is archived."),
    GroupKey("share.heartbeat.interval.ms", ConfigType.INT,
             "group.share.heartbeat.interval.ms", Range(1),
             ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
             "Heartbeat interval given to the members of this share group."),
    GroupKey("share.isolation.level", ConfigType.STRING, None, OneOf(SHARE_ISOLATION_LEVELS),
             None, "read_committed: the share group is given only committed transactional "
             "records.", "read_uncommitted"),
    GroupKey("share.partition.max.record.locks", ConfigType.INT,
             "group.share.partition.max.record.locks", Range(100),
             ("group.share.min.partition.max.record.locks",
              "group.share.max.partition.max.record.locks"),
             "Records of one partition this share group may have in flight."),
    GroupKey("share.record.lock.duration.ms", ConfigType.INT,
             "group.share.record.lock.duration.ms", Range(1000),
             ("group.share.min.record.lock.duration.ms",
              "group.share.max.record.lock.duration.ms"),
             "How long a member of this share group holds the records it acquired."),
    GroupKey("share.session.timeout.ms", ConfigType.INT, "group.share.session.timeout.ms",
             Range(1), ("group.share.min.session.timeout.ms",
                        "group.share.max.session.timeout.ms"),
             "Session timeout of the members of this share group."),
)}
# A session must outlast the heartbeats that keep it.
_SESSION_OVER_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What one group runs with: its overrides over the broker's defaults."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_delivery_count_limit: int
    share_partition_max_record_locks: int
    share_auto_offset_reset: str
    share_isolation_level: str


def _default(broker: BrokerConfig, key: GroupKey) -> object:
    if key.broker_key is None:
        return parse_typed(key.name, key.type, key.default)
    return broker.get(key.broker_key)


def _parse(key: GroupKey, raw: str) -> object:
    value = parse_typed(key.name, key.type, raw)
    problem = key.check.check(value)
    if problem is not None:
        raise invalid(key.name, raw, problem)
    return value


def validate(broker: BrokerConfig, configs: Mapping[str, str]) -> dict[str, object]:
    """Typed values of a group's overrides; raises ConfigError (INVALID_CONFIG) with
    Kafka's message for an unknown key, a value that does not parse or is out of the
    broker's bounds, or a session timeout not above its heartbeat interval."""
    out: dict[str, object] = {}
    for name, raw in configs.items():
        key = GROUP_KEYS.get(name)
        if key is None:
            raise ConfigError(f"Unknown group config name: {name}", key=name)
        value = _parse(key, raw)
        if key.bounds is not None:
            low, high = (broker.get_int(b) for b in key.bounds)
            assert isinstance(value, int)
            if not low <= value <= high:
                raise ConfigError(f"{name} must be in the range {low} to {high} inclusive.",
                                  key=name)
        out[name] = value
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if session in out or heartbeat in out:
            s = out.get(session, _default(broker, GROUP_KEYS[session]))
            h = out.get(heartbeat, _default(broker, GROUP_KEYS[heartbeat]))
            assert isinstance(s, int) and isinstance(h, int)
            if s <= h:
                raise ConfigError(f"{session} must be greater than {heartbeat}", key=session)
    return out


def _known(overrides: Mapping[str, str]) -> dict[str, object]:
    # Stored overrides were checked when written; one this version does not know, or no
    # longer accepts, is skipped rather than stopping the group.
    out: dict[str, object] = {}
    for name, raw in overrides.items():
        key = GROUP_KEYS.get(name)
        if key is not None:
            try:
                out[name] = _parse(key, raw)
            except ConfigError:
                continue
    return out


def settings_of(broker: BrokerConfig, overrides: Mapping[str, str]) -> GroupSettings:
    values = {name: _default(broker, key) for name, key in GROUP_KEYS.items()}
    values.update(_known(overrides))

    def get(name: str) -> int:
        value = values[name]
        assert isinstance(value, int)
        return value

    return GroupSettings(
        get("consumer.session.timeout.ms"), get("consumer.heartbeat.interval.ms"),
        get("share.session.timeout.ms"), get("share.heartbeat.interval.ms"),
        get("share.record.lock.duration.ms"), get("share.delivery.count.limit"),
        get("share.partition.max.record.locks"), str(values["share.auto.offset.reset"]),
        str(values["share.isolation.level"]))


def describe(broker: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs rows of a group, one per key, sorted by name, as Kafka gives them:
    an override has source GROUP_CONFIG, any other value DEFAULT_CONFIG, with the
    backing broker key among the synonyms."""
    given = _known(overrides)
    out: list[ConfigEntry] = []
    for name in sorted(GROUP_KEYS):
        key = GROUP_KEYS[name]
        synonyms: list[ConfigSynonym] = []
        if key.broker_key is None:
            synonyms.append(ConfigSynonym(name, key.default, ConfigSource.DEFAULT_CONFIG))
        else:
            if name in given:
                synonyms.append(ConfigSynonym(name, render(key.type, given[name]),
                                              GROUP_CONFIG_SOURCE))
            backing = broker.synonyms((key.broker_key,))
            synonyms.extend(backing)
        value = given.get(name, _default(broker, key))
        source = GROUP_CONFIG_SOURCE if name in given else ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(name, render(key.type, value), source, False, False,
                               tuple(synonyms), int(key.type), key.doc))
    return out


def own_settings(broker: BrokerConfig,
                 entity_configs: Callable[[], Mapping[str, Mapping[str, str]]]
                 ) -> Callable[[str], GroupSettings | None]:
    """A group's settings when it has configs of its own, else None (it runs on the
    broker's): a dict look-up for most groups; a group's configs are parsed again only when
    they change (the store's view holds a new mapping then), not at every heartbeat or
    fetch."""
    parsed: dict[str, tuple[Mapping[str, str], GroupSettings]] = {}

    def of(group_id: str) -> GroupSettings | None:
        overrides = entity_configs().get(group_entity_path(group_id))
        if not overrides:
            parsed.pop(group_id, None)
            return None
        known = parsed.get(group_id)
        if known is None or known[0] is not overrides:
            known = parsed[group_id] = (overrides, settings_of(broker, overrides))
        return known[1]
    return of
