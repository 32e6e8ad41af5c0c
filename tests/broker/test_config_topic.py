import pytest

from ads.broker.config import (
    TOPIC_CONFIG_KEYS,
    BrokerConfig,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    describe_broker_configs,
    describe_topic_configs,
    effective_topic_config,
    validate_topic_configs,
)


def _by_name(entries: list[ConfigEntry]) -> dict[str, ConfigEntry]:
    return {e.name: e for e in entries}


def test_config_topic_keys_cover_the_brief() -> None:
    for key in ("cleanup.policy", "compression.type", "delete.retention.ms",
                "file.delete.delay.ms", "flush.messages", "flush.ms", "index.interval.bytes",
                "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.type",
                "message.timestamp.difference.max.ms", "message.timestamp.before.max.ms",
                "message.timestamp.after.max.ms", "min.cleanable.dirty.ratio",
                "min.compaction.lag.ms", "min.insync.replicas", "retention.bytes",
                "retention.ms", "segment.bytes", "segment.ms", "segment.index.bytes",
                "segment.jitter.ms", "unclean.leader.election.enable", "preallocate",
                "message.downconversion.enable", "local.retention.ms", "local.retention.bytes",
                "remote.storage.enable"):
        assert key in TOPIC_CONFIG_KEYS


def test_config_topic_validate_typed() -> None:
    out = validate_topic_configs({
        "retention.ms": "-1", "cleanup.policy": "compact,delete", "preallocate": "TRUE",
        "min.cleanable.dirty.ratio": "0.1", "segment.bytes": "1048576",
        "message.timestamp.type": "LogAppendTime", "remote.storage.enable": "false",
    })
    assert out == {"retention.ms": -1, "cleanup.policy": ["compact", "delete"],
                   "preallocate": True, "min.cleanable.dirty.ratio": 0.1,
                   "segment.bytes": 1048576, "message.timestamp.type": "LogAppendTime",
                   "remote.storage.enable": False}


def test_config_topic_unknown_key() -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_configs({"retention.ms": "1", "x": "1"})
    assert str(info.value) == "Unknown topic config name: x"
    assert info.value.error_name == "INVALID_CONFIG"
    with pytest.raises(ConfigError, match="Unknown topic config name: log.retention.ms"):
        validate_topic_configs({"log.retention.ms": "1"})


