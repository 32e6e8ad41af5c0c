"""A Spark standalone cluster for tests: one master and N workers started from the
`pyspark` package's own `bin/spark-class`, on loopback, each JVM in a process group of its
own (a worker's executors are its children, in its group), stopped by those ids."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from broker_process import free_port

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
_START_S = 120.0
_STOP_S = 20.0


class StandaloneCluster:
    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1,
                 memory: str = "512m") -> None:
        self.workdir = workdir
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self.worker_ui_ports = [free_port() for _ in range(workers)]
        self.processes: list[subprocess.Popen[bytes]] = []
        self.groups: list[int] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
                    SPARK_LOG_DIR=str(self.workdir / "logs"),
                    # No REST submission server: it would take the fixed port 6066.
                    SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")

    def application_conf(self, events: Path) -> dict[str, str]:
        """An application's Spark settings: an executor of one core on each worker, tasks
        only once all have registered (so each worker gets some), and an uncompressed
        event log in `events` that says which executor ran which task."""
        return {"spark.executor.memory": "512m", "spark.executor.cores": "1",
                "spark.cores.max": str(self.workers),
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": str(events), "spark.eventLog.compress": "false"}

    def _spawn(self, name: str, *args: str) -> None:
        with (self.workdir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen([str(SPARK_CLASS), *args], stdout=log,
                                       stderr=subprocess.STDOUT, env=self.env(),
                                       start_new_session=True)
        self.processes.append(process)
        self.groups.append(process.pid)

    def start(self) -> StandaloneCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn("master", "org.apache.spark.deploy.master.Master",
                        "--host", "127.0.0.1", "--port", str(self.port),
                        "--webui-port", str(self.ui_port))
            for i, ui_port in enumerate(self.worker_ui_ports):
                self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                            "--host", "127.0.0.1", "--cores", str(self.cores),
                            "--memory", self.memory, "--webui-port", str(ui_port),
                            "--work-dir", str(self.workdir / f"worker-{i}"), self.url)
            self._wait(lambda: self.master_state().get("aliveworkers") == self.workers,
                       "workers registered with the master")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + _START_S
        while time.monotonic() < deadline:
            for p in self.processes:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited ({p.returncode}) before {what}; "
                                       f"logs in {self.workdir}")
            try:
                if ready():
                    return
            except (OSError, ValueError):
                # The web UI is not up yet, or up before its JSON endpoint: while it starts
                # the master answers /json/ with its HTML page.
                pass
            time.sleep(0.5)
        raise TimeoutError(f"no {what} within {_START_S:.0f} s; logs in {self.workdir}")

    @staticmethod
    def _json(port: int) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=5) as r:  # noqa: S310 - loopback
            data: dict[str, Any] = json.load(r)
            return data

    def master_state(self) -> dict[str, Any]:
        return self._json(self.ui_port)

    def worker_states(self) -> list[dict[str, Any]]:
        return [self._json(port) for port in self.worker_ui_ports]

    def alive_groups(self) -> list[int]:
        """The process groups of this cluster that still have a process."""
        alive = []
        for group in self.groups:
            try:
                os.killpg(group, 0)
                alive.append(group)
            except ProcessLookupError:
                pass
        return alive

    def stop(self) -> None:
        """Workers first (each takes its executors with it), then the master: SIGTERM to
        each process group, SIGKILL to any group still there after a bounded wait."""
        for p in reversed(self.processes):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_S
        for p in reversed(self.processes):
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        for group in self.alive_groups():  # an executor left in its worker's group
            os.killpg(group, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.alive_groups() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.processes.clear()
