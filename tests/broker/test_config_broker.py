import socket
from pathlib import Path

import pytest

from ads.broker.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    Endpoint,
    load_broker_config,
)
from ads.broker.configdefs import BROKER_CONFIG_DEFS, TOPIC_CONFIG_DEFS, java_double


def test_config_broker_defaults() -> None:
    cfg = BrokerConfig({})
    assert cfg.node_id == 0
    assert cfg.listeners == [("127.0.0.1", 9092)]
    assert cfg.advertised_listeners == [("127.0.0.1", 9092)]
    assert cfg.num_partitions == 1
    assert cfg.default_replication_factor == 1
    assert cfg.message_max_bytes == 1048588
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.auto_create_topics_enable is True
    assert cfg.delete_topic_enable is True
    assert cfg.compression_type == "producer"
    assert cfg.log_retention_ms == 168 * 3_600_000
    assert cfg.log_segment_bytes == 1073741824
    assert cfg.offsets_topic_num_partitions == 50
    assert cfg.offsets_topic_replication_factor == 3
    assert cfg.offsets_retention_ms == 10080 * 60_000
    assert cfg.group_max_size == 2**31 - 1
    assert cfg.get("log.flush.interval.ms") == 2**63 - 1
    assert cfg.get("log.cleaner.min.cleanable.ratio") == 0.5
    assert cfg.get("log.cleanup.policy") == ["delete"]
    assert cfg.zookeeper_connect is None
    assert cfg.source("num.partitions") == ConfigSource.DEFAULT_CONFIG == 5
    assert cfg.unknown_keys == []


def test_config_broker_precedence_file_flags_set(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlog.dirs=/from/file\nnode.id=7\nmessage.max.bytes=100\n")
    cfg, warnings = load_broker_config(
        path, {"num.partitions": "3", "log.dirs": "/from/flag"}, ["num.partitions=4"])
    assert warnings == []
    assert cfg.num_partitions == 4
    assert cfg.log_dirs == [Path("/from/flag")]
    assert cfg.node_id == 7
    assert cfg.message_max_bytes == 100
    assert cfg.source("num.partitions") == ConfigSource.STATIC_BROKER_CONFIG == 4


def test_config_broker_set_value_may_contain_equals() -> None:
    cfg, _ = load_broker_config(None, {}, ["zookeeper.connect=a:1/x=y"])
    assert cfg.zookeeper_connect == "a:1/x=y"


@pytest.mark.parametrize("item", ["num.partitions", "=3", "  =3"])
def test_config_broker_set_without_equals_rejected(item: str) -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_broker_config(None, {}, [item])


def test_config_broker_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot read configuration file"):
        load_broker_config(tmp_path / "nope.properties", {}, [])


def test_config_broker_latin1_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes("broker.rack=z\xf6ne\n".encode("latin-1"))
    cfg, _ = load_broker_config(path, {}, [])
    assert cfg.get("broker.rack") == "z\xf6ne"


def test_config_broker_unknown_key_warns_and_is_kept() -> None:
    cfg, warnings = load_broker_config(None, {}, ["my.custom.thing=42", "num.partitions=2"])
    assert len(warnings) == 1 and "my.custom.thing" in warnings[0]
    assert cfg.get("my.custom.thing") == "42"
    assert cfg.is_sensitive("my.custom.thing")
    assert cfg.source("my.custom.thing") == ConfigSource.STATIC_BROKER_CONFIG
    with pytest.raises(KeyError):
        cfg.get("never.given")


def test_config_broker_listener_prefixed_key_validated_without_warning() -> None:
    cfg, warnings = load_broker_config(
        None, {}, ["listener.name.plaintext.ssl.keystore.password=secret"])
    assert warnings == []
    assert cfg.is_sensitive("listener.name.plaintext.ssl.keystore.password")
    with pytest.raises(ConfigError, match="listener.name.plaintext.ssl.client.auth"):
        BrokerConfig({"listener.name.plaintext.ssl.client.auth": "maybe"})


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("log.segment.bytes", "abc", "Not a number of type INT"),
    ("log.segment.bytes", "2147483648", "Not a number of type INT"),
    ("log.segment.bytes", "1.5", "Not a number of type INT"),
    ("log.segment.bytes", "10", "at least 14"),
    ("offsets.topic.replication.factor", "40000", "Not a number of type SHORT"),
    ("log.retention.ms", "9223372036854775808", "Not a number of type LONG"),
    ("log.retention.ms", "", "Not a number of type LONG"),
    ("log.cleaner.min.cleanable.ratio", "half", "Not a number of type DOUBLE"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "no more than 1"),
    ("auto.create.topics.enable", "yes", "either true or false"),
    ("compression.type", "brotli", "String must be one of"),
    ("log.message.timestamp.type", "createtime", "String must be one of"),
    ("log.cleanup.policy", "delete,shred", "shred"),
    ("log.cleanup.policy", "delete,delete", "repeat"),
    ("log.dirs", " ", "empty"),
    ("num.partitions", "0", "at least 1"),
    ("compression.gzip.level", "0", "between 1 and 9 or -1"),
    ("compression.zstd.level", "23", "no more than 22"),
    ("ssl.client.auth", "sometimes", "String must be one of"),
])
def test_config_broker_invalid_value_names_key(key: str, value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_broker_config(None, {}, [f"{key}={value}"])
    message = str(info.value)
    assert key in message and problem in message
    assert message.startswith(f"Invalid value {value} for configuration {key}")
    assert info.value.key == key


def test_config_broker_invalid_message_format_matches_kafka() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"log.segment.bytes": "abc"})
    assert str(info.value) == ("Invalid value abc for configuration log.segment.bytes: "
                               "Not a number of type INT")


