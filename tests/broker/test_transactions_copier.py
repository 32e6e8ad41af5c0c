"""A consume-transform-produce copier with its offsets in each transaction, SIGKILLed and
restarted several times (and, in the second test, the broker process killed with -9 and
restarted in the middle): afterwards a read_committed consumer finds every input record
exactly once in the output, in order per partition."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker_process import BrokerProcess
from conftest import create_topic

COPIER = str(Path(__file__).with_name("txn_copier.py"))
PARTITIONS = 4
PER_PARTITION = 500


def start_copier(bootstrap: str, batch: int = 40) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, COPIER, bootstrap, "cin", "cout", str(PARTITIONS), str(batch)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def fill_input(bootstrap: str, per_partition: int) -> None:
    create_topic(bootstrap, "cin", PARTITIONS)
    create_topic(bootstrap, "cout", PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(PARTITIONS):
        for i in range(per_partition):
            p.produce("cin", value=f"r-{part}-{i:05d}".encode(), partition=part)
    assert p.flush(30) == 0


def await_commits(copier: subprocess.Popen[str], commits: int) -> None:
    """Returns once the copier has committed `commits` transactions (or has exited)."""
    assert copier.stdout is not None
    for _ in range(commits):
        if not copier.stdout.readline():
            break


def run_to_end(bootstrap: str, batch: int) -> None:
    with start_copier(bootstrap, batch) as final:
        assert final.stdout is not None
        final.stdout.read()  # to its end: the copier exits once everything is copied
        assert final.wait(120) == 0


def read_committed(bootstrap: str, per_partition: int) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition("cout", p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(map(len, out.values())) < PARTITIONS * per_partition:
        for msg in c.consume(1000, 0.5):
            if msg.error() is None:
                out[msg.partition()].append(msg.value())
    # Anything beyond the expected count (a duplicate) would arrive now.
    for msg in c.consume(1000, 1.0):
        if msg.error() is None:
            out[msg.partition()].append(msg.value())
    c.close()
    return out


def assert_copied_once(bootstrap: str, per_partition: int) -> None:
    out = read_committed(bootstrap, per_partition)
    for part in range(PARTITIONS):
        assert out[part] == [f"R-{part}-{i:05d}".encode() for i in range(per_partition)]


@pytest.mark.timeout(180)
def test_transactions_copier_killed_and_restarted_copies_exactly_once(bootstrap: str) -> None:
    fill_input(bootstrap, PER_PARTITION)
    for _ in range(3):
        with start_copier(bootstrap) as copier:
            await_commits(copier, 3)
            copier.kill()  # amid the next transactions
    run_to_end(bootstrap, 40)
    assert_copied_once(bootstrap, PER_PARTITION)


@pytest.mark.broker_process
@pytest.mark.timeout(240)
def test_transactions_copier_survives_a_broker_kill(tmp_path: Path) -> None:
    per_partition = 25_000  # 100,000 records, in transactions of about 750
    broker = BrokerProcess(tmp_path / "data", None, "transaction.state.log.num.partitions=4",
                           "offsets.topic.num.partitions=4").start()
    try:
        fill_input(broker.bootstrap, per_partition)
        with start_copier(broker.bootstrap, 750) as copier:
            await_commits(copier, 4)
            copier.kill()
        with start_copier(broker.bootstrap, 750) as copier:
            await_commits(copier, 4)
            broker.kill9()  # amid the copier's transactions
            broker.start()
            copier.kill()
        with start_copier(broker.bootstrap, 750) as copier:
            await_commits(copier, 4)
            copier.kill()
        run_to_end(broker.bootstrap, 750)
        assert_copied_once(broker.bootstrap, per_partition)
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill9()
