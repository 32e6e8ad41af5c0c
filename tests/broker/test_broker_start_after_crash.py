"""`ads broker` processes started where a crashed one was: a broker restarted at once after
`kill -9` waits for the ZooKeeper session its dead process left and then registers (so a
supervisor's immediate restart works), while a second process on a data directory in use
is refused at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from ads.metadata import zk_layout as zl
from ads.testing.zookeeper import ZooKeeperServer
from broker_process import BrokerProcess

pytestmark = pytest.mark.broker_process

SESSION_TIMEOUT_MS = 6000


def _owner(zk: KazooClient, node: int) -> int | None:
    stat = zk.exists(zl.broker_path(node))
    return None if stat is None else int(stat.ephemeralOwner)


def _wait(check: object, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_broker_restarted_after_kill_registers_once_old_session_expires(
        tmp_path: Path, zookeeper_server: ZooKeeperServer) -> None:
    zookeeper = zookeeper_server
    sets = ("node.id=1", f"zookeeper.connect={zookeeper.connect}",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}")
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=30)
    first = BrokerProcess(tmp_path / "b1", None, *sets).start()
    second = BrokerProcess(tmp_path / "b1", first.port, *sets)
    try:
        _wait(lambda: _owner(zk, 1) is not None, "the first registration", 30)
        old_owner = _owner(zk, 1)
        first.kill9()
        assert _owner(zk, 1) == old_owner  # the dead process's session still holds it
        # Listening comes after registration's wait: start() returns once it is over.
        second.start(timeout=SESSION_TIMEOUT_MS / 1000 + 30)
        _wait(lambda: _owner(zk, 1) not in (None, old_owner), "the new registration", 30)
        assert second.proc is not None and second.proc.poll() is None
        log = second.log()
        assert "already registered" not in log
        assert f"registered at /brokers/ids/1 by ZooKeeper session 0x{old_owner:x}" in log
        assert "waiting up to 8 s for that session to expire" in log
        assert "the previous registration of node id 1 expired after" in log
        admin = AdminClient({"bootstrap.servers": second.bootstrap})
        assert admin.list_topics(timeout=10).brokers
    finally:
        zk.stop()
        zk.close()
        for b in (first, second):
            if b.proc is not None and b.proc.poll() is None:
                b.stop()


def test_broker_refuses_a_data_directory_another_process_uses(tmp_path: Path) -> None:
    data = tmp_path / "data"
    running = BrokerProcess(data).start()
    twin = BrokerProcess(data)
    try:
        with pytest.raises(RuntimeError, match="exited with 2"):
            twin.start()
        assert f"another process uses the log directory {data}" in twin.log()
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        assert admin.list_topics(timeout=10).brokers
    finally:
        assert running.stop() == 0
    # Once the first has stopped, the directory is free.
    again = BrokerProcess(data, twin.port).start()
    assert again.stop() == 0
