"""Kafka Connect in distributed mode on ADS: two workers of Apache Kafka's Connect runtime
(4.3.1, the newest release whose FileStream connectors are served; the jars `make test`
fetches, tests/kafka_connect/pom.xml) keep their
configs, offsets and status in compacted topics on three `ads broker` processes, and
Kafka's FileStream source and sink connectors move a file through a topic and back. The
worker running the tasks is then killed with SIGKILL: the other one takes them over and
what is appended to the file still arrives (at least once, as the sink promises)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource

from ads.bench.kafka import LOG4J
from broker_process import free_port
from cluster_support import Cluster, wait_until

pytestmark = pytest.mark.kafka_reference

WORKER_DEADLINE_S = 90
JARS = Path(__file__).parent.parent / "kafka_connect" / "target" / "jars"


class Worker:
    """One Connect worker process (`connect-distributed.sh`)."""

    def __init__(self, root: Path, name: str, bootstrap: str) -> None:
        self.root = root / name
        self.root.mkdir(parents=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (self.root / "log4j2.properties").write_text(LOG4J)
        (self.root / "worker.properties").write_text("\n".join([
            f"bootstrap.servers={bootstrap}",
            "group.id=ads-connect",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic=connect-configs",
            "offset.storage.topic=connect-offsets",
            "status.storage.topic=connect-status",
            "config.storage.replication.factor=3",
            "offset.storage.replication.factor=3",
            "status.storage.replication.factor=3",
            f"listeners=http://127.0.0.1:{self.port}",
            "offset.flush.interval.ms=500",
            # A lost worker's tasks go to the others after this (Kafka's default: 5 min).
            "scheduled.rebalance.max.delay.ms=2000",
            "session.timeout.ms=6000",
            "heartbeat.interval.ms=1000",
        ]) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        with (self.root / "worker.log").open("ab") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(  # noqa: S603
                ["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
                 "-cp", f"{JARS}/*", "org.apache.kafka.connect.cli.ConnectDistributed",
                 str(self.root / "worker.properties")],
                stdout=log, stderr=subprocess.STDOUT)
        return self

    def log(self) -> str:
        path = self.root / "worker.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(20)

    def rest(self, path: str, body: object | None = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=(
            "GET" if body is None else "POST"), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{path}: {exc.code} {exc.read()!r}\n{self.log()}") from exc


def wait_for(check: Callable[[], bool], what: str, workers: list[Worker],
             timeout_s: float) -> None:
    wait_until(check, what, timeout_s,
               lambda: "\n".join(f"--- {w.root.name}\n{w.log()}" for w in workers))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    assert JARS.is_dir(), f"Kafka's jars are fetched by `make test` into {JARS}"
    with Cluster(tmp_path / "ads", 3, "group.initial.rebalance.delay.ms=0").running() as c:
        yield c


def _task_worker(worker: Worker, connector: str) -> str:
    status = worker.rest(f"/connectors/{connector}/status")
    assert isinstance(status, dict)
    tasks = status["tasks"]
    assert tasks and all(t["state"] == "RUNNING" for t in tasks), status
    return str(tasks[0]["worker_id"])


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_kafka_connect_distributed_file_connectors_survive_a_worker_kill(
        cluster: Cluster, tmp_path: Path) -> None:
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    first = [f"first-{i}" for i in range(50)]
    source.write_text("\n".join(first) + "\n")
    workers = [Worker(tmp_path, f"worker-{n}", cluster.bootstrap) for n in (1, 2)]
    try:
        for w in workers:
            w.start()
        wait_for(lambda: all(w.rest("/connectors") == [] for w in workers),
                 "both workers serving their REST API", workers, WORKER_DEADLINE_S)
        workers[0].rest("/connectors", {"name": "file-in", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(source), "topic": "connect-data", "tasks.max": "1"}})
        workers[0].rest("/connectors", {"name": "file-out", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(sink), "topics": "connect-data", "tasks.max": "1"}})
        wait_for(lambda: _lines(sink) == first, "the file copied through the topic",
                 workers, WORKER_DEADLINE_S)

        # The internal topics are compacted, as Connect asks when it creates them.
        admin = cluster.admin()
        for topic in ("connect-configs", "connect-offsets", "connect-status"):
            res = ConfigResource(ConfigResource.Type.TOPIC, topic)
            configs = admin.describe_configs([res])[res].result(10)
            assert configs["cleanup.policy"].value == "compact", topic

        # The worker running the source's task is killed; the other takes over its tasks.
        doomed = _task_worker(workers[0], "file-in")
        victim = next(w for w in workers if doomed.endswith(f":{w.port}"))
        survivor = next(w for w in workers if w is not victim)
        victim.kill()
        wait_for(lambda: _task_worker(survivor, "file-in").endswith(f":{survivor.port}")
                 and _task_worker(survivor, "file-out").endswith(f":{survivor.port}"),
                 "the tasks running on the surviving worker", workers, WORKER_DEADLINE_S)
        more = [f"more-{i}" for i in range(50)]
        with source.open("a") as f:
            f.write("\n".join(more) + "\n")
        wait_for(lambda: set(first + more) <= set(_lines(sink)),
                 "the appended lines copied too", workers, WORKER_DEADLINE_S)
        copied = _lines(sink)
        assert not set(copied) - set(first + more)  # nothing that was not in the file
        # In order, each line at least once (the sink redelivers after a failover).
        assert [line for i, line in enumerate(copied) if line not in copied[:i]] == (
            first + more)
    finally:
        for w in workers:
            w.kill()
