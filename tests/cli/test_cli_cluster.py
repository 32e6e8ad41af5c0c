"""`ads cluster up` runs ZooKeeper and three brokers that real clients use, `ads cluster
status` reports them, and SIGTERM stops every process it started."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ads.cli.main import main
from ads.testing.zookeeper import zookeeper_available
from broker_process import free_port

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(180)]


def free_port_run(count: int) -> int:
    """A port P such that P .. P + count - 1 are free now."""
    for _ in range(50):
        base = free_port()
        if base + count > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
        return base
    raise RuntimeError("no run of free ports found")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def read_until(lines: queue.Queue[str], pattern: str, timeout_s: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if re.search(pattern, line):
            return seen
    raise AssertionError(f"no line matching {pattern!r} in {seen}")


def test_cli_cluster_up_serves_clients_and_stops_every_process(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    base = free_port_run(3)
    zk_port = free_port()
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "ads.cli.main", "cluster", "up", "--brokers", "3",
         "--data-dir", str(tmp_path / "cluster"), "--base-port", str(base),
         "--zookeeper-port", str(zk_port), "--set", "group.initial.rebalance.delay.ms=0",
         "--set", "offsets.topic.num.partitions=3"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True)
    reader.start()
    pids: list[int] = []
    try:
        out = read_until(lines, r"^bootstrap servers: ", 90)
        pids = [int(p) for p in re.findall(r"\(pid (\d+)", "".join(out))]
        assert len(pids) == 4  # ZooKeeper and three brokers
        bootstrap = out[-1].split(": ", 1)[1].strip()
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("up", 6, 1)])["up"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(60):
            producer.produce("up", value=f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{base + 2}", "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["up"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 60 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(60, 0.5) if m.error() is None]
        consumer.close()
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(60))

        assert main(["cluster", "status", "--bootstrap-server", f"127.0.0.1:{base + 1}"]) == 0
        status = capsys.readouterr().out
        assert "Brokers: 3" in status
        controller = int(re.search(r"^Controller: (\d+)$", status, re.M)[1])  # type: ignore[index]
        assert controller in (1, 2, 3)
        up_lines = re.findall(r"Topic: up\tPartition: (\d)\tLeader: (\d)\tReplicas: (\d)\t"
                              r"Isr: (\d)", status)
        assert sorted(int(p) for p, *_ in up_lines) == list(range(6))
        assert {leader for _, leader, _, _ in up_lines} == {"1", "2", "3"}
        assert all(leader == replica == isr for _, leader, replica, isr in up_lines)
        assert "Offline partitions: 0" in status

        assert main(["cluster", "status", "--zookeeper", f"127.0.0.1:{zk_port}"]) == 0
        from_zk = capsys.readouterr().out
        assert f"Controller: {controller}" in from_zk
        assert sorted(re.findall(r"Topic: up\t.*", from_zk)) == sorted(
            re.findall(r"Topic: up\t.*", status))

        # A replicated topic: every replica's log end offset, asked of its broker.
        admin.create_topics([NewTopic("copies", 1, 3)])["copies"].result(30)
        for i in range(7):
            producer.produce("copies", value=f"c{i}".encode())
        assert producer.flush(30) == 0
        seen: list[str] = []

        def replicas_caught_up() -> bool:
            assert main(["cluster", "status", "--replica-offsets",
                         "--bootstrap-server", bootstrap]) == 0
            seen[:] = [li for li in capsys.readouterr().out.splitlines()
                       if li.startswith("\tTopic: copies\t")]
            ends = seen[0].split("\tReplicaLogEndOffsets: ")[1]
            return sorted(ends.split(",")) == ["1=7", "2=7", "3=7"]

        deadline = time.monotonic() + 30
        while not replicas_caught_up():
            assert time.monotonic() < deadline, f"replicas did not catch up: {seen}"
            time.sleep(0.5)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0
        assert [p for p in pids if alive(p)] == []
    finally:
        if proc.poll() is None:
            # SIGTERM first: `ads cluster up` stops its children (each in its own session,
            # so killing it alone would leave them running).
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        reader.join(10)
        stdout.close()
