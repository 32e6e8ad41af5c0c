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

import pytest

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster
from java_support import (
    CLIENT_VERSIONS,
    CLUSTER_SETTINGS,
    CONSUMER_PROTOCOL_SESSION_MS,
    PROCESS_TIMEOUT_S,
    check_passed,
    java_command,
    run_scenario,
)

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    # Share groups are served with group.share.enable; their partitions start at the
    # earliest offset so the scenario reads what it produced before joining.
    with Cluster(tmp_path_factory.mktemp("java-clients"), 3, *CLUSTER_SETTINGS,
                 "group.share.enable=true", "group.share.auto.offset.reset=earliest"
                 ).running() as c:
        yield c


# Scenarios of API the 3.x client does not have: the coordinator's regular expressions
# (SubscriptionPattern), share groups (KafkaShareConsumer as released in 4.x).
SCENARIOS_4X: dict[str, tuple[str, ...]] = {"group-consumer-protocol-regex": (),
                                            "share-group": (), "share-record-limit": ()}
CASES = [pytest.param(s, v, id=f"{s}-{v}") for s in SCENARIOS for v in CLIENT_VERSIONS] + [
    pytest.param(s, CLIENT_VERSIONS[0], id=f"{s}-{CLIENT_VERSIONS[0]}") for s in SCENARIOS_4X]


@pytest.mark.parametrize(("scenario", "version"), CASES)
def test_java_client_scenario(cluster: Cluster, scenario: str, version: str) -> None:
    args = SCENARIOS[scenario] if scenario in SCENARIOS else SCENARIOS_4X[scenario]
    run_scenario(cluster, version, scenario, cluster.bootstrap, *args)


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
