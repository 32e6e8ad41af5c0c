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
from confluent_kafka.admin import AdminClient

from ads.bench.produce import CLIENT_LOG, BenchError, ensure_topic
from ads.bench.stats import cpu_seconds, peak_rss_mb


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def await_metadata(bootstrap: str, proc: subprocess.Popen[Any] | None, deadline: float,
                   name: str, log_tail: Callable[[], str] = str) -> None:
    """Returns once a Metadata request to `bootstrap` lists a broker: the first answered
    request, the same test for every broker the suite starts. Fails if `proc` exits first
    or at `deadline` (time.monotonic()), quoting `log_tail()`."""
    admin = AdminClient({"bootstrap.servers": bootstrap,
                         "logger": CLIENT_LOG})  # type: ignore[dict-item]  # see delete_topic
    while True:
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"{name} exited with {proc.returncode}\n{log_tail()}".rstrip())
        try:
            if admin.list_topics(timeout=0.5).brokers:
                return
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            raise BenchError(f"{name} did not answer Metadata in time\n{log_tail()}".rstrip())
        time.sleep(0.05)


def delete_topic(bootstrap: str, name: str) -> None:
    """Best effort: frees the disk (and the page cache's dirty pages) between runs."""
    # confluent-kafka takes a logging.Logger for "logger"; its type hints allow only
    # str, int and float values.
    admin = AdminClient({"bootstrap.servers": bootstrap,
                         "logger": CLIENT_LOG})  # type: ignore[dict-item]  # see above
    with contextlib.suppress(Exception):
        admin.delete_topics([name], operation_timeout=30)[name].result(timeout=30)


def lifetime_usage(pid: int) -> dict[str, float | None]:
    """A process's CPU seconds since it started and its peak resident memory (VmHWM)."""
    return {"cpu_s": _round(cpu_seconds(pid), 2), "rss_peak_mb": _round(peak_rss_mb(pid), 1)}


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


class AdsBrokerProcess:
    """`ads broker` from this checkout, in a subprocess, on a free loopback port."""

    def __init__(self, data_dir: Path, log_path: Path, sets: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = free_port()
        self.sets = sets
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

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


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
