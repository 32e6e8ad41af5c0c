"""A real cluster for tests: a ZooKeeper server and broker processes joined to it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from ads.testing.zookeeper import ZooKeeperServer
from broker_process import MARKED_ENV, BrokerProcess, free_port

SESSION_TIMEOUT_MS = 4000


def wait_until(check: Callable[[], bool], what: str, timeout_s: float,
               logs: Callable[[], str]) -> None:
    """Until `check()` holds (an exception counts as not yet: a process may be starting or
    restarting); past `timeout_s`, an AssertionError quoting `logs()`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001, S110 - not ready yet
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


class Cluster:
    def __init__(self, root: Path, size: int, *sets: str, zk_host: str = "127.0.0.1",
                 client_config: Mapping[str, str] | None = None) -> None:
        """`client_config`: what an admin client needs besides the address (a secured
        listener's settings)."""
        self.root = root
        self.client_config = dict(client_config or {})
        self.zookeeper = ZooKeeperServer(root / "zk", free_port(), host=zk_host)
        self.sets = sets
        self.brokers = {
            node: self._broker(node, f"node.id={node}",
                               f"zookeeper.connect={self.zookeeper.connect}",
                               f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                               "group.initial.rebalance.delay.ms=0",
                               "offsets.topic.num.partitions=6", *sets)
            for node in range(1, size + 1)}

    def _broker(self, node: int, *sets: str) -> BrokerProcess:
        return BrokerProcess(self.root / f"broker-{node}", None, *sets)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> Cluster:
        """Starts ZooKeeper and the brokers, and returns once every broker knows every
        other; stops whatever it started if that fails."""
        try:
            self.zookeeper.start()
            self.start_brokers()
        except BaseException:
            self.stop()
            raise
        return self

    def start_brokers(self) -> None:
        """Starts the brokers (ZooKeeper running) and returns once every broker knows every
        other."""
        for broker in self.brokers.values():
            broker.start()
        self.wait_for(lambda: len(self.zk_children("/brokers/ids")) == len(self.brokers),
                      "every broker registered")
        # A broker learns of the others from ZooKeeper a moment after they register; a
        # topic created meanwhile through it would find too few brokers for its replicas.
        self.wait_for(self._every_broker_sees_all, "every broker's metadata naming them all")

    @contextmanager
    def running(self) -> Iterator[Cluster]:
        """Started, and stopped whatever happens: for a fixture, where the broker_process
        marker's variable (set per test function, after module fixtures) is not set yet."""
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(MARKED_ENV, "1")
            self.start()
        try:
            yield self
        finally:
            self.stop()

    def _every_broker_sees_all(self) -> bool:
        return all(len(self.admin(node).list_topics(timeout=5).brokers) == len(self.brokers)
                   for node in self.brokers)

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                broker.kill9()
        self.zookeeper.stop()

    @contextmanager
    def zk(self) -> Iterator[KazooClient]:
        client = KazooClient(hosts=self.zookeeper.connect)
        client.start(timeout=30)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def zk_children(self, path: str) -> list[str]:
        with self.zk() as zk:
            return list(zk.get_children(path)) if zk.exists(path) else []

    def controller(self) -> int:
        import json
        with self.zk() as zk:
            if not zk.exists("/controller"):
                return -1
            return int(json.loads(zk.get("/controller")[0])["brokerid"])

    def admin(self, node: int | None = None) -> AdminClient:
        bootstrap = self.brokers[node].bootstrap if node else self.bootstrap
        return AdminClient({"bootstrap.servers": bootstrap, **self.client_config})

    def wait_for(self, check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
        wait_until(check, what, timeout_s, lambda: "\n".join(
            f"--- broker {n}\n{b.log()[-3000:]}" for n, b in self.brokers.items()))
