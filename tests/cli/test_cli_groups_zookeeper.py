"""`ads groups import-zookeeper-offsets` against a real ZooKeeper server (Debian's
`zookeeper` package, started on a free loopback port)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kazoo.client import KazooClient

from ads.cli.main import main
from ads.testing import EmbeddedBroker
from broker_process import free_port
from conftest import create_topic

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
Cap = pytest.CaptureFixture[str]


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[str]:
    java = shutil.which("java")
    if java is None or not ZOOKEEPER_JAR.exists():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    port = free_port()
    data = tmp_path / "zk"
    data.mkdir()
    with (tmp_path / "zk.log").open("wb") as log:
        proc = subprocess.Popen(  # noqa: S603
            [java, "-Xmx128m", "-Dzookeeper.admin.enableServer=false", "-cp",
             f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}",
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(port), str(data)],
            stdout=log, stderr=subprocess.STDOUT)
    hosts = f"127.0.0.1:{port}"
    try:
        zk = KazooClient(hosts=hosts)
        zk.start(timeout=30)
        zk.stop()
        zk.close()
        yield hosts
    finally:
        proc.terminate()
        proc.wait(10)


def write_old_consumer_offsets(hosts: str) -> None:
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=10)
    for group, topic, partition, offset in [("legacy", "imported", 0, 5),
                                            ("legacy", "imported", 1, 2),
                                            ("running", "imported", 0, 1)]:
        zk.create(f"/consumers/{group}/offsets/{topic}/{partition}", str(offset).encode(),
                  makepath=True)
    zk.create("/consumers/running/ids/consumer-1", b"{}", makepath=True, ephemeral=False)
    zk.ensure_path("/consumers/idle/offsets")
    zk.stop()
    zk.close()


def run(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_groups_import_zookeeper_offsets(zookeeper: str, tmp_path: Path, capsys: Cap) -> None:
    write_old_consumer_offsets(zookeeper)
    config = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "imported", partitions=2)
        args = ("groups", "import-zookeeper-offsets", "--zookeeper", zookeeper,
                "--bootstrap-server", bs)
        code, out, _ = run(capsys, *args, "--dry-run")
        assert code == 0
        assert out.splitlines() == [
            "Group 'idle': no offsets in ZooKeeper, skipped.",
            "Group 'legacy': would import 2 offsets: imported-0=5, imported-1=2",
            "Group 'running': consumers are still registered in ZooKeeper, skipped "
            "(use --force to import anyway)."]
        c = Consumer({"bootstrap.servers": bs, "group.id": "legacy"})
        assert [tp.offset for tp in c.committed(
            [TopicPartition("imported", 0)], timeout=10)] == [-1001]
        start = time.time()
        code, out, _ = run(capsys, *args, "--group", "legacy", "--group", "running", "--force")
        assert code == 0, out
        assert out.splitlines() == [
            "Group 'legacy': imported 2 offsets: imported-0=5, imported-1=2",
            "Group 'running': imported 1 offsets: imported-0=1"]
        assert time.time() - start < 30
        got = c.committed([TopicPartition("imported", 0), TopicPartition("imported", 1)],
                          timeout=10)
        assert [tp.offset for tp in got] == [5, 2]
        c.close()
