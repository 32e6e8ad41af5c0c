"""CreateTopics refusals, a new topic's DescribeConfigs and a group's configs (KIP-848,
KIP-932: described, altered, refused), Apache Kafka against ADS.

Each test runs one client program (confluent-kafka's AdminClient) against a Kafka broker
(tests/kafka_reference.py) and an ADS broker and asserts both answer what Kafka answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from ads.testing import EmbeddedBroker
from kafka_reference import KafkaReference

pytestmark = pytest.mark.kafka_reference


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _create_error(admin: AdminClient, topic: NewTopic, validate_only: bool = False) -> str:
    """The error name CreateTopics answers for `topic` ("NO_ERROR" when it is created)."""
    future = admin.create_topics([topic], operation_timeout=10,
                                 validate_only=validate_only)[topic.topic]
    try:
        future.result(timeout=15)
    except KafkaException as exc:
        return str(exc.args[0].name())
    return "NO_ERROR"


# (what is refused, the topic, the error Kafka answers)
CREATE_CASES = [
    ("illegal character", NewTopic("bad name!", 1, 1), "TOPIC_EXCEPTION"),
    ("dot", NewTopic(".", 1, 1), "TOPIC_EXCEPTION"),
    ("dot dot", NewTopic("..", 1, 1), "TOPIC_EXCEPTION"),
    ("250 characters", NewTopic("t" * 250, 1, 1), "TOPIC_EXCEPTION"),
    ("zero partitions", NewTopic("zero-partitions", 0, 1), "INVALID_PARTITIONS"),
    ("more replicas than brokers", NewTopic("three-replicas", 1, 3),
     "INVALID_REPLICATION_FACTOR"),
    ("unknown config", NewTopic("unknown-config", 1, 1, config={"no.such.key": "1"}),
     "INVALID_CONFIG"),
    ("bad cleanup.policy", NewTopic("bad-policy", 1, 1, config={"cleanup.policy": "bogus"}),
     "INVALID_CONFIG"),
    ("non-numeric retention.ms",
     NewTopic("bad-retention", 1, 1, config={"retention.ms": "soon"}), "INVALID_CONFIG"),
    ("min.insync.replicas 0",
     NewTopic("bad-min-isr", 1, 1, config={"min.insync.replicas": "0"}), "INVALID_CONFIG"),
    ("already exists", NewTopic("existing.topic", 1, 1), "TOPIC_ALREADY_EXISTS"),
    ("collides with existing.topic", NewTopic("existing_topic", 1, 1), "TOPIC_EXCEPTION"),
    ("valid", NewTopic("valid-topic", 2, 1), "NO_ERROR"),
]


def _create_answers(bootstrap: str) -> dict[str, str]:
    admin = _admin(bootstrap)
    assert _create_error(admin, NewTopic("existing.topic", 1, 1)) == "NO_ERROR"
    return {what: _create_error(admin, topic) for what, topic, _ in CREATE_CASES}


def test_create_topics_refusals_match_kafka(kafka: KafkaReference,
                                            ads: EmbeddedBroker) -> None:
    expected = {what: error for what, _, error in CREATE_CASES}
    assert _create_answers(kafka.bootstrap) == expected, kafka.log(tail=3000)
    assert _create_answers(ads.bootstrap_servers) == expected


def test_create_topics_validate_only_creates_nothing(kafka: KafkaReference,
                                                     ads: EmbeddedBroker) -> None:
    def answer(bootstrap: str) -> tuple[str, str, bool]:
        admin = _admin(bootstrap)
        valid = _create_error(admin, NewTopic("validated", 3, 1), validate_only=True)
        invalid = _create_error(admin, NewTopic("bad name!", 1, 1), validate_only=True)
        return valid, invalid, "validated" in admin.list_topics(timeout=10).topics

    assert answer(kafka.bootstrap) == ("NO_ERROR", "TOPIC_EXCEPTION", False)
    assert answer(ads.bootstrap_servers) == answer(kafka.bootstrap)


COMMON_CONFIGS = [
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
    "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
    "max.message.bytes", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable", "message.timestamp.before.max.ms",
]
# Kafka 4's KRaft controller writes min.insync.replicas as a cluster-wide default when the
# storage is formatted (for eligible leader replicas), so its source is
# DYNAMIC_DEFAULT_BROKER_CONFIG there and DEFAULT_CONFIG in ADS; only its value is compared.
# message.timestamp.after.max.ms is left out: Kafka 4 made its default one hour, ADS keeps
# Kafka 3's Long.MAX_VALUE with the 3.x timestamp rules (docs/kafka-reference.md).
VALUE_ONLY = {"min.insync.replicas"}
OVERRIDES = {"retention.ms": "3600000", "cleanup.policy": "compact,delete"}


def _describe(bootstrap: str) -> dict[str, tuple[str | None | bool, ...]]:
    admin = _admin(bootstrap)
    assert _create_error(admin, NewTopic("described", 1, 1, config=OVERRIDES)) == "NO_ERROR"
    resource = ConfigResource(ConfigResource.Type.TOPIC, "described")
    # Kafka answers CreateTopics before its own broker has the topic in its metadata: a
    # describe at once may meet UNKNOWN_TOPIC_OR_PARTITION (seen under load); asked again.
    deadline = time.monotonic() + 15
    while True:
        try:
            entries = admin.describe_configs([resource])[resource].result(timeout=15)
            break
        except KafkaException as exc:
            if (exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART
                    or time.monotonic() > deadline):
                raise
            time.sleep(0.2)
    return {name: ((e.value,) if name in VALUE_ONLY
                   else (e.value, ConfigSource(e.source).name, e.is_default, e.is_read_only))
            for name, e in entries.items() if name in COMMON_CONFIGS}


def test_describe_configs_of_new_topic_matches_kafka(kafka: KafkaReference,
                                                     ads: EmbeddedBroker) -> None:
    reference = _describe(kafka.bootstrap)
    assert sorted(reference) == sorted(COMMON_CONFIGS)
    assert reference["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG", False, False)
    assert reference["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG", True, False)
    assert reference["cleanup.policy"] == ("compact,delete", "DYNAMIC_TOPIC_CONFIG", False,
                                           False)
    assert _describe(ads.bootstrap_servers) == reference


# The group configs ADS serves (Kafka has more: streams groups, assignment intervals,
# dead-letter queues). share.auto.offset.reset is left out of the comparison: ADS backs it
# with a broker key of its own (group.share.auto.offset.reset), Kafka with none, so the
# synonyms differ.
GROUP_KEYS = ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
              "share.delivery.count.limit", "share.heartbeat.interval.ms",
              "share.isolation.level", "share.partition.max.record.locks",
              "share.record.lock.duration.ms", "share.session.timeout.ms"]
GROUP_SET = {"share.record.lock.duration.ms": "15000", "share.session.timeout.ms": "50000",
             "consumer.heartbeat.interval.ms": "6000", "share.delivery.count.limit": "3"}
# (what, the key and value set, the error Kafka answers, with its message)
GROUP_REFUSALS = [
    ("below the key's floor", ("share.record.lock.duration.ms", "10")),
    ("below the broker's bound", ("share.record.lock.duration.ms", "2000")),
    ("above the broker's bound", ("share.record.lock.duration.ms", "70000")),
    ("not a number", ("share.partition.max.record.locks", "abc")),
    ("above the locks' bound", ("share.partition.max.record.locks", "20000")),
    ("delivery limit 1", ("share.delivery.count.limit", "1")),
    ("delivery limit 11", ("share.delivery.count.limit", "11")),
    ("short consumer session", ("consumer.session.timeout.ms", "1000")),
    ("long share heartbeat", ("share.heartbeat.interval.ms", "20000")),
    ("unknown key", ("no.such.group.key", "1")),
    ("bad isolation level", ("share.isolation.level", "bogus")),
]


def _alter_group(admin: AdminClient, group: str, changes: dict[str, str | None]) -> str:
    """The error (name: message) IncrementalAlterConfigs answers, "NO_ERROR" when done; a
    None value deletes the key."""
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None
                    else AlterConfigOpType.SET) for k, v in changes.items()])
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    except KafkaException as exc:
        return f"{exc.args[0].name()}: {exc.args[0].str()}"
    return "NO_ERROR"


def _describe_group(admin: AdminClient, group: str) -> dict[str, tuple[object, ...]]:
    resource = ConfigResource(ResourceType.GROUP, group)
    entries = admin.describe_configs([resource])[resource].result(timeout=15)
    return {name: (e.value, ConfigSource(e.source).name, e.is_default, e.is_read_only,
                   sorted((s.name, s.value, ConfigSource(s.source).name)
                          for s in e.synonyms.values()))
            for name, e in entries.items() if name in GROUP_KEYS}


def _described_once(admin: AdminClient, applied: Callable[[dict[str, tuple[object, ...]]],
                                                          bool]) -> dict[str, tuple[object, ...]]:
    """The group's configs once a change is `applied` (at most 10 s): Kafka's broker
    answers DescribeConfigs from its metadata image, which follows the controller's
    acknowledgement of the change a moment later."""
    deadline = time.monotonic() + 10
    described = _describe_group(admin, "configured-group")
    while not applied(described) and time.monotonic() < deadline:
        time.sleep(0.1)
        described = _describe_group(admin, "configured-group")
    return described


def _group_answers(bootstrap: str) -> dict[str, Any]:
    admin = _admin(bootstrap)
    before = _describe_group(admin, "configured-group")
    done = _alter_group(admin, "configured-group", GROUP_SET)
    refusals = {what: _alter_group(admin, "configured-group", {key: value})
                for what, (key, value) in GROUP_REFUSALS}
    overridden = _described_once(admin, lambda d: all(
        d[k][0] == v for k, v in GROUP_SET.items()) or done != "NO_ERROR")
    deleted = _alter_group(admin, "configured-group", {"consumer.heartbeat.interval.ms": None})
    after = _described_once(admin, lambda d: d["consumer.heartbeat.interval.ms"][1]
                            != "GROUP_CONFIG" or deleted != "NO_ERROR")
    return {"before": before, "set": done, "refusals": refusals, "overridden": overridden,
            "deleted": deleted, "after": after}


def test_group_configs_described_altered_and_refused_as_kafka(kafka: KafkaReference,
                                                            ads: EmbeddedBroker) -> None:
    reference = _group_answers(kafka.bootstrap)
    assert sorted(reference["before"]) == GROUP_KEYS
    assert reference["set"] == "NO_ERROR"
    assert reference["overridden"]["share.record.lock.duration.ms"][:4] == (
        "15000", "GROUP_CONFIG", False, False)
    assert all(answer.startswith("INVALID_CONFIG")
               for answer in reference["refusals"].values())
    assert _group_answers(ads.bootstrap_servers) == reference
