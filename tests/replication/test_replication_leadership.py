"""Leadership moving over replicated partitions: SIGTERM on a broker moves its leaderships
to other ISR members before it exits (controlled shutdown) while an idempotent acks=all
producer keeps writing without a failure, and a preferred election moves them back once
it has returned to the ISRs. Three broker processes on a real ZooKeeper."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, Producer

from cluster_support import Cluster
from replication_support import FAST, create, identical_logs, partition_state, read_all

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(300)]

TOPIC, PARTITIONS = "moving", 3


def leaders(c: Cluster) -> list[int]:
    return [partition_state(c, TOPIC, p)["leader"] for p in range(PARTITIONS)]


def full_isrs(c: Cluster) -> bool:
    return all(len(partition_state(c, TOPIC, p)["isr"]) == 3 for p in range(PARTITIONS))


def test_replication_controlled_shutdown_and_preferred_election_move_leaders(
        tmp_path: Path) -> None:
    # A long session: leadership can only have moved through the controlled shutdown.
    c = Cluster(tmp_path, 3, *FAST, "zookeeper.session.timeout.ms=30000").start()
    try:
        create(c, TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
        c.wait_for(lambda: full_isrs(c), "full ISRs")
        preferred = leaders(c)
        assert sorted(preferred) == [1, 2, 3]
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 120000})
        errors: list[str] = []
        sent = 0
        stop = threading.Event()

        def write() -> None:
            nonlocal sent
            while not stop.is_set():
                producer.produce(TOPIC, value=f"m{sent}".encode(), partition=sent % PARTITIONS,
                                 on_delivery=lambda err, _m: err and errors.append(str(err)))
                sent += 1
                producer.poll(0.003)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            time.sleep(1)
            victim = preferred[0]
            assert c.brokers[victim].stop() == 0  # SIGTERM: a clean exit
            # Its leaderships went to other ISR members before it left (the controller
            # answered its ControlledShutdown), not when its 30 s session ended.
            assert "controlled shutdown succeeded" in c.brokers[victim].log()
            assert victim not in leaders(c) and -1 not in leaders(c)
            time.sleep(1)
            c.brokers[victim].start()
            c.wait_for(lambda: full_isrs(c), "the broker back in every ISR", timeout_s=60)
            admin = c.admin()  # kept: its futures fail once the client is collected
            admin.elect_leaders(ElectionType.PREFERRED, None).result(40)
            c.wait_for(lambda: leaders(c) == preferred, "preferred leaders again")
            time.sleep(1)
        finally:
            stop.set()
            writer.join(30)
        assert producer.flush(120) == 0
        assert errors == []
        got = read_all(c.bootstrap, TOPIC, PARTITIONS, sent)
        assert sum(len(v) for v in got.values()) == sent
        c.wait_for(lambda: identical_logs(c, TOPIC, PARTITIONS, [1, 2, 3]), "identical")
    finally:
        c.stop()
