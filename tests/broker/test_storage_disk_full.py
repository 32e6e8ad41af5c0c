"""A full disk as confluent-kafka sees it: KAFKA_STORAGE_ERROR, nothing acknowledged lost.

The in-process broker's logs write through a ``FaultyFileIO``; the producer has retries
disabled so the broker's error reaches its delivery report.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.storage.fileio import FaultyFileIO
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection
from replication_support import read_all

TOPIC = "disk-full"


def _produce(bootstrap: str, values: list[bytes]) -> list[tuple[bytes, KafkaError | None]]:
    """Produce each value on its own (one batch per request); (value, error) per message."""
    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0, "linger.ms": 0,
                         "enable.idempotence": False, "acks": "all"})
    reports: list[tuple[bytes, KafkaError | None]] = []
    for value in values:
        producer.produce(TOPIC, value=value, partition=0,
                         on_delivery=lambda err, msg: reports.append((msg.value(), err)))
        producer.flush(15)
    assert len(reports) == len(values)
    return reports


def _read_all(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return got
            got.append(msg.value())
    finally:
        consumer.close()
    raise AssertionError("did not reach the end of the partition")


def test_storage_disk_full_gives_kafka_storage_error_and_keeps_acknowledged(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    io = FaultyFileIO()
    with EmbeddedBroker(data, file_io=io) as broker:
        create_topic(broker.bootstrap_servers, TOPIC)
        before = [f"before-{i}".encode() for i in range(20)]
        assert all(err is None for _, err in _produce(broker.bootstrap_servers, before))

        io.space_left(40)  # the next batch is cut off part-way by ENOSPC
        failed = _produce(broker.bootstrap_servers, [b"lost-0", b"lost-1"])
        assert [err.code() if err else None for _, err in failed] == \
            [KafkaError.KAFKA_STORAGE_ERROR] * 2
        assert _read_all(broker.bootstrap_servers) == before

        io.space_left(None)  # space is back: produce works again
        after = [f"after-{i}".encode() for i in range(10)]
        assert all(err is None for _, err in _produce(broker.bootstrap_servers, after))
        assert _read_all(broker.bootstrap_servers) == before + after

    with EmbeddedBroker(data) as restarted:  # same directory, the real file layer
        assert _read_all(restarted.bootstrap_servers) == before + after
        more = _produce(restarted.bootstrap_servers, [b"restarted"])
        assert more[0][1] is None
        assert _read_all(restarted.bootstrap_servers) == [*before, *after, b"restarted"]


@contextmanager
def _small_filesystem(path: Path, inodes: int) -> Iterator[Path]:
    """A tmpfs of `inodes` files and directories at `path` (needs root, as the suite has)."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=64m,nr_inodes={inodes}", "tmpfs",
                    str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def _use_every_inode(data: Path) -> list[str]:
    names: list[str] = []
    for i in range(10_000):
        try:
            (data / f"filler-{i}").touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            return names
        names.append(f"filler-{i}")
    raise AssertionError("the filesystem did not run out of inodes")


def _refused_partitions(admin: AdminClient, total: int) -> None:
    grown = admin.create_partitions([NewPartitions(TOPIC, total)], operation_timeout=30)
    with pytest.raises(KafkaException) as refused:
        grown[TOPIC].result(timeout=60)
    assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR
    assert "No space left on device" in refused.value.args[0].str()


def _partition_dirs(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.name.startswith(f"{topic}-"))


