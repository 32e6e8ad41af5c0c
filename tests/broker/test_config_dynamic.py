"""Dynamic broker configs (KIP-226): set on a broker or on the cluster's default with the
admin clients, described with their sources, taken by the logs without a restart, kept
across one, and refused for keys read at start only, with Kafka's errors and messages
(compared with Apache Kafka 4.4 when this was written: "Cannot update these configs
dynamically: [log.dirs]", INVALID_REQUEST)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

BROKER = ConfigResource.Type.BROKER
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


def alter(bootstrap: str, name: str, key: str, value: str | None,
          op: AlterConfigOpType = SET) -> str:
    """IncrementalAlterConfigs of one broker key through confluent-kafka: "OK" or the error."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op)])
    try:
        admin.incremental_alter_configs([res])[res].result(10)
    except KafkaException as exc:
        err = exc.args[0]
        return f"{err.name()}: {err.str()}"
    return "OK"


def alter_default(bootstrap: str, key: str, value: str | None, op: int = 0) -> int:
    """The cluster's default (resource name ""), which confluent-kafka cannot name: raw."""
    Q = m.IncrementalAlterConfigsRequest.AlterConfigsResource  # noqa: N806
    with RawConnection(bootstrap) as conn:
        r = conn.request(m.ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, m.IncrementalAlterConfigsRequest(
            resources=[Q(resource_type=4, resource_name="", configs=[
                Q.AlterableConfig(name=key, config_operation=op, value=value)])],
            validate_only=False))
    return int(r.responses[0].error_code)


def described(bootstrap: str, rtype: ConfigResource.Type, name: str) -> dict[str, object]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(rtype, name)
    return dict(admin.describe_configs([res])[res].result(10))


def described_default(bootstrap: str) -> dict[str, tuple[str | None, int]]:
    D = m.DescribeConfigsRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        r = conn.request(m.ApiKey.DESCRIBE_CONFIGS, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=4, resource_name="", configuration_keys=None)]))
    assert r.results[0].error_code == 0
    return {c.name: (c.value, c.config_source) for c in r.results[0].configs}


def synonyms(bootstrap: str, key: str) -> list[tuple[str, str | None, int]]:
    D = m.DescribeConfigsRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        r = conn.request(m.ApiKey.DESCRIBE_CONFIGS, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=[key])],
            include_synonyms=True))
    return [(y.name, y.value, y.source) for y in r.results[0].configs[0].synonyms]


def test_config_dynamic_broker_and_default_with_sources(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path, config={"log.retention.hours": "100"}) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "dyn", 1)
        assert alter(bs, "1", "log.retention.ms", "3600000") == "OK"
        entry = described(bs, BROKER, "1")["log.retention.ms"]
        assert (entry.value, entry.source, entry.is_read_only) == ("3600000", DYNAMIC_BROKER,
                                                                   False)
        # The broker's own value wins over the static file's synonym, which stays listed
        # (raw: confluent-kafka keeps one synonym per name).
        assert synonyms(bs, "log.retention.ms")[:2] == [
            ("log.retention.ms", "3600000", DYNAMIC_BROKER),
            ("log.retention.hours", "100", STATIC)]
        topic = described(bs, ConfigResource.Type.TOPIC, "dyn")["retention.ms"]
        assert (topic.value, topic.source) == ("3600000", DYNAMIC_BROKER)

        # The cluster's default lies under the broker's own values.
        assert alter_default(bs, "log.retention.ms", "7200000") == 0
        assert alter_default(bs, "message.max.bytes", "2000000") == 0
        assert described_default(bs) == {"log.retention.ms": ("7200000", DYNAMIC_DEFAULT),
                                          "message.max.bytes": ("2000000", DYNAMIC_DEFAULT)}
        configs = described(bs, BROKER, "1")
        assert configs["log.retention.ms"].value == "3600000"
        assert (configs["message.max.bytes"].value,
                configs["message.max.bytes"].source) == ("2000000", DYNAMIC_DEFAULT)
        assert described(bs, ConfigResource.Type.TOPIC, "dyn")["max.message.bytes"].value == (
            "2000000")
        # Deleting the broker's own value uncovers the default's.
        assert alter(bs, "1", "log.retention.ms", None, DELETE) == "OK"
        entry = described(bs, BROKER, "1")["log.retention.ms"]
        assert (entry.value, entry.source) == ("7200000", DYNAMIC_DEFAULT)

    # Kept across a restart (the metadata store keeps entity configs).
    with EmbeddedBroker(tmp_path) as b:
        entry = described(b.bootstrap_servers, BROKER, "1")["log.retention.ms"]
        assert (entry.value, entry.source) == ("7200000", DYNAMIC_DEFAULT)


def test_config_dynamic_refusals_as_kafka(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path) as b:
        bs = b.bootstrap_servers
        assert alter(bs, "1", "log.dirs", "/elsewhere") == (
            "INVALID_REQUEST: Cannot update these configs dynamically: [log.dirs]")
        assert alter(bs, "1", "num.partitions", "3") == (
            "INVALID_REQUEST: Cannot update these configs dynamically: [num.partitions]")
        assert alter(bs, "1", "log.retention.ms", "abc") == (
            "INVALID_REQUEST: Invalid value abc for configuration log.retention.ms: "
            "Not a number of type LONG")
        assert alter_default(bs, "broker.id", "5") == ErrorCode.INVALID_REQUEST
        # A key ADS does not know is kept, as Kafka keeps it.
        assert alter(bs, "1", "some.plugin.setting", "x") == "OK"
        entry = described(bs, BROKER, "1")["log.dirs"]
        assert entry.is_read_only and entry.source == STATIC


def test_config_dynamic_segment_size_taken_without_restart(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "rolls", 1)
        assert alter_default(bs, "log.segment.bytes", "16384") == 0
        # Batches of about one record, so segments can roll between them.
        p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.size": 1500})
        for i in range(200):
            p.produce("rolls", value=b"x" * 1000, key=str(i).encode())
            p.poll(0)
        assert p.flush(10) == 0
        segments = sorted((tmp_path / "rolls-0").glob("*.log"))
        assert len(segments) >= 10  # ~200 KB in 16 KB segments, not one 1 GiB segment


@pytest.mark.broker_process
def test_config_dynamic_reaches_every_broker_of_a_cluster(tmp_path: Path) -> None:
    from cluster_support import Cluster  # noqa: PLC0415 - ZooKeeper only for this test

    cluster = Cluster(tmp_path, 3).start()
    try:
        first = cluster.brokers[1].bootstrap
        assert alter_default(first, "log.retention.ms", "5400000") == 0
        assert alter(first, "2", "log.retention.bytes", "123456789") == "OK"

        def everywhere() -> bool:
            for node, broker in cluster.brokers.items():
                configs = described(broker.bootstrap, BROKER, str(node))
                if configs["log.retention.ms"].value != "5400000":
                    return False
                own = configs["log.retention.bytes"]
                if (own.value, own.source) != (("123456789", DYNAMIC_BROKER) if node == 2
                                               else ("-1", DEFAULT)):
                    return False
            return True

        cluster.wait_for(everywhere, "every broker taking the dynamic configs", 30)
    finally:
        cluster.stop()
