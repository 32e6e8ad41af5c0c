"""A broker in a subprocess (`ads broker`), for tests that kill or restart it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ads.bench.processes import free_port

MARKED_ENV = "ADS_TEST_BROKER_PROCESS"


class BrokerProcess:
    def __init__(self, data_dir: Path, port: int | None = None, *sets: str,
                 host: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        """`prefix`: a command the broker runs under (e.g. `ip netns exec NS`)."""
        self.data_dir = data_dir
        self.port = port or free_port()
        self.sets = sets
        self.host = host
        self.prefix = prefix
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        # conftest sets this for tests marked `broker_process`, so `-m "not broker_process"`
        # really leaves out every test that starts a broker in a subprocess.
        if not os.environ.get(MARKED_ENV):
            raise RuntimeError("a test that starts a broker process must be marked "
                               "@pytest.mark.broker_process")
        args = [*self.prefix, sys.executable, "-m", "ads.cli.main", "broker", "--data-dir",
                str(self.data_dir), "--host", self.host, "--port", str(self.port)]
        for s in self.sets:
            args += ["--set", s]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}: {self.log()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"broker did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(30)
