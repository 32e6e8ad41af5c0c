"""Running the Java programs of `tests/java` (docs/java-clients.md): each scenario in its own
JVM, against a running cluster, passing when the program exits 0 having printed
`PASS <scenario>`. `make test` builds them with Maven into `tests/java/target/`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster_support import Cluster

JAVA_DIR = Path(__file__).parent / "java"
CLIENT_VERSIONS = ["4.4.0", "3.9.1"]
# Every scenario's own deadline (the program halts itself past it) and pytest's, above it.
SCENARIO_DEADLINE_S = 100
PROCESS_TIMEOUT_S = SCENARIO_DEADLINE_S + 20
# The clusters the Java programs run against: three brokers, replication factor 3.
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
# A small JVM per program: two cores run three brokers, ZooKeeper and the programs.
JVM_OPTIONS = ("-Xss1m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def java_command(version: str, scenario: str, bootstrap: str, *args: str) -> list[str]:
    build = JAVA_DIR / "target" / f"kafka-{version}"
    assert (build / "classes").is_dir() and (build / "lib").is_dir(), (
        f"the Java programs are built by `make test` (Maven, {JAVA_DIR}/pom.xml): "
        f"{build} is missing")
    classpath = f"{build / 'classes'}:{build / 'lib'}/*"
    return ["java", *JVM_OPTIONS, "-cp", classpath, "ads.javaclients.Main", scenario, bootstrap,
            f"deadline.s={SCENARIO_DEADLINE_S}", *args]


def broker_logs(c: Cluster) -> str:
    return "\n".join(f"--- broker {n}\n{b.log()[-3000:]}" for n, b in c.brokers.items())


def check_passed(c: Cluster, scenario: str, returncode: int, output: str) -> None:
    print(output)  # what the program saw, shown by `pytest -rP`
    assert returncode == 0 and f"PASS {scenario}" in output.splitlines(), (
        f"scenario {scenario} exited {returncode}:\n{output}\n{broker_logs(c)}")


def run_scenario(c: Cluster, version: str, scenario: str, bootstrap: str, *args: str) -> str:
    """Runs one scenario to its end and checks that it passed; returns its output."""
    done = subprocess.run(java_command(version, scenario, bootstrap, *args),  # noqa: S603
                          capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S,
                          check=False)
    output = done.stdout + done.stderr
    check_passed(c, scenario, done.returncode, output)
    assert f"kafka-clients {version}," in output
    return output