def test_config_broker_values_are_trimmed_and_case_insensitive_booleans() -> None:
    cfg = BrokerConfig({"num.partitions": " 6 ", "delete.topic.enable": "FALSE",
                        "log.cleanup.policy": " compact , delete "})
    assert cfg.num_partitions == 6
    assert cfg.delete_topic_enable is False
    assert cfg.get("log.cleanup.policy") == ["compact", "delete"]


@pytest.mark.parametrize(("given", "expected"), [
    ({}, 168 * 3_600_000),
    ({"log.retention.hours": "24"}, 24 * 3_600_000),
    ({"log.retention.minutes": "30", "log.retention.hours": "24"}, 30 * 60_000),
    ({"log.retention.ms": "1234", "log.retention.minutes": "30", "log.retention.hours": "24"},
     1234),
    ({"log.retention.ms": "-1"}, -1),
    ({"log.retention.ms": "-5"}, -1),
    ({"log.retention.hours": "-1"}, -1),
])
def test_config_broker_retention_synonyms(given: dict[str, str], expected: int) -> None:
    cfg = BrokerConfig(given)
    assert cfg.get("log.retention.ms") == expected
    assert cfg.log_retention_ms == expected


def test_config_broker_secondary_synonym_reads_its_own_value() -> None:
    cfg = BrokerConfig({"log.retention.ms": "1000"})
    assert cfg.get("log.retention.hours") == 168
    assert cfg.get("log.retention.minutes") is None


def test_config_broker_roll_and_flush_synonyms() -> None:
    cfg = BrokerConfig({"log.roll.hours": "2", "log.flush.scheduler.interval.ms": "500",
                        "log.roll.jitter.hours": "1"})
    assert cfg.log_roll_ms == 2 * 3_600_000
    assert cfg.get("log.flush.interval.ms") == 500
    assert cfg.get("log.roll.jitter.ms") == 3_600_000
    cfg = BrokerConfig({"log.roll.ms": "10", "log.roll.hours": "2", "log.flush.interval.ms": "7"})
    assert cfg.log_roll_ms == 10
    assert cfg.get("log.flush.interval.ms") == 7


def test_config_broker_rejects_broker_value_invalid_as_topic_default() -> None:
    with pytest.raises(ConfigError, match="log.roll.ms"):
        BrokerConfig({"log.roll.ms": "0"})


def test_config_broker_node_id_and_broker_id() -> None:
    assert BrokerConfig({"broker.id": "5"}).node_id == 5
    assert BrokerConfig({"node.id": "3"}).get("broker.id") == 3
    assert BrokerConfig({"node.id": "3", "broker.id": "3"}).node_id == 3
    with pytest.raises(ConfigError, match="node.id"):
        BrokerConfig({"node.id": "3", "broker.id": "4"})
    with pytest.raises(ConfigError, match="node.id"):
        BrokerConfig({"node.id": "-1"})