@pytest.mark.parametrize(("key", "value"), [
    ("retention.ms", "-2"),
    ("retention.ms", "forever"),
    ("segment.bytes", "13"),
    ("segment.ms", "0"),
    ("cleanup.policy", "archive"),
    ("compression.type", "lzma"),
    ("min.cleanable.dirty.ratio", "2"),
    ("min.insync.replicas", "0"),
    ("unclean.leader.election.enable", "1"),
    ("max.message.bytes", "-1"),
    ("local.retention.ms", "-3"),
])
def test_config_topic_invalid_value(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_configs({key: value})
    assert f"Invalid value {value} for configuration {key}" in str(info.value)
    assert info.value.error_name == "INVALID_CONFIG"


def test_config_topic_remote_storage_rejected() -> None:
    with pytest.raises(ConfigError, match="remote.storage.enable.*tiered storage"):
        validate_topic_configs({"remote.storage.enable": "true"})


def test_config_topic_null_values() -> None:
    with pytest.raises(ConfigError, match="Null value"):
        validate_topic_configs({"retention.ms": None})
    assert validate_topic_configs({"retention.ms": None}, allow_null=True) == {
        "retention.ms": None}


def test_config_topic_compaction_lag_conflict() -> None:
    with pytest.raises(ConfigError, match="min.compaction.lag.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "5"})
    validate_topic_configs({"min.compaction.lag.ms": "10"})
    with pytest.raises(ConfigError, match="max.compaction.lag.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "10"}, broker=broker)


def test_config_topic_effective_falls_back_to_broker_then_default() -> None:
    broker = BrokerConfig({"log.retention.minutes": "30", "message.max.bytes": "2000",
                           "log.roll.hours": "1", "log.cleanup.policy": "compact"})
    eff = effective_topic_config(broker, {"max.message.bytes": "500"})
    assert set(eff) == TOPIC_CONFIG_KEYS
    assert eff["retention.ms"] == 30 * 60_000
    assert eff["max.message.bytes"] == 500
    assert eff["segment.ms"] == 3_600_000
    assert eff["cleanup.policy"] == ["compact"]
    assert eff["remote.storage.enable"] is False
    assert eff["flush.ms"] == 2**63 - 1
    assert eff["segment.bytes"] == 1073741824
    eff["cleanup.policy"].append("delete")  # type: ignore[attr-defined]
    assert effective_topic_config(broker, {})["cleanup.policy"] == ["compact"]


def test_config_topic_effective_skips_unknown_stored_keys() -> None:
    eff = effective_topic_config(BrokerConfig({}), {"some.future.key": "1"})
    assert "some.future.key" not in eff


def test_config_topic_describe_sources_and_synonyms() -> None:
    broker = BrokerConfig({"log.retention.hours": "24", "log.segment.bytes": "1048576"})
    entries = describe_topic_configs(broker, {"cleanup.policy": "compact,delete",
                                              "segment.bytes": "2097152"})
    assert [e.name for e in entries] == sorted(TOPIC_CONFIG_KEYS)
    e = _by_name(entries)

    assert e["cleanup.policy"] == ConfigEntry(
        "cleanup.policy", "compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False,
        (ConfigSynonym("cleanup.policy", "compact,delete", 1),
         ConfigSynonym("log.cleanup.policy", "delete", 5)),
        ConfigType.LIST, e["cleanup.policy"].documentation)
    assert e["cleanup.policy"].documentation

    assert e["segment.bytes"].value == "2097152"
    assert e["segment.bytes"].source == 1
    assert [(s.name, s.value, s.source) for s in e["segment.bytes"].synonyms] == [
        ("segment.bytes", "2097152", 1), ("log.segment.bytes", "1048576", 4),
        ("log.segment.bytes", "1073741824", 5)]

    # As Kafka: the broker's synonyms start at the key backing the topic's
    # (log.retention.ms), so a static log.retention.hours alone is listed nowhere and the
    # source is the default, though the value is the file's 24 hours (Kafka's own quirk,
    # which its tools print: compared in tests/kafka_tools).
    assert e["retention.ms"].value == str(24 * 3_600_000)
    assert e["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert e["retention.ms"].synonyms == ()
    with_ms = _by_name(describe_topic_configs(
        BrokerConfig({"log.retention.ms": "60000", "log.retention.hours": "24"}), {}))
    assert [(s.name, s.value, s.source) for s in with_ms["retention.ms"].synonyms] == [
        ("log.retention.ms", "60000", 4), ("log.retention.hours", "24", 4),
        ("log.retention.hours", "168", 5)]
    assert e["retention.ms"].type == ConfigType.LONG == 5

    assert e["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert e["max.message.bytes"].value == "1048588"
    assert e["max.message.bytes"].type == 3
    assert e["min.cleanable.dirty.ratio"].value == "0.5"
    assert e["preallocate"].value == "false"
    assert e["remote.storage.enable"].synonyms == ()
    assert e["remote.storage.enable"].source == ConfigSource.DEFAULT_CONFIG
    assert all(not x.read_only and not x.sensitive for x in entries)


def test_config_topic_describe_renders_canonical_values() -> None:
    e = _by_name(describe_topic_configs(BrokerConfig({}), {"preallocate": " True ",
                                                           "retention.ms": "+100"}))
    assert e["preallocate"].value == "true"
    assert e["retention.ms"].value == "100"
    assert e["retention.ms"].synonyms[0] == ConfigSynonym("retention.ms", "100", 1)


def test_config_topic_describe_broker_entries() -> None:
    broker = BrokerConfig({"log.retention.ms": "1000", "num.partitions": "3",
                           "ssl.keystore.password": "pw", "custom.key": "v",
                           "broker.id": "4"})
    e = _by_name(describe_broker_configs(broker))
    assert e["num.partitions"].value == "3"
    assert e["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.source) for s in e["num.partitions"].synonyms] == [
        ("num.partitions", 4), ("num.partitions", 5)]
    assert e["num.partitions"].read_only

    assert e["log.retention.ms"].value == "1000"
    assert [(s.name, s.value, s.source) for s in e["log.retention.ms"].synonyms] == [
        ("log.retention.ms", "1000", 4), ("log.retention.hours", "168", 5)]
    # A lower-priority key reports only itself and what follows it.
    assert e["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG
    assert [s.name for s in e["log.retention.hours"].synonyms] == ["log.retention.hours"]
    assert e["log.retention.minutes"].value is None
    assert e["log.retention.minutes"].synonyms == ()

    assert e["ssl.keystore.password"].value is None
    assert e["ssl.keystore.password"].sensitive
    assert e["ssl.keystore.password"].type == ConfigType.PASSWORD == 9
    assert e["ssl.keystore.password"].synonyms[0].value is None

    assert e["custom.key"].value is None and e["custom.key"].sensitive
    assert e["custom.key"].type == ConfigType.UNKNOWN == 0
    assert e["custom.key"].source == ConfigSource.STATIC_BROKER_CONFIG

    assert e["node.id"].value == "4" and e["broker.id"].value == "4"
    assert e["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    assert e["log.cleanup.policy"].value == "delete"
    assert e["auto.create.topics.enable"].value == "true"
