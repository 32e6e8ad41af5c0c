"""What the benchmark suite runs beside the workloads: the ADS broker under test in a
subprocess, the wait until a broker answers, the py-spy profiler attached to it, and the
facts about the machine the results are read against (the loopback bandwidth, CPU, memory,
versions)."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, libversion

from ads.bench.produce import BenchError, ensure_topic, quiet_admin
from ads.bench.stats import cpu_seconds, peak_rss_mb, total
from ads.testing.zookeeper import ZooKeeperMissingError, ZooKeeperServer

_GIVEN_PORTS: set[int] = set()


def free_port() -> int:
    """A loopback port free now and not given before by this process: the kernel may hand
    a port just released to the next bind to 0, so two brokers set up before either starts
    could otherwise be given one port."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port


def await_metadata(bootstrap: str, proc: subprocess.Popen[Any] | None, deadline: float,
                   name: str, log_tail: Callable[[], str] = str, brokers: int = 1) -> None:
    """Returns once a Metadata request to `bootstrap` lists `brokers` brokers: the first
    answered request, the same test for every broker the suite starts (a cluster's: all of
    its brokers). Fails if `proc` exits first or at `deadline` (time.monotonic()), quoting
    `log_tail()`."""
    admin = quiet_admin(bootstrap)
    while True:
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"{name} exited with {proc.returncode}\n{log_tail()}".rstrip())
        try:
            if len(admin.list_topics(timeout=0.5).brokers) >= brokers:
                return
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            raise BenchError(f"{name} did not answer Metadata in time\n{log_tail()}".rstrip())
        time.sleep(0.05)


def delete_topic(bootstrap: str, name: str) -> None:
    """Best effort: frees the disk (and the page cache's dirty pages) between runs."""
    admin = quiet_admin(bootstrap)
    with contextlib.suppress(Exception):
        admin.delete_topics([name], operation_timeout=30)[name].result(timeout=30)


def lifetime_usage(*pids: int) -> dict[str, float | None]:
    """CPU seconds since start and peak resident memory (VmHWM) of a broker's processes
    (a cluster's: their sums)."""
    return {"cpu_s": _round(total(cpu_seconds(pid) for pid in pids), 2),
            "rss_peak_mb": _round(total(peak_rss_mb(pid) for pid in pids), 1)}


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


