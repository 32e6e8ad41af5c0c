"""Topic administration through confluent-kafka's AdminClient."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from conftest import create_topic


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def test_admin_create_describe_delete(admin: AdminClient) -> None:
    fs = admin.create_topics([NewTopic("orders", 3, 1, config={"retention.ms": "3600000"})])
    fs["orders"].result(10)
    md = admin.list_topics(timeout=10)
    assert set(md.topics["orders"].partitions) == {0, 1, 2}
    assert md.topics["orders"].partitions[0].leader == md.brokers[next(iter(md.brokers))].id

    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(10)
    assert err.value.args[0].name() == "TOPIC_ALREADY_EXISTS"

    desc = admin.describe_topics(TopicCollection(["orders"]))["orders"].result(10)
    assert desc.name == "orders" and len(desc.partitions) == 3
    assert desc.topic_id is not None

    admin.delete_topics(["orders"])["orders"].result(10)
    assert "orders" not in admin.list_topics(timeout=10).topics


def test_admin_create_topic_errors(admin: AdminClient) -> None:
    cases = {
        "bad/name": ("bad/name", 1, 1, {}),
        "rf3": ("rf3", 1, 3, {}),
        "badconfig": ("badconfig", 1, 1, {"retention.ms": "soon"}),
        "unknownconfig": ("unknownconfig", 1, 1, {"no.such.key": "1"}),
    }
    expected = {
        "bad/name": "TOPIC_EXCEPTION",  # librdkafka's name for INVALID_TOPIC_EXCEPTION (17)
        "rf3": "INVALID_REPLICATION_FACTOR",
        "badconfig": "INVALID_CONFIG",
        "unknownconfig": "INVALID_CONFIG",
    }
    for key, (name, parts, rf, cfg) in cases.items():
        with pytest.raises(KafkaException) as err:
            admin.create_topics([NewTopic(name, parts, rf, config=cfg)])[name].result(10)
        assert err.value.args[0].name() == expected[key], key


def test_admin_validate_only_creates_nothing(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("dry", 2, 1)], validate_only=True)["dry"].result(10)
    assert "dry" not in admin.list_topics(timeout=10).topics


def test_admin_describe_and_alter_configs(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("cfg", 1, 1, config={"cleanup.policy": "compact"})])[
        "cfg"].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"

    alter = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([alter])[alter].result(10)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "1000"
    assert configs["cleanup.policy"].value == "delete"

    bad = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "x", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as err:
        admin.incremental_alter_configs([bad])[bad].result(10)
    assert err.value.args[0].name() == "INVALID_CONFIG"

    broker_res = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker_cfg = admin.describe_configs([broker_res])[broker_res].result(10)
    assert broker_cfg["message.max.bytes"].value == "1048588"


def test_admin_create_partitions(admin: AdminClient, bootstrap: str) -> None:
    create_topic(bootstrap, "grow", partitions=1)
    admin.create_partitions([NewPartitions("grow", 4)])["grow"].result(10)
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 4
    with pytest.raises(KafkaException) as err:
        admin.create_partitions([NewPartitions("grow", 2)])["grow"].result(10)
    assert err.value.args[0].name() == "INVALID_PARTITIONS"
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("grow", value=b"x", partition=3)
    assert producer.flush(10) == 0


def test_admin_delete_records_moves_start_offset(admin: AdminClient, bootstrap: str) -> None:
    create_topic(bootstrap, "trim", partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(20):
        producer.produce("trim", value=f"{i}".encode())
        producer.flush(10)  # one batch per record, so the trim point is a batch boundary
    result = admin.delete_records([TopicPartition("trim", 0, 12)])
    tp = list(result.values())[0].result(10)
    assert tp.low_watermark == 12
    lo = admin.list_offsets({TopicPartition("trim", 0): OffsetSpec.earliest()})
    assert list(lo.values())[0].result(10).offset == 12

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                         "auto.offset.reset": "error", "enable.auto.commit": False})
    consumer.assign([TopicPartition("trim", 0, 5)])
    msg = None
    for _ in range(20):
        msg = consumer.poll(0.5)
        if msg is not None:
            break
    consumer.close()
    assert msg is not None and msg.error() is not None
    assert msg.error().name() == "_AUTO_OFFSET_RESET"
    assert "out of range" in msg.error().str().lower() or "OFFSET_OUT_OF_RANGE" in str(msg.error())
