"""Consumer groups while a group coordinator's broker is killed (SIGKILL) and restarted,
three broker processes and confluent-kafka.

With `offsets.topic.replication.factor=1` every `__consumer_offsets` partition has one
replica, so the killed broker's offsets partitions go offline: its groups get
COORDINATOR_NOT_AVAILABLE, groups coordinated elsewhere keep working, and when the broker
returns its groups resume from the offsets they committed. (With replicated offsets the
coordinator moves instead: tests/replication/test_replication_pauses.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic
from test_controller_cluster import leaders

from ads.client import Connection
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from cluster_support import Cluster

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]


def find_coordinator(c: Cluster, group: str, via: int) -> tuple[int, int]:
    """(error code, coordinator node id) as broker `via` answers FindCoordinator."""
    with Connection.connect(c.brokers[via].bootstrap, timeout_s=40) as conn:
        resp = conn.request(m.ApiKey.FIND_COORDINATOR, 3,
                            m.FindCoordinatorRequest(key=group, key_type=0))
    assert isinstance(resp, m.FindCoordinatorResponse)
    return resp.error_code, resp.node_id


def produce(bootstrap: str, topic: str, partitions: int, prefix: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"{prefix}{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            got += [msg.value() for msg in consumer.consume(count, 0.5) if msg.error() is None]
        consumer.commit(asynchronous=False)
        # Nothing more is there: a second look finds nothing past the commit.
        got += [msg.value() for msg in consumer.consume(10, 1.0) if msg.error() is None]
    finally:
        consumer.close()
    return got


def test_cluster_groups_survive_their_coordinator_broker_being_killed(tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, "offsets.topic.replication.factor=1").start()
    try:
        _groups_survive(c)
    finally:
        c.stop()


def _groups_survive(c: Cluster) -> None:
    admin = c.admin(1)
    admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(30)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "orders").values()), "leaders")
    produce(c.bootstrap, "orders", 3, "a", 30)
    first = consume_and_commit(c.bootstrap, "orders", "g", 30)
    assert sorted(first) == sorted(f"a{i}".encode() for i in range(30))

    code, victim = find_coordinator(c, "g", 1)
    assert code == ErrorCode.NONE
    survivors = [n for n in c.brokers if n != victim]
    # A group coordinated by a broker that stays, and a topic held by those brokers only.
    other = next(g for g in (f"h{i}" for i in range(100))
                 if find_coordinator(c, g, survivors[0]) == (ErrorCode.NONE, survivors[0]))
    admin.create_topics([NewTopic("payments", 2, replica_assignment=[[survivors[0]],
                                                                  [survivors[1]]])]
                        )["payments"].result(30)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "payments").values()), "leaders")

    c.brokers[victim].kill9()
    c.wait_for(lambda: find_coordinator(c, "g", survivors[0])[0]
               == ErrorCode.COORDINATOR_NOT_AVAILABLE, "g's coordinator unavailable")
    assert find_coordinator(c, other, survivors[1]) == (ErrorCode.NONE, survivors[0])
    live = ",".join(c.brokers[n].bootstrap for n in survivors)
    produce(live, "payments", 2, "p", 20)
    during = consume_and_commit(live, "payments", other, 20)
    assert sorted(during) == sorted(f"p{i}".encode() for i in range(20))

    c.brokers[victim].start()
    c.wait_for(lambda: find_coordinator(c, "g", survivors[1]) == (ErrorCode.NONE, victim),
               "g's coordinator back")
    produce(c.bootstrap, "orders", 3, "b", 30)
    # The group resumes where it committed: only what came after.
    after = consume_and_commit(c.bootstrap, "orders", "g", 30)
    assert sorted(after) == sorted(f"b{i}".encode() for i in range(30))