def test_storage_create_topics_out_of_inodes_is_refused_whole(tmp_path: Path) -> None:
    """A topic whose partitions' files run out of inodes part-way is answered
    KAFKA_STORAGE_ERROR and removed with every file it made; the broker goes on serving,
    and a topic that fits is created afterwards (confluent-kafka's AdminClient). Partitions
    added with no inode left are answered KAFKA_STORAGE_ERROR: not recorded when even the
    metadata's file cannot be written, recorded when only their own files cannot be made;
    the restarted broker, with space again, makes and serves them."""
    assert os.geteuid() == 0, "mounting a tmpfs needs root"
    config = {"offsets.topic.num.partitions": 1}
    with _small_filesystem(tmp_path / "small", inodes=300) as data:
        with EmbeddedBroker(data, config=config) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            futures = admin.create_topics([NewTopic("too-many", num_partitions=200,
                                                    replication_factor=1)], operation_timeout=30)
            with pytest.raises(KafkaException) as refused:
                futures["too-many"].result(timeout=60)
            assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR
            assert "No space left on device" in refused.value.args[0].str()
            assert "too-many" not in admin.list_topics(timeout=10).topics
            assert _partition_dirs(data, "too-many") == []
            assert not [p for p in data.iterdir() if p.name.endswith("-delete")]

            create_topic(broker.bootstrap_servers, TOPIC, partitions=3)
            assert _partition_dirs(data, TOPIC) == [f"{TOPIC}-{i}" for i in range(3)]
            assert all(err is None for _, err in _produce(broker.bootstrap_servers, [b"fits"]))
            assert _read_all(broker.bootstrap_servers) == [b"fits"]
            filler = _use_every_inode(data)  # shutdown's producer snapshots find none
            # No inode for the metadata's own file: nothing recorded.
            _refused_partitions(admin, 5)
            assert len(admin.list_topics(timeout=10).topics[TOPIC].partitions) == 3
            # One inode: the metadata is written (its new file replaces the old one), the
            # new partitions' files are not; they stay recorded.
            (data / filler.pop()).unlink()
            _refused_partitions(admin, 5)
            assert len(admin.list_topics(timeout=10).topics[TOPIC].partitions) == 5

        # Stopping on a full disk still stops (no snapshot, no clean-shutdown marker), and
        # the next start recovers what was acknowledged.
        assert not (data / ".kafka_cleanshutdown").exists()
        for name in filler:
            (data / name).unlink()
        with EmbeddedBroker(data, config=config) as restarted:
            assert _read_all(restarted.bootstrap_servers) == [b"fits"]
            assert _partition_dirs(data, TOPIC) == [f"{TOPIC}-{i}" for i in range(5)]


def test_storage_read_failure_is_that_partitions_kafka_storage_error(tmp_path: Path) -> None:
    """A segment file that cannot be opened for a fetch (EIO here; EMFILE the same way) is
    KAFKA_STORAGE_ERROR for that partition only: the same response carries the other
    partitions' records, the connection stays open, and confluent-kafka then reads
    everything."""
    io = FaultyFileIO()
    # Two segment files open at most: the partitions' files are closed again by the time
    # they are fetched, so every fetch of one opens its file.
    with EmbeddedBroker(tmp_path / "data", file_io=io,
                        config={"log.open.files.max": 2}) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, TOPIC, partitions=4)
        producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        for p in range(4):
            producer.produce(TOPIC, value=b"record-%d" % p, partition=p)
        assert producer.flush(15) == 0
        fetch = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                               topics=[m.FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                                   m.FetchRequest.FetchTopic.FetchPartition(
                                       partition=p, fetch_offset=0, partition_max_bytes=1 << 16)
                                   for p in range(4)])])
        with RawConnection(bs) as conn:
            io.fail_next_open(errno.EIO)
            answered = conn.request(1, 11, fetch).responses[0].partitions
            codes = [p.error_code for p in answered]
            assert codes.count(ErrorCode.KAFKA_STORAGE_ERROR) == 1, codes
            assert codes.count(ErrorCode.NONE) == 3, codes
            assert all(p.records for p in answered if p.error_code == ErrorCode.NONE)
            again = conn.request(1, 11, fetch).responses[0].partitions  # same connection
            assert [p.error_code for p in again] == [ErrorCode.NONE] * 4
        assert read_all(bs, TOPIC, 4, 4) == {p: [(0, b"record-%d" % p)] for p in range(4)}
