"""Apache Kafka's own broker as a peer of the benchmark suite (`ads bench suite --peer kafka`).

`KafkaPeer` runs one Kafka 4.x broker in KRaft mode, broker and controller in one JVM
(`process.roles=broker,controller`, one node), from a directory of jars: Kafka's broker jar
and its runtime dependencies, as Maven resolves them (the repository's
`tests/kafka_reference/pom.xml` and `make test-deps` put them in
`tests/kafka_reference/target/jars`). Nothing is downloaded here.

Start, in the directory it is given (`work_dir`):
1. `server.properties` and `log4j2.properties` are written there; `log.dirs` is
   `work_dir/data`, so the suite puts Kafka's log on the same disk as ADS's.
2. `java -cp 'jars/*' kafka.tools.StorageTool format` writes the log directory's
   meta.properties and the bootstrap metadata (a second, short JVM).
3. `java -Xmx1g -Xms1g ... -cp 'jars/*' kafka.Kafka server.properties` runs the broker; the
   start returns once a Metadata request lists the broker, or fails at its deadline.

`start_to_answer_s` is the time from launching the broker's JVM to that first answer, and
`format_s` the storage format before it. Stop sends SIGTERM to the JVM's process id, then
SIGKILL if it has not exited by the deadline; on Linux the JVM also gets SIGKILL when the
thread that started it ends, so a suite killed before its teardown leaves no broker running.
Both JVMs write to `work_dir/kafka.log`, quoted (its end) in every failure. Not thread-safe.

`KafkaCluster` runs three such nodes (heaps of 512 MiB) as one cluster for the replicated
workloads: every node is broker and controller, the quorum is all three
(`controller.quorum.voters`), all are formatted with one cluster id, and internal topics
have three replicas.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from ads.bench.processes import await_metadata, delete_topic, free_port
from ads.bench.produce import BenchError, quiet_admin

# The heap of Kafka's start script, and its collector settings: the broker as its users run it.
BENCH_JVM_OPTIONS = ("-Xmx1g", "-Xms1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                     "-Djava.awt.headless=true")
LOG4J = """\
rootLogger.level=INFO
rootLogger.appenderRef.out.ref=out
appender.out.type=Console
appender.out.name=out
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c)%n
"""
# What the suite sets on top of server_properties: a deleted topic's files go at once
# rather than a minute later, in the middle of whatever runs then (KafkaPeer.delete_topic
# waits for them), and the task that deletes them runs from the start, not 30 s after it.
BENCH_SETTINGS = {"log.segment.delete.delay.ms": "0", "log.initial.task.delay.ms": "0"}
LOG_TAIL = 8000  # how much of the broker's log a failure quotes (its end)
_PR_SET_PDEATHSIG = 1


def kafka_jars_problem(jars: Path) -> str | None:
    """Why `jars` cannot run a Kafka broker, or None if it looks like it can."""
    if not jars.is_dir():
        return f"{jars} is not a directory"
    if not any(jars.glob("kafka_2.13-*.jar")):
        return (f"{jars} holds no Kafka broker jar (kafka_2.13-*.jar); `make test-deps` "
                "copies Kafka's jars into tests/kafka_reference/target/jars")
    if shutil.which("java") is None:
        return "no Java runtime on the PATH (java)"
    return None


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec function giving the child SIGKILL when this thread ends (Linux's prctl)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the child

    def set_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return set_signal


def server_properties(data_dir: Path, port: int, controller_port: int,
                      overrides: Mapping[str, str], node_id: int = 1,
                      voters: str | None = None, replicas: int = 1) -> str:
    """A node with both roles on loopback: alone, or node `node_id` of the quorum `voters`
    (`id@host:port,...`); internal topics with `replicas` replicas (every broker),
    everything else at Kafka's defaults unless `overrides` says otherwise."""
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters or f"{node_id}@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min(replicas, 2)),
        "group.initial.rebalance.delay.ms": "0",
        **overrides,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


