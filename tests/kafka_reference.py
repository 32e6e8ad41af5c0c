"""Apache Kafka's own broker as a reference for tests (docs/kafka-reference.md).

`KafkaReference` runs one Kafka broker in KRaft mode, broker and controller in one JVM
(`process.roles=broker,controller`), from the jars `make test-deps` copies out of the
local Maven repository (tests/kafka_reference/pom.xml names the version). A reference test
sends the same client calls to it and to an ADS broker and asserts the answers agree.

    with KafkaReference(tmp_path) as kafka:
        AdminClient({"bootstrap.servers": kafka.bootstrap}) ...

Start: `kafka.tools.StorageTool format` writes the log directory's meta.properties and the
bootstrap metadata (a second, short JVM), then `kafka.Kafka server.properties` runs the
broker; the start returns once a Metadata request lists the broker, within a deadline.
Ports are free ones on 127.0.0.1, the heap is capped, the JIT stops at its first tier (a
test broker lives for seconds; measured, it starts a little sooner so), and the internal
topics have one partition each. The broker's log goes to a file beside its data
and is quoted in every failure. Stop sends SIGTERM to the broker's process id, then SIGKILL
if it has not exited by the deadline; and the JVM is killed with the thread that started it
(so start it from the test's main thread), should the test process die before its teardown.
"""

from __future__ import annotations

import base64
import ctypes
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from broker_process import free_port

T = TypeVar("T")
JARS = Path(__file__).parent / "kafka_reference" / "target" / "jars"
JVM_OPTIONS = ("-Xmx512m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
LOG4J = """\
rootLogger.level=INFO
rootLogger.appenderRef.out.ref=out
appender.out.type=Console
appender.out.name=out
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c)%n
"""
# how much of the broker's log a failure quotes (its end)
LOG_TAIL = 8000
# Linux's prctl(PR_SET_PDEATHSIG): the JVM gets SIGKILL when the thread that started it
# ends, so a test process that dies without its teardown (killed, or crashed in a native
# library) leaves no broker behind. Looked up here, not in the forked child.
_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _server_properties(data_dir: Path, port: int, controller_port: int,
                       overrides: dict[str, str]) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "1",
        "num.io.threads": "2",
        **overrides,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class KafkaReference:
    """One Apache Kafka broker (KRaft, combined roles) in a subprocess; not thread-safe."""

    def __init__(self, work_dir: Path, overrides: dict[str, str] | None = None) -> None:
        """`work_dir`: an empty directory for the data, the configs and the log;
        `overrides`: server.properties keys set on top of the defaults above."""
        self.work_dir = work_dir
        self.overrides = dict(overrides or {})
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.log_path = work_dir / "kafka.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self, tail: int | None = None) -> str:
        """The broker's log (stdout and stderr of both JVMs), or its last `tail` chars."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text if tail is None else text[-tail:]

    def _java(self, main_class: str, *args: str) -> list[str]:
        java = shutil.which("java")
        assert java, "a Java runtime is installed by `make test` (openjdk-17-jre-headless)"
        assert any(JARS.glob("kafka_2.13-*.jar")), (
            f"Kafka's jars are copied to {JARS} by `make test-deps` (mvn, "
            "tests/kafka_reference/pom.xml)")
        log4j = self.work_dir / "log4j2.properties"
        return [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}",
                "-cp", f"{JARS}/*", main_class, *args]

    def start(self, timeout: float = 60.0) -> KafkaReference:
        started = time.monotonic()
        deadline = started + timeout
        data_dir = self.work_dir / "data"
        config = self.work_dir / "server.properties"
        config.write_text(_server_properties(data_dir, self.port, self.controller_port,
                                             self.overrides))
        (self.work_dir / "log4j2.properties").write_text(LOG4J)
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        with self.log_path.open("ab") as log:
            formatted = subprocess.run(  # noqa: S603 - our own command line
                # `=`: an id may start with '-', which the tool would take for an option
                self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                           f"--config={config}"),
                stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False)
            assert formatted.returncode == 0, (
                f"kafka-storage format failed:\n{self.log(LOG_TAIL)}")
            self.proc = subprocess.Popen(  # noqa: S603
                self._java("kafka.Kafka", str(config)), stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent)  # noqa: PLW1509 - prctl only, no locks
        try:
            self._await_ready(deadline)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _await_ready(self, deadline: float) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"Kafka exited with {self.proc.returncode}:\n{self.log(LOG_TAIL)}")
            try:
                if admin.list_topics(timeout=0.5).brokers:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Kafka did not answer Metadata in time:\n{self.log(LOG_TAIL)}")
            time.sleep(0.1)

    def stop(self, timeout: float = 20.0) -> int | None:
        """Stops the broker (SIGTERM, then SIGKILL after `timeout`); its exit status."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait(10)

    def __enter__(self) -> KafkaReference:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# librdkafka's admin calls do not mark these retriable; Kafka answers them while its
# coordinators load the internal topics the first group or transaction request creates.
COORDINATOR_NOT_READY = frozenset({KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                   KafkaError.COORDINATOR_NOT_AVAILABLE,
                                   KafkaError.NOT_COORDINATOR})


def retry_retriable(call: Callable[[], T], timeout: float = 30.0) -> T:
    """`call()`, called again while it fails with a retriable error (a coordinator still
    loading its partition just after the start, for instance), until `timeout`; used the
    same way for both brokers a test compares."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            retriable = error.retriable() or error.code() in COORDINATOR_NOT_READY
            if not retriable or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