def test_config_broker_log_dirs() -> None:
    assert BrokerConfig({"log.dir": "/one"}).log_dirs == [Path("/one")]
    cfg = BrokerConfig({"log.dir": "/one", "log.dirs": "/a, /b"})
    assert cfg.log_dirs == [Path("/a"), Path("/b")]
    assert cfg.get("log.dirs") == ["/a", "/b"]
    with pytest.raises(ConfigError, match="log.dirs"):
        BrokerConfig({"log.dirs": "/a,/a"})


def test_config_broker_listeners_parsing() -> None:
    cfg = BrokerConfig({
        "listeners": "PLAINTEXT://:9092,ssl://[::1]:9093,INTERNAL://10.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SASL_SSL",
        "advertised.listeners": "PLAINTEXT://broker.example:19092",
    })
    assert cfg.listeners == [("0.0.0.0", 9092), ("::1", 9093), ("10.0.0.1", 0)]
    assert cfg.listener_endpoints[1] == Endpoint("SSL", "SSL", "::1", 9093)
    assert cfg.listener_endpoints[2].security_protocol == "SASL_SSL"
    assert cfg.advertised_listeners == [("broker.example", 19092)]
    assert cfg.inter_broker_listener_name == "PLAINTEXT"


def test_config_broker_advertised_defaults_to_listeners() -> None:
    cfg = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.2:9000"})
    assert cfg.advertised_listeners == [("127.0.0.2", 9000)]
    cfg = BrokerConfig({"listeners": "PLAINTEXT://:9000"})
    assert cfg.listeners == [("0.0.0.0", 9000)]
    assert cfg.advertised_listeners == [(socket.gethostname(), 9000)]


def test_config_broker_kraft_controller_listener_is_skipped() -> None:
    cfg = BrokerConfig({
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://localhost:9092",
    })
    assert cfg.listeners == [("0.0.0.0", 9092)]
    assert cfg.advertised_listeners == [("localhost", 9092)]


@pytest.mark.parametrize(("given", "key"), [
    ({"listeners": "PLAINTEXT//x:1"}, "listeners"),
    ({"listeners": "PLAINTEXT://x"}, "listeners"),
    ({"listeners": "PLAINTEXT://x:99999"}, "listeners"),
    ({"listeners": "PLAINTEXT://x:port"}, "listeners"),
    ({"listeners": "CLIENT://x:1"}, "listeners"),
    ({"listeners": "PLAINTEXT://x:1,PLAINTEXT://y:2"}, "listeners"),
    ({"listeners": ""}, "listeners"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"advertised.listeners": "SSL://h:1"}, "advertised.listeners"),
    ({"listener.security.protocol.map": "PLAINTEXT:TELNET"}, "listener.security.protocol.map"),
])
def test_config_broker_listeners_invalid(given: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(given)
    assert key in str(info.value)
    assert info.value.key == key


def test_config_broker_rejects_tiered_storage_and_session_bounds() -> None:
    with pytest.raises(ConfigError, match="remote.log.storage.system.enable"):
        BrokerConfig({"remote.log.storage.system.enable": "true"})
    with pytest.raises(ConfigError, match="group.min.session.timeout.ms"):
        BrokerConfig({"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"})


def test_config_broker_items_and_sensitivity() -> None:
    cfg = BrokerConfig({"ssl.keystore.password": "pw", "extra.key": "v"})
    items = dict(cfg.items())
    assert set(BROKER_CONFIG_DEFS) <= set(items)
    assert items["extra.key"] == "v"
    assert items["log.retention.ms"] is None
    assert cfg.is_sensitive("ssl.keystore.password")
    assert not cfg.is_sensitive("num.partitions")


def test_config_broker_definition_table_is_consistent() -> None:
    for table in (BROKER_CONFIG_DEFS, TOPIC_CONFIG_DEFS):
        for name, d in table.items():
            assert d.name == name and d.doc and len(d.doc) < 120
            if d.default is not None:
                assert d.parse(d.default_text or "") == d.default


def test_config_broker_java_double_rendering() -> None:
    assert java_double(0.5) == "0.5"
    assert java_double(1.0) == "1.0"
    assert java_double(1e7) == "1.0E7"
    assert java_double(1.7976931348623157e308) == "1.7976931348623157E308"
    assert java_double(1.5e-4) == "1.5E-4"
