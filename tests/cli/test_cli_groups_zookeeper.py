"""`ads groups import-zookeeper-offsets` against a real ZooKeeper server (Debian's
`zookeeper` package, started on a free loopback port)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kazoo.client import KazooClient

from ads.cli.main import main
from ads.testing import EmbeddedBroker
from ads.testing.zookeeper import ZooKeeperServer
from conftest import create_topic

Cap = pytest.CaptureFixture[str]


@pytest.fixture
def zookeeper(zookeeper_server: ZooKeeperServer) -> str:
    return zookeeper_server.connect


def write_old_consumer_offsets(hosts: str) -> None:
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=30)
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
