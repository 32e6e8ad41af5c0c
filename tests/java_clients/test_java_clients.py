"""Apache Kafka's own Java client (kafka-clients 4.4.0, and 3.9.1) against three `ads
broker` processes on a real ZooKeeper, every topic with replication factor 3.

Each test runs one scenario of the Java programs in `tests/java` (docs/java-clients.md) in
its own JVM and passes when the program exits 0 having printed `PASS <scenario>`; the
program checks real values itself (offsets, record contents, counts, error classes) and
prints what it saw, which pytest shows when a test fails, with the tail of each broker's
log. `make test` builds the programs (Maven, `tests/java/target/`); the module refuses to
run without them rather than skip. The scenarios share one cluster per module; the
failover scenario, which kills a leader, runs last for each client version and restarts
the broker it killed.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]

JAVA_DIR = Path(__file__).parents[1] / "java"
CLIENT_VERSIONS = ["4.4.0", "3.9.1"]
CONSUMER_PROTOCOL_SESSION_MS = 6000
CLUSTER_SETTINGS = (
    "default.replication.factor=3",
    "transaction.state.log.num.partitions=3",
    # KIP-848 members heartbeat at the interval the coordinator gives them; each step of
    # a reconciliation waits for one heartbeat. Their session timeout is the coordinator's
    # too (45 s by default): shorter, for the crashed member's scenario.
    "group.consumer.heartbeat.interval.ms=1000",
    f"group.consumer.session.timeout.ms={CONSUMER_PROTOCOL_SESSION_MS}",
)
# Every scenario's own deadline (the program halts itself past it) and pytest's, above it.
SCENARIO_DEADLINE_S = 100
PROCESS_TIMEOUT_S = SCENARIO_DEADLINE_S + 20
# A small JVM per program: two cores run three brokers, ZooKeeper and the programs.
JVM_OPTIONS = ("-Xss1m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

# Each scenario with the arguments it takes.
SCENARIOS: dict[str, tuple[str, ...]] = {name: () for name in [
    "produce-codecs",
    "transactions",
    "transactions-fencing",
    "consumer-positions",
    "group-eager",
    "group-cooperative",
    "group-consumer-protocol",
    "group-static",
    "group-crash",
    "group-consumer-protocol-static",
    "admin",
    "admin-groups",
    "admin-extra",
    "admin-log-dirs",
]} | {"group-consumer-protocol-crash": (f"session.ms={CONSUMER_PROTOCOL_SESSION_MS}",)}


def java_command(version: str, scenario: str, bootstrap: str, *args: str) -> list[str]:
    build = JAVA_DIR / "target" / f"kafka-{version}"
    assert (build / "classes").is_dir() and (build / "lib").is_dir(), (
        f"the Java programs are built by `make test` (Maven, {JAVA_DIR}/pom.xml): "
        f"{build} is missing")
    classpath = f"{build / 'classes'}:{build / 'lib'}/*"
    return ["java", *JVM_OPTIONS, "-cp", classpath, "ads.javaclients.Main", scenario, bootstrap,
            f"deadline.s={SCENARIO_DEADLINE_S}", *args]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    with Cluster(tmp_path_factory.mktemp("java-clients"), 3, *CLUSTER_SETTINGS).running() as c:
        yield c


def broker_logs(c: Cluster) -> str:
    return "\n".join(f"--- broker {n}\n{b.log()[-3000:]}" for n, b in c.brokers.items())


def check_passed(c: Cluster, scenario: str, returncode: int, output: str) -> None:
    print(output)  # what the program saw, shown by `pytest -rP`
    assert returncode == 0 and f"PASS {scenario}" in output.splitlines(), (
        f"scenario {scenario} exited {returncode}:\n{output}\n{broker_logs(c)}")


# Scenarios of API the 3.x client does not have: the coordinator's regular expressions
# (SubscriptionPattern).
SCENARIOS_4X: dict[str, tuple[str, ...]] = {"group-consumer-protocol-regex": ()}
CASES = [pytest.param(s, v, id=f"{s}-{v}") for s in SCENARIOS for v in CLIENT_VERSIONS] + [
    pytest.param(s, CLIENT_VERSIONS[0], id=f"{s}-{CLIENT_VERSIONS[0]}") for s in SCENARIOS_4X]


@pytest.mark.parametrize(("scenario", "version"), CASES)
def test_java_client_scenario(cluster: Cluster, scenario: str, version: str) -> None:
    args = SCENARIOS[scenario] if scenario in SCENARIOS else SCENARIOS_4X[scenario]
    command = java_command(version, scenario, cluster.bootstrap, *args)
    done = subprocess.run(command,  # noqa: S603
                          capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S,
                          check=False)
    output = done.stdout + done.stderr
    check_passed(cluster, scenario, done.returncode, output)
    assert f"kafka-clients {version}," in output


def _lines(stream: Iterator[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


@pytest.mark.parametrize("version", CLIENT_VERSIONS)
def test_java_client_producer_survives_leader_kill(cluster: Cluster, version: str) -> None:
    """The program produces (idempotent, acks=all) and names the partition's leader; the
    test kills that broker with SIGKILL; the program checks that every acknowledged record
    is read back once at its offset. The killed broker is started again afterwards."""
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []
    killed: int | None = None
    try:
        with subprocess.Popen(  # noqa: S603
                java_command(version, "produce-failover", cluster.bootstrap),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            assert proc.stdout is not None
            reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
            reader.start()
            try:
                while killed is None:
                    line = lines.get(timeout=60)
                    if line is None:
                        break
                    seen.append(line)
                    if line.startswith("LEADER "):
                        killed = int(line.split()[1])
                        cluster.brokers[killed].kill9()
                proc.wait(PROCESS_TIMEOUT_S)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
                reader.join(10)
        while (line := lines.get_nowait() if not lines.empty() else None) is not None:
            seen.append(line)
        assert killed is not None, "the program never named the leader:\n" + "".join(seen)
        check_passed(cluster, "produce-failover", proc.returncode, "".join(seen))
    finally:
        if killed is not None:
            cluster.brokers[killed].start()
            cluster.wait_for(lambda: len(cluster.zk_children("/brokers/ids")) == 3,
                             "the killed broker registered again")