class AdsBrokerProcess:
    """`ads broker` from this checkout, in a subprocess, on a free loopback port: alone
    (embedded metadata), or broker `node_id` of a cluster on the ZooKeeper `zookeeper`."""

    def __init__(self, data_dir: Path, log_path: Path, sets: tuple[str, ...] = (),
                 node_id: int | None = None, zookeeper: str | None = None) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = free_port()
        self.sets = sets
        self.node_id = node_id
        self.zookeeper = zookeeper
        self._proc: subprocess.Popen[bytes] | None = None
        self.start_to_answer_s: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def start(self, timeout_s: float = 30.0) -> AdsBrokerProcess:
        args = [sys.executable, "-m", "ads.cli.main", "broker", "--data-dir",
                str(self.data_dir), "--host", "127.0.0.1", "--port", str(self.port)]
        if self.node_id is not None:
            args += ["--node-id", str(self.node_id)]
        if self.zookeeper is not None:
            args += ["--zookeeper", self.zookeeper]
        for s in self.sets:
            args += ["--set", s]
        with self.log_path.open("ab") as log:
            launched = time.monotonic()
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            await_metadata(self.bootstrap, self._proc, launched + timeout_s, "ADS broker",
                           lambda: f"see {self.log_path}")
        except BaseException:
            self.stop()
            raise
        self.start_to_answer_s = time.monotonic() - launched
        return self

    def create_topic(self, name: str, partitions: int) -> None:
        ensure_topic(self.bootstrap, name, partitions)

    def delete_topic(self, name: str) -> None:
        delete_topic(self.bootstrap, name)

    def terminate(self) -> None:
        """Asks the broker to stop (SIGTERM) without waiting; `stop` waits."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def stop(self, timeout_s: float = 30.0) -> None:
        self.terminate()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing of the broker's shutdown runs."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait(10)

    def relaunch(self, timeout_s: float = 30.0) -> None:
        """Starts the broker again on its data and port, waiting until it answers."""
        self.start(timeout_s)


# The replicated workloads' topics: acks=all waits for two of the three replicas.
REPLICATED_TOPIC = {"min.insync.replicas": "2"}


class AdsCluster:
    """`size` `ads broker` processes on a ZooKeeper server of their own (Debian's
    `zookeeper`), for the replicated workloads; topics are created with a replica on every
    broker and REPLICATED_TOPIC's settings."""

    def __init__(self, work_dir: Path, size: int = 3, sets: tuple[str, ...] = ()) -> None:
        self.work_dir = work_dir
        self.zookeeper = ZooKeeperServer(work_dir / "zookeeper", free_port())
        # A cluster stopped whole: a broker whose partitions cannot move asks the controller
        # once, not three times 5 s apart.
        sets = ("controlled.shutdown.max.retries=1", *sets)
        self.brokers = [AdsBrokerProcess(work_dir / f"broker-{n}", work_dir / f"broker-{n}.log",
                                         sets, node_id=n, zookeeper=self.zookeeper.connect)
                        for n in range(1, size + 1)]
        self.start_to_answer_s: float | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(broker.pid for broker in self.brokers)

    def start(self, timeout_s: float = 60.0) -> AdsCluster:
        """ZooKeeper, then the brokers one after the other; returns once Metadata lists
        every broker. `start_to_answer_s` counts from the first broker's launch."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.zookeeper.start()
        except (ZooKeeperMissingError, RuntimeError, TimeoutError) as exc:
            raise BenchError(f"cannot start ZooKeeper for the ADS cluster: {exc}") from exc
        launched = time.monotonic()
        try:
            for broker in self.brokers:
                broker.start(timeout_s)
            await_metadata(self.bootstrap, None, launched + timeout_s, "the ADS cluster",
                           lambda: f"see {self.work_dir}/broker-*.log", len(self.brokers))
        except BaseException:
            self.stop()
            raise
        self.start_to_answer_s = time.monotonic() - launched
        return self

    def create_topic(self, name: str, partitions: int) -> None:
        ensure_topic(self.bootstrap, name, partitions, replication_factor=len(self.brokers),
                     topic_config=REPLICATED_TOPIC)

    def delete_topic(self, name: str) -> None:
        delete_topic(self.bootstrap, name)

    def stop(self) -> None:
        for broker in self.brokers:  # all at once: each waits only for its own shutdown
            broker.terminate()
        for broker in self.brokers:
            broker.stop()
        self.zookeeper.stop()


class Profiler:
    """py-spy attached to the ADS broker for one measured run (collapsed stacks)."""

    def __init__(self, pid: int, out: Path) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            raise BenchError("--profile needs py-spy (pip install 'ads[bench]')")
        self.out = out
        self._proc = subprocess.Popen(  # noqa: S603 - the profiler, fixed arguments
            [exe, "record", "--pid", str(pid), "--rate", "200", "--function", "--format",
             "raw", "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # py-spy attaches asynchronously

    def stop(self) -> None:
        self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)


def measure_loopback(total_bytes: int, chunk: int = 1 << 20) -> float:
    """MB/s of one TCP connection over loopback, Python sender and receiver."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        received = [0]

        def receive() -> None:
            conn, _ = server.accept()
            buf = bytearray(chunk)
            with conn:
                while received[0] < total_bytes:
                    n = conn.recv_into(buf)
                    if not n:
                        break
                    received[0] += n

        thread = threading.Thread(target=receive, daemon=True)
        thread.start()
        data = bytes(chunk)
        with socket.create_connection(("127.0.0.1", port)) as s:
            start = time.perf_counter()
            sent = 0
            while sent < total_bytes:
                s.sendall(data)
                sent += chunk
            thread.join()
            elapsed = time.perf_counter() - start
    return received[0] / elapsed / 1e6


def machine() -> dict[str, Any]:
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        memory = f"{kb / 1024 / 1024:.0f}"
    return {"cpu_model": model, "cores": os.cpu_count(), "memory_gb": memory,
            "kernel": platform.release(), "python": platform.python_version(),
            "librdkafka": libversion()[0]}
