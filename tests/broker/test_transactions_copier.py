"""A consume-transform-produce copier with its offsets in each transaction, SIGKILLed and
restarted several times: afterwards a read_committed consumer finds every input record
exactly once in the output, in order per partition."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import create_topic

COPIER = str(Path(__file__).with_name("txn_copier.py"))
PARTITIONS = 4
PER_PARTITION = 500


def start_copier(bootstrap: str) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, COPIER, bootstrap, "cin", "cout", str(PARTITIONS), "40"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def read_committed(bootstrap: str) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition("cout", p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(map(len, out.values())) < PARTITIONS * PER_PARTITION:
        for msg in c.consume(500, 0.5):
            if msg.error() is None:
                out[msg.partition()].append(msg.value())
    # Anything beyond the expected count (a duplicate) would arrive now.
    for msg in c.consume(500, 1.0):
        if msg.error() is None:
            out[msg.partition()].append(msg.value())
    c.close()
    return out


@pytest.mark.timeout(180)
def test_transactions_copier_killed_and_restarted_copies_exactly_once(bootstrap: str) -> None:
    create_topic(bootstrap, "cin", PARTITIONS)
    create_topic(bootstrap, "cout", PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            p.produce("cin", value=f"r-{part}-{i:05d}".encode(), partition=part)
    assert p.flush(30) == 0
    for _ in range(3):
        with start_copier(bootstrap) as copier:
            assert copier.stdout is not None
            # Killed once it has committed a few transactions, amid the next ones.
            for _ in range(3):
                if not copier.stdout.readline():
                    break
            copier.kill()
    with start_copier(bootstrap) as final:
        assert final.stdout is not None
        final.stdout.read()  # to its end: the copier exits once everything is copied
        assert final.wait(120) == 0
    out = read_committed(bootstrap)
    for part in range(PARTITIONS):
        assert out[part] == [f"R-{part}-{i:05d}".encode() for i in range(PER_PARTITION)]
