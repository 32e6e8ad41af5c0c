"""Shared fixtures: a fresh in-process broker per test (the `ads_broker` fixture comes from
the ads pytest plugin) and helpers for the client libraries."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from ads.metadata import zk_layout as zl
from ads.testing import EmbeddedBroker
from ads.testing.zookeeper import ZooKeeperServer, zookeeper_available
from broker_process import free_port
from cluster_support import Cluster
from file_lanes import FileLanes

if TYPE_CHECKING:
    from xdist.remote import Producer

    from ads.storage.log import Log
    from kafka_reference import KafkaReference

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> FileLanes | None:
    """`--dist loadfile` (as `make test` runs): whole files, the longest first, one Spark
    file at a time (tests/file_lanes.py)."""
    return FileLanes(config, log) if config.getvalue("dist") == "loadfile" else None


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# Spark's own Kafka connector and its dependencies, copied by `make test-deps` from
# tests/spark_kafka/pom.xml; every Spark session of the tests has them on its class path.
SPARK_KAFKA_JARS = Path(__file__).parent / "spark_kafka" / "target" / "jars"


def spark_kafka_jars() -> list[str]:
    return sorted(str(p) for p in SPARK_KAFKA_JARS.glob("*.jar"))


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)],
        operation_timeout=10)
    futures[name].result(timeout=15)


def kafka_topic_id(raw: bytes) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def topic_with_telling_id(b: EmbeddedBroker, prefix: str) -> tuple[str, str]:
    """A new topic whose id differs between standard and URL-safe base64 (one of the
    characters + and /), and the id in Kafka's form."""
    assert b.broker is not None
    for n in range(40):
        name = f"{prefix}-{n}"
        create_topic(b.bootstrap_servers, name)
        raw = b.broker.metadata.topics[name].topic_id.bytes
        if set(base64.b64encode(raw).decode()) & {"+", "/"}:
            return name, kafka_topic_id(raw)
    raise AssertionError("no topic id with + or / in 40 topics")


@pytest.fixture
def bootstrap(ads_broker) -> str:  # type: ignore[no-untyped-def]
    return ads_broker.bootstrap_servers


# The Spark tests share one broker and one local Spark session per test module (starting
# Spark's JVM costs seconds); modules that define their own `broker` use theirs.
@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaReference]:
    """Apache Kafka's broker, which the tests of tests/reference compare ADS with."""
    from kafka_reference import KafkaReference  # noqa: PLC0415 - a JVM only when used

    with KafkaReference(Path(tmp_path_factory.mktemp("kafka"))) as k:
        yield k


@pytest.fixture(scope="module")
def ads(broker: EmbeddedBroker) -> EmbeddedBroker:
    """The ADS side of a comparison with `kafka`: the module's broker."""
    return broker


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    from ads.spark.testing import local_session  # noqa: PLC0415 - pyspark only when used

    return local_session(spark_kafka_jars())


@pytest.fixture(autouse=True)
def _broker_process_marker(request: pytest.FixtureRequest,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Lets `BrokerProcess.start` refuse to run in a test that is not marked for it."""
    from broker_process import MARKED_ENV  # noqa: PLC0415

    if request.node.get_closest_marker("broker_process") is not None:
        monkeypatch.setenv(MARKED_ENV, "1")
    else:
        monkeypatch.delenv(MARKED_ENV, raising=False)


@pytest.fixture
def zookeeper_server(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server of the test's own (Debian's package), stopped after it."""
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    server = ZooKeeperServer(tmp_path / "zk", free_port()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk(zookeeper_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """A ZooKeeper server with Kafka's persistent paths, and a client connected to it."""
    client = KazooClient(hosts=zookeeper_server.connect)
    client.start(timeout=30)
    try:
        for path in zl.PERSISTENT_PATHS:
            client.ensure_path(path)
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A ZooKeeper server and three broker processes joined to it, stopped afterwards."""
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 3)
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture
def logs() -> Iterator[list[Log]]:
    """The logs a test opens on its own (replica managers on real logs), closed after it."""
    opened: list[Log] = []
    yield opened
    for log in opened:
        log.close()