class KafkaPeer:
    """One Apache Kafka broker (KRaft, combined roles, one node) in a subprocess."""

    def __init__(self, jars: Path, work_dir: Path, overrides: Mapping[str, str] | None = None,
                 jvm_options: tuple[str, ...] = BENCH_JVM_OPTIONS, node_id: int = 1) -> None:
        """`jars`: Kafka's jars; `work_dir`: an empty directory for the data, the configs
        and the log; `overrides`: server.properties keys set on top of the defaults.
        A node of a cluster (`KafkaCluster`) also gets its quorum's `voters`, the
        `cluster_id` every node is formatted with, and the `replicas` of internal topics."""
        self.jars = jars
        self.work_dir = work_dir
        self.overrides = dict(overrides or {})
        self.jvm_options = jvm_options
        self.node_id = node_id
        self.voters: str | None = None
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        self.replicas = 1
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.log_path = work_dir / "kafka.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.format_s: float | None = None
        self.start_to_answer_s: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "Kafka not started"
        return self.proc.pid

    @property
    def data_dir(self) -> Path:
        return self.work_dir / "data"

    def log(self, tail: int | None = None) -> str:
        """The broker's log (stdout and stderr of both JVMs), or its last `tail` chars."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text if tail is None else text[-tail:]

    def _java(self, main_class: str, *args: str) -> list[str]:
        problem = kafka_jars_problem(self.jars)
        if problem is not None:
            raise BenchError(f"cannot run Kafka: {problem}")
        java = shutil.which("java")
        assert java is not None  # kafka_jars_problem checked it
        log4j = self.work_dir / "log4j2.properties"
        return [java, *self.jvm_options, f"-Dlog4j2.configurationFile={log4j}",
                "-cp", f"{self.jars.resolve()}/*", main_class, *args]

    def start(self, timeout_s: float = 90.0) -> KafkaPeer:
        deadline = time.monotonic() + timeout_s
        self.prepare(deadline)
        launched = self.launch()
        try:
            await_metadata(self.bootstrap, self.proc, deadline, "Kafka", self.log_tail)
        except BaseException:
            self.stop()
            raise
        self.start_to_answer_s = time.monotonic() - launched
        return self

    def prepare(self, deadline: float) -> None:
        """Writes the configs and formats the log directory (steps 1 and 2)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "server.properties").write_text(server_properties(
            self.data_dir, self.port, self.controller_port, self.overrides, self.node_id,
            self.voters, self.replicas))
        (self.work_dir / "log4j2.properties").write_text(LOG4J)
        self._format(self.work_dir / "server.properties", deadline)

    def launch(self) -> float:
        """Starts the broker's JVM (step 3) without waiting; returns when (monotonic)."""
        with self.log_path.open("ab") as log:
            launched = time.monotonic()
            self.proc = subprocess.Popen(  # noqa: S603 - our own command line
                self._java("kafka.Kafka", str(self.work_dir / "server.properties")),
                stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent())  # noqa: PLW1509 - prctl only, no locks
        return launched

    def create_topic(self, name: str, partitions: int, timeout_s: float = 120.0,
                     replication_factor: int = 1, config: Mapping[str, str] | None = None
                     ) -> None:
        """CreateTopics, then waits until every partition answers ListOffsets.

        Kafka answers CreateTopics, and lists the new leaders in its metadata, before its
        broker side has made the partitions' logs (about 10 ms each on the 2-core machine);
        until then a produce gets NOT_LEADER_OR_FOLLOWER and the client retries after a
        backoff. Without this wait a 1,000-partition produce measures the log creation."""
        deadline = time.monotonic() + timeout_s
        admin = self._admin()
        future = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                               replication_factor=replication_factor,
                                               config=dict(config or {}))],
                                     operation_timeout=timeout_s)[name]
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            raise BenchError(f"Kafka did not create topic {name}: {exc.args[0].str()}") from exc
        query = {TopicPartition(name, p): OffsetSpec.earliest() for p in range(partitions)}
        while True:
            answers = admin.list_offsets(query, request_timeout=10)
            pending = 0
            for answer in answers.values():
                try:
                    answer.result()
                except KafkaException:
                    pending += 1
            if not pending:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"{pending} of {partitions} partitions of {name} were not "
                                 f"ready within {timeout_s:g} s")
            time.sleep(0.1)

    def delete_topic(self, name: str, timeout_s: float = 120.0) -> None:
        """DeleteTopics, then waits until the partitions' directories are gone from the log
        directory (at once with BENCH_SETTINGS, else after `log.segment.delete.delay.ms`), so
        that no deletion runs in the background of the next measurement; gives up after
        `timeout_s`. Best effort, like ADS's."""
        delete_topic(self.bootstrap, name)
        self.await_deleted(name, time.monotonic() + timeout_s)

    def await_deleted(self, name: str, deadline: float) -> None:
        """Waits until no directory of topic `name` is left in the log directory."""
        own = re.compile(re.escape(name) + r"-\d+($|\.)")
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if not any(own.match(entry.name) for entry in self.data_dir.iterdir()):
                    return
            time.sleep(0.1)

    def _admin(self) -> AdminClient:
        return quiet_admin(self.bootstrap)

    def log_tail(self) -> str:
        return self.log(LOG_TAIL)

    def _format(self, config: Path, deadline: float, *options: str) -> None:
        """`kafka-storage format` of the log directory; `options` go to the tool as well."""
        cluster_id = self.cluster_id
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            try:
                formatted = subprocess.run(  # noqa: S603 - our own command line
                    # `=`: an id may start with '-', which the tool would take for an option
                    self._java("kafka.tools.StorageTool", "format",
                               f"--cluster-id={cluster_id}", f"--config={config}", *options),
                    stdout=log, stderr=subprocess.STDOUT, check=False,
                    timeout=max(deadline - started, 1.0))
            except subprocess.TimeoutExpired as exc:
                raise BenchError(f"Kafka's storage format did not finish in time:\n"
                                 f"{self.log_tail()}") from exc
        if formatted.returncode != 0:
            raise BenchError(f"Kafka's storage format failed ({formatted.returncode}):\n"
                             f"{self.log_tail()}")
        self.format_s = time.monotonic() - started

    def terminate(self) -> None:
        """Asks the broker to stop (SIGTERM) without waiting; `stop` waits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """Stops the broker (SIGTERM, then SIGKILL after `timeout_s`); its exit status."""
        self.terminate()
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                return proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait(10)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing of the broker's shutdown runs."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait(10)

    def relaunch(self, timeout_s: float = 90.0) -> None:
        """Starts the broker again on its formatted log directory, waiting until it
        answers."""
        deadline = time.monotonic() + timeout_s
        self.launch()
        await_metadata(self.bootstrap, self.proc, deadline, "Kafka", self.log_tail)

    def __enter__(self) -> KafkaPeer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# The replicated workloads' heaps: three JVMs share the machine with three ADS brokers.
CLUSTER_JVM_OPTIONS = ("-Xmx512m", "-Xms512m", *BENCH_JVM_OPTIONS[2:])


class KafkaCluster:
    """`size` Kafka nodes in KRaft mode, each broker and controller, the controller quorum
    made of all of them, for the replicated workloads; topics are created with a replica
    on every node and `topic_config` (REPLICATED_TOPIC in the suite)."""

    def __init__(self, jars: Path, work_dir: Path, size: int = 3,
                 overrides: Mapping[str, str] | None = None,
                 topic_config: Mapping[str, str] | None = None) -> None:
        self.work_dir = work_dir
        self.topic_config = dict(topic_config or {})
        self.nodes = [KafkaPeer(jars, work_dir / f"node-{n}", overrides, CLUSTER_JVM_OPTIONS,
                                node_id=n) for n in range(1, size + 1)]
        voters = ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}"
                          for node in self.nodes)
        for node in self.nodes:
            node.voters = voters
            node.cluster_id = self.nodes[0].cluster_id
            node.replicas = size
        self.format_s: float | None = None
        self.start_to_answer_s: float | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(node.pid for node in self.nodes)

    def log_tail(self) -> str:
        return "\n".join(f"node {node.node_id}:\n{node.log(LOG_TAIL // len(self.nodes))}"
                         for node in self.nodes)

    def start(self, timeout_s: float = 120.0) -> KafkaCluster:
        """Formats every node, launches them all (a quorum forms only once a majority
        runs), and returns once Metadata lists every broker; `start_to_answer_s` counts
        from the first launch."""
        deadline = time.monotonic() + timeout_s
        try:
            for node in self.nodes:
                node.prepare(deadline)
            self.format_s = sum(node.format_s or 0.0 for node in self.nodes)
            launched = min(node.launch() for node in self.nodes)
            await_metadata(self.bootstrap, None, deadline, "the Kafka cluster", self.log_tail,
                           len(self.nodes))
        except BaseException:
            self.stop()
            raise
        self.start_to_answer_s = time.monotonic() - launched
        return self

    def create_topic(self, name: str, partitions: int, timeout_s: float = 120.0) -> None:
        self.nodes[0].create_topic(name, partitions, timeout_s, len(self.nodes),
                                   self.topic_config)

    def delete_topic(self, name: str, timeout_s: float = 120.0) -> None:
        delete_topic(self.bootstrap, name)
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            node.await_deleted(name, deadline)

    def stop(self) -> None:
        for node in self.nodes:  # SIGTERM to all first: each stops while the quorum lives
            node.terminate()
        deadline = time.monotonic() + 30.0
        for node in self.nodes:
            node.stop(max(deadline - time.monotonic(), 1.0))
