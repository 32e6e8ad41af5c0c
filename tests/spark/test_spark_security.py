"""The Spark source and sink against a broker whose only listener is SASL_SSL, configured
as Spark's Kafka connector is: `kafka.security.protocol`, `kafka.sasl.*`, `kafka.ssl.*`.
The source reads with a Java-style JAAS line and PEM trust store, the exactly-once sink
writes with librdkafka-style keys; a wrong password fails the query with the broker's
message."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from ads.cli.main import main
from ads.cli.pipeline import _security
from ads.spark.pipeline import LoadOptions, load
from ads.testing import EmbeddedBroker
from sasl_support import PLAIN_MODULE, PLAIN_USERS, jaas_line
from tls_support import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    config = {"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_line(PLAIN_USERS),
              "transaction.state.log.num.partitions": "2",
              "offsets.topic.num.partitions": "2", **pki.broker_settings()}
    with EmbeddedBroker(config=config) as b:
        yield b


def _librdkafka(pki: Pki, password: str = PLAIN_USERS["admin"]) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": password}


def _java_options(pki: Pki, password: str = PLAIN_USERS["admin"]) -> dict[str, str]:
    return {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": f'{PLAIN_MODULE} required username="admin" '
                                      f'password="{password}";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(pki.ca)}


def _read_committed(conf: dict[str, Any], topic: str, partitions: int, expected: int
                    ) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": "spark-sec-verify", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    try:
        for _ in range(50):
            values += [m.value() for m in consumer.consume(500, timeout=0.2) if not m.error()]
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return sorted(values)


def test_spark_reads_and_writes_exactly_once_over_sasl_ssl(
        spark: SparkSession, broker: EmbeddedBroker, pki: Pki, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    conf = {**_librdkafka(pki), "bootstrap.servers": bootstrap}
    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic("sec-in", 2, 1),
                                       NewTopic("sec-out", 2, 1)]).values():
        future.result(timeout=15)
    producer = Producer(conf)
    sent = sorted(f"v{i}".encode() for i in range(30))
    for i, value in enumerate(sent):
        producer.produce("sec-in", value, partition=i % 2)
    assert producer.flush(15) == 0

    batch = (spark.read.format("ads").option("kafka.bootstrap.servers", bootstrap)
             .options(**_java_options(pki)).option("subscribe", "sec-in").load())
    assert sorted(bytes(r.value) for r in batch.select("value").collect()) == sent

    source = (spark.readStream.format("ads").option("kafka.bootstrap.servers", bootstrap)
              .options(**_java_options(pki)).option("subscribe", "sec-in")
              .option("startingOffsets", "earliest").load())
    query = (source.select("value").writeStream.format("ads")
             .option("kafka.bootstrap.servers", bootstrap)
             .options(**{f"kafka.{k}": v for k, v in _librdkafka(pki).items()})
             .option("topic", "sec-out").option("exactlyOnce", "true")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(90)
    assert query.exception() is None
    assert _read_committed(conf, "sec-out", 2, len(sent)) == sent


def test_spark_wrong_password_fails_with_the_brokers_message(
        spark: SparkSession, broker: EmbeddedBroker, pki: Pki) -> None:
    reader = (spark.read.format("ads").option("kafka.bootstrap.servers",
                                              broker.bootstrap_servers)
              .options(**_java_options(pki, password="wrong")).option("subscribe", "sec-in"))
    with pytest.raises(Exception, match="Authentication failed: Invalid username or password"):
        reader.load().collect()


def test_pipeline_load_and_status_over_sasl_ssl(spark: SparkSession, broker: EmbeddedBroker,
                                                pki: Pki, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`ads pipeline load` reads through the source with the client properties of its
    `--command-config` (here given as LoadOptions.security); `ads pipeline status
    --command-config` asks the secured cluster for the lag."""
    bootstrap = broker.bootstrap_servers
    conf = {**_librdkafka(pki), "bootstrap.servers": bootstrap}
    admin = AdminClient(conf)  # kept until the answer: a destroyed client fails its futures
    admin.create_topics([NewTopic("sec-load", 1, 1)])["sec-load"].result(timeout=15)
    producer = Producer(conf)
    for i in range(12):
        producer.produce("sec-load", f"r{i}".encode())
    assert producer.flush(15) == 0
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in _librdkafka(pki).items()))
    args = argparse.Namespace(command_config=str(config))
    out = tmp_path / "lake"
    result = load(spark, LoadOptions(bootstrap_servers=bootstrap, topics=("sec-load",),
                                     output=out, security=_security(args)),
                  report=lambda line: None)
    assert result.records == 12
    producer.produce("sec-load", b"late")
    assert producer.flush(15) == 0
    assert main(["pipeline", "status", "--output", str(out), "--command-config",
                 str(config)]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row == ["sec-load", "0", "12", "12", "13", "1"]
    bad = tmp_path / "bad.properties"
    bad.write_text(config.read_text().replace(PLAIN_USERS["admin"], "wrong"))
    assert main(["pipeline", "status", "--output", str(out), "--command-config",
                 str(bad)]) == 1
    assert "Authentication failed" in capsys.readouterr().err
