"""The broker's watches on partition state znodes (`StateWatches`) on a real ZooKeeper:
states read before and after they exist, every change seen, thousands read at once, and
everything read again on a new session after the old one expired."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from ads.common.partitions import TopicPartition
from ads.metadata import zk_layout as zl
from ads.metadata.zk_state_watch import StateWatches
from ads.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.timeout(120)


class Seen:
    """What `deliver` was given, by partition: the last state and version."""

    def __init__(self) -> None:
        self.last: dict[TopicPartition, tuple[zl.LeaderAndIsr | None, int]] = {}
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, key: TopicPartition, state: zl.LeaderAndIsr | None,
                 version: int) -> None:
        with self._lock:
            self.last[key] = (state, version)
            self.count += 1

    def until(self, check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if check():
                    return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}: {len(self.last)} seen")


def _client(server: ZooKeeperServer, **kwargs: object) -> KazooClient:
    client = KazooClient(hosts=server.connect, timeout=4.0, **kwargs)
    client.start(timeout=30)
    return client


def _state(leader: int, epoch: int) -> bytes:
    return zl.encode_state(zl.LeaderAndIsr(leader, epoch, [leader], 1))


def test_state_watch_reads_changes_and_states_made_later(zookeeper_server: ZooKeeperServer) -> None:
    writer, reader = _client(zookeeper_server), _client(zookeeper_server)
    try:
        key, later = TopicPartition("t", 0), TopicPartition("t", 1)
        writer.create(zl.state_path(*key), _state(1, 0), makepath=True)
        seen = Seen()
        watches = StateWatches(reader, seen, lambda topic: topic == "t")
        watches.watch([key, later])
        seen.until(lambda: seen.last.get(key) == (zl.LeaderAndIsr(1, 0, [1], 1), 0),
                   "the existing state")
        writer.set(zl.state_path(*key), _state(2, 1))
        seen.until(lambda: seen.last[key] == (zl.LeaderAndIsr(2, 1, [2], 1), 1), "a change")
        writer.create(zl.state_path(*later), _state(3, 0), makepath=True)
        seen.until(lambda: seen.last.get(later, (None, -1))[1] == 0, "a state made later")
        writer.delete(zl.state_path(*key))
        seen.until(lambda: seen.last[key] == (None, -1), "a state removed")
    finally:
        for client in (writer, reader):
            client.stop()
            client.close()


def test_state_watch_reads_thousands_and_again_after_session_expiry(
        zookeeper_server: ZooKeeperServer) -> None:
    writer, reader = _client(zookeeper_server), _client(zookeeper_server)
    keys = [TopicPartition("many", p) for p in range(2000)]
    try:
        writer.ensure_path(zl.partitions_path("many"))
        made = [writer.create_async(zl.state_path(*key), _state(1, 0), makepath=True)
                for key in keys]
        for result in made:
            result.get(timeout=30)
        seen = Seen()
        watches = StateWatches(reader, seen, lambda topic: topic == "many")
        watches.watch(keys)
        seen.until(lambda: len(seen.last) == len(keys)
                   and all(s is not None for s, _ in seen.last.values()), "every state")

        # Another client on the reader's session, closed, ends that session: ZooKeeper drops
        # its watches, and kazoo opens a new session.
        session_id, password = reader.client_id
        thief = KazooClient(hosts=zookeeper_server.connect, client_id=(session_id, password))
        thief.start(timeout=30)
        thief.stop()
        thief.close()
        before = seen.count
        seen.until(lambda: seen.count >= before + len(keys), "every state read again", 60)
        for key in keys[:10]:  # the watches are set again on the new session
            writer.set(zl.state_path(*key), _state(2, 1))
        seen.until(lambda: all(seen.last[k][1] == 1 for k in keys[:10]), "changes seen")
    finally:
        for client in (writer, reader):
            client.stop()
            client.close()
