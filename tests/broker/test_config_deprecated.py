"""Deprecated topic keys Kafka 3.x accepts and ignores (message.format.version,
message.downconversion.enable): accepted at creation and by AlterConfigs, stored, described
with their source, without effect, and logged once per topic."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic

from ads.broker.config import ConfigError, validate_topic_configs
from ads.testing import EmbeddedBroker
from conftest import create_topic


def describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(10)  # type: ignore[no-any-return]


def test_config_deprecated_topic_keys_confluent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="ads.broker")
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        create_topic(bs, "old", **{"message.format.version": "2.8",
                                   "message.downconversion.enable": "false"})
        entries = describe(admin, "old")
        assert entries["message.format.version"].value == "2.8"
        assert entries["message.format.version"].source == \
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert entries["message.downconversion.enable"].value == "false"
        # Another topic shows the default, from the broker key that backs it.
        create_topic(bs, "fresh")
        fresh = describe(admin, "fresh")["message.format.version"]
        assert fresh.value == "3.0-IV1"
        assert fresh.source == ConfigSource.DEFAULT_CONFIG.value
        resource = ConfigResource(ConfigResource.Type.TOPIC, "fresh", incremental_configs=[
            ConfigEntry("message.format.version", "0.10.2",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(10)
        assert describe(admin, "fresh")["message.format.version"].value == "0.10.2"
        # An invalid version is refused as Kafka refuses it.
        futures = admin.create_topics([NewTopic("bad", 1, 1, config={
            "message.format.version": "banana"})], operation_timeout=10)
        with pytest.raises(Exception, match="banana"):  # noqa: PT011 - KafkaException
            futures["bad"].result(10)
        admin.incremental_alter_configs([resource])[resource].result(10)  # again: no new line
    warned = [r.getMessage() for r in caplog.records if "is deprecated" in r.getMessage()]
    assert sorted(w.split(" with ")[0] for w in warned) == [
        "Topic configuration message.downconversion.enable",
        "Topic configuration message.format.version",
        "Topic configuration message.format.version",
    ]
    assert sum("`fresh`" in w for w in warned) == 1


def test_config_deprecated_topic_keys_kafka_python() -> None:
    with EmbeddedBroker() as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            admin.create_topics([KNewTopic("old", 1, 1, topic_configs={
                "message.format.version": "0.10.2-IV0"})])
            assert "old" in admin.list_topics()
        finally:
            admin.close()


def test_config_deprecated_topic_key_validation() -> None:
    assert validate_topic_configs({"message.format.version": "3.0.1"}) == {
        "message.format.version": "3.0.1"}
    with pytest.raises(ConfigError, match="is not a valid version"):
        validate_topic_configs({"message.format.version": "0.10"})
