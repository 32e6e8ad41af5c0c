"""What the benchmark suite runs beside the workloads: the ADS broker under test in a
subprocess, the py-spy profiler attached to it, and the facts about the machine the results
are read against (the loopback bandwidth, CPU, memory, versions)."""

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
from pathlib import Path
from typing import Any

from confluent_kafka import libversion
from confluent_kafka.admin import AdminClient

from ads.bench.produce import CLIENT_LOG, BenchError, ensure_topic


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AdsBrokerProcess:
    """`ads broker` from this checkout, in a subprocess, on a free loopback port."""

    def __init__(self, data_dir: Path, log_path: Path, sets: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = _free_port()
        self.sets = sets
        self._proc: subprocess.Popen[bytes] | None = None

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
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BenchError(f"ADS broker exited with {self._proc.returncode}; "
                                 f"see {self.log_path}")
            with contextlib.suppress(OSError), \
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return self
            time.sleep(0.05)
        self.stop()
        raise BenchError(f"ADS broker did not listen within {timeout_s:g} s")

    def create_topic(self, name: str, partitions: int) -> None:
        ensure_topic(self.bootstrap, name, partitions)

    def delete_topic(self, name: str) -> None:
        """Best effort: frees the disk (and the page cache's dirty pages) between runs."""
        # confluent-kafka takes a logging.Logger for "logger"; its type hints allow only
        # str, int and float values.
        admin = AdminClient({"bootstrap.servers": self.bootstrap,
                             "logger": CLIENT_LOG})  # type: ignore[dict-item]  # see above
        with contextlib.suppress(Exception):
            admin.delete_topics([name], operation_timeout=30)[name].result(timeout=30)

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
