"""DescribeLogDirs: every log directory of the broker with the size of each partition
replica in it, as kafka-python's admin client (and consoles) ask for it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient

from ads.protocol import messages as m
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

TOPICS = {"ld-a": 3, "ld-b": 1}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Path]]]:
    root = tmp_path_factory.mktemp("logdirs")
    dirs = [root / "disk-1", root / "disk-2"]
    with EmbeddedBroker(root / "disk-1", config={"log.dirs": ",".join(map(str, dirs))}) as b:
        bootstrap = b.bootstrap_servers
        for name, partitions in TOPICS.items():
            create_topic(bootstrap, name, partitions)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(200):
            for name, partitions in TOPICS.items():
                producer.produce(name, value=b"x" * (100 + i), partition=i % partitions)
        assert producer.flush(15) == 0
        yield bootstrap, dirs


def _on_disk(directory: Path, topic: str, partition: int) -> int:
    folder = directory / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in folder.glob("*.log")) if folder.is_dir() else -1


def _described(bootstrap: str, topic_partitions: dict[str, list[int]] | None = None
               ) -> list[dict]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answer = admin.describe_log_dirs(topic_partitions)
    finally:
        admin.close()
    assert len(answer) == 1  # one broker
    return answer[0]["log_dirs"]


def test_log_dirs_list_every_directory_and_the_replicas_in_each(
        broker: tuple[str, list[Path]]) -> None:
    bootstrap, dirs = broker
    results = _described(bootstrap)
    assert sorted(r["log_dir"] for r in results) == sorted(str(d) for d in dirs)
    seen: dict[tuple[str, int], int] = {}
    for result in results:
        assert result["error_code"] == 0
        directory = Path(result["log_dir"])
        for topic in result["topics"]:
            for p in topic["partitions"]:
                key = (topic["name"], p["partition_index"])
                assert key not in seen  # each replica in one directory
                seen[key] = p["partition_size"]
                # The size is the log's bytes, in the directory the partition lives in.
                assert p["partition_size"] == _on_disk(directory, *key)
                assert (p["offset_lag"], p["is_future_key"]) == (0, False)
    expected = {(t, p) for t, n in TOPICS.items() for p in range(n)}
    assert expected <= set(seen)
    assert all(seen[key] > 0 for key in expected)  # every partition has records
    # Partitions are spread over both directories.
    assert sum(1 for r in results if r["topics"]) == 2


def test_log_dirs_of_named_partitions_only(broker: tuple[str, list[Path]]) -> None:
    bootstrap, dirs = broker
    results = _described(bootstrap, {"ld-a": [1], "no-such-topic": [0]})
    assert len(results) == len(dirs)  # every directory, even without a named partition
    listed = [(t["name"], p["partition_index"]) for r in results for t in r["topics"]
              for p in t["partitions"]]
    assert listed == [("ld-a", 1)]


def test_log_dirs_report_the_volume_from_v4(broker: tuple[str, list[Path]]) -> None:
    bootstrap, dirs = broker
    with RawConnection(bootstrap) as conn:
        r = conn.request(m.ApiKey.DESCRIBE_LOG_DIRS, 4, m.DescribeLogDirsRequest(topics=[]))
    assert r.error_code == 0
    assert sorted(x.log_dir for x in r.results) == sorted(str(d) for d in dirs)
    assert all(not x.topics for x in r.results)  # an empty list names no partition
    vfs = os.statvfs(dirs[0])
    for x in r.results:
        assert x.total_bytes == vfs.f_blocks * vfs.f_frsize
        assert 0 < x.usable_bytes <= x.total_bytes


def test_log_dirs_alter_replica_log_dirs_not_advertised_with_several_dirs(
        broker: tuple[str, list[Path]]) -> None:
    # Replicas do not move between directories: a broker with two does not offer the move
    # (one with a single directory serves it: tests/reference/test_reference_log_dirs.py).
    bootstrap, _ = broker
    with RawConnection(bootstrap) as conn:
        versions = conn.request(m.ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
    keys = {k.api_key for k in versions.api_keys}
    assert m.ApiKey.DESCRIBE_LOG_DIRS in keys
    assert m.ApiKey.ALTER_REPLICA_LOG_DIRS not in keys
