"""A cluster of three `ads broker` processes on a real ZooKeeper, driven by real clients."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import NewTopic
from kafka import KafkaConsumer, KafkaProducer

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from broker_process import BrokerProcess, free_port
from cluster_support import Cluster
from kafka_wire import RawConnection

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]


def create(c: Cluster, name: str, partitions: int, rf: int = 1, via: int = 1) -> None:
    admin = c.admin(via)  # kept: its futures fail once the client is collected
    futures = admin.create_topics([NewTopic(name, partitions, rf)])
    futures[name].result(30)


def leaders(c: Cluster, name: str, via: int = 1) -> dict[int, int]:
    md = c.admin(via).list_topics(name, timeout=10)
    return {p.id: p.leader for p in md.topics[name].partitions.values()}


def produce_confluent(bootstrap: str, topic: str, count: int, prefix: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures: list[KafkaError] = []
    for i in range(count):
        producer.produce(topic, key=f"{prefix}{i}".encode(), value=f"{prefix}{i}".encode(),
                         on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(30) == 0
    assert failures == []


def consume_confluent(bootstrap: str, topic: str, count: int, group: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            for msg in consumer.consume(count - len(values), 0.5):
                if msg.error() is None:
                    values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_cluster_spreads_leaders_and_serves_every_client(cluster: Cluster) -> None:
    c = cluster
    create(c, "spread", 12, via=2)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "spread").values()), "leaders")
    for via in (1, 2, 3):  # every broker answers with the same leaders and all brokers
        md = c.admin(via).list_topics("spread", timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        assert md.controller_id == c.controller() > 0
    counts = collections.Counter(leaders(c, "spread").values())
    assert sorted(counts.values()) == [4, 4, 4], counts

    # Each client bootstraps from one broker and reaches the leaders on the others.
    produce_confluent(c.brokers[1].bootstrap, "spread", 300, "c")
    kp = KafkaProducer(bootstrap_servers=c.brokers[2].bootstrap)
    for i in range(300):
        kp.send("spread", key=f"k{i}".encode(), value=f"k{i}".encode())
    kp.flush(30)
    kp.close()

    async def aio_produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=c.brokers[3].bootstrap)
        await producer.start()
        try:
            for i in range(300):
                await producer.send("spread", key=f"a{i}".encode(), value=f"a{i}".encode())
            await producer.flush()
        finally:
            await producer.stop()
    asyncio.run(aio_produce())

    expected = {f"{p}{i}".encode() for p in "cka" for i in range(300)}
    got = consume_confluent(c.brokers[3].bootstrap, "spread", 900, "g-confluent")
    assert set(got) == expected and len(got) == 900

    kc = KafkaConsumer("spread", bootstrap_servers=c.brokers[1].bootstrap,
                       group_id="g-kafka-python", auto_offset_reset="earliest",
                       consumer_timeout_ms=10000)
    assert {m.value for m in kc} == expected
    kc.close()

    async def aio_consume() -> set[bytes]:
        consumer = AIOKafkaConsumer("spread", bootstrap_servers=c.brokers[2].bootstrap,
                                    group_id="g-aiokafka", auto_offset_reset="earliest")
        await consumer.start()
        seen: set[bytes] = set()
        try:
            async with asyncio.timeout(60):
                while len(seen) < 900:
                    batch = await consumer.getmany(timeout_ms=500)
                    for records in batch.values():
                        seen.update(r.value for r in records)
        finally:
            await consumer.stop()
        return seen
    assert asyncio.run(aio_consume()) == expected


def test_cluster_survives_the_controller_and_an_rf1_broker_dying(cluster: Cluster) -> None:
    c = cluster
    create(c, "offline", 6)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "offline").values()), "leaders")
    produce_confluent(c.bootstrap, "offline", 120, "v")

    first = c.controller()
    c.brokers[first].kill9()
    survivors = [n for n in c.brokers if n != first]
    c.wait_for(lambda: c.controller() in survivors, "a new controller")
    led_by_dead = [p for p, leader in leaders(c, "offline", survivors[0]).items()
                   if leader == first]
    c.wait_for(lambda: all(leaders(c, "offline", survivors[0])[p] == -1 for p in led_by_dead),
               "the dead broker's partitions offline")
    # The cluster keeps working: a new topic is made on the two brokers left.
    create(c, "after", 4, via=survivors[0])
    c.wait_for(lambda: set(leaders(c, "after", survivors[1]).values()) <= set(survivors)
               and -1 not in leaders(c, "after", survivors[1]).values(), "new topic led")
    produce_confluent(c.brokers[survivors[1]].bootstrap, "after", 40, "n")

    # The broker returns (once its old session is gone) with all its data.
    c.brokers[first].start()
    c.wait_for(lambda: -1 not in leaders(c, "offline", first).values(), "partitions back")
    got = consume_confluent(c.brokers[first].bootstrap, "offline", 120, "g-back")
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(120))


def test_cluster_layout_in_zookeeper_is_kafkas(cluster: Cluster) -> None:
    c = cluster
    create(c, "layout", 3)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "layout").values()), "leaders")
    with c.zk() as zk:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        assert json.loads(zk.get("/cluster/id")[0])["id"]
        topic = json.loads(zk.get("/brokers/topics/layout")[0])
        assert sorted(topic["partitions"]) == ["0", "1", "2"]
        state = json.loads(zk.get("/brokers/topics/layout/partitions/0/state")[0])
        assert state["leader"] == topic["partitions"]["0"][0]
        assert state["isr"] == [state["leader"]] and state["leader_epoch"] == 0
        assert int(zk.get("/controller_epoch")[0]) >= 1
        assert json.loads(zk.get("/config/topics/layout")[0])["config"] == {}


def test_cluster_refuses_a_node_id_in_use_and_an_unreachable_zookeeper(
        cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    # The broker listens before it registers, so start() may return before the refusal:
    # what counts is the exit status. It first waits a session timeout for the
    # registration to expire, as a restart after a crash would; a live broker's does not.
    twin = BrokerProcess(tmp_path / "twin", None, "node.id=2",
                         f"zookeeper.connect={c.zookeeper.connect}",
                         "zookeeper.session.timeout.ms=4000")
    assert _exit_status(twin) == 2
    assert "waiting up to 6 s for that session to expire" in twin.log()
    assert "already registered" in twin.log()
    lost = BrokerProcess(tmp_path / "lost", None, "node.id=9",
                         f"zookeeper.connect=127.0.0.1:{free_port()}",
                         "zookeeper.connection.timeout.ms=2000")
    assert _exit_status(lost) == 2
    assert "cannot connect to ZooKeeper" in lost.log()


def _exit_status(broker: BrokerProcess) -> int:
    try:
        broker.start()
    except RuntimeError as exc:
        assert "exited with" in str(exc)
    assert broker.proc is not None
    try:
        return broker.proc.wait(30)
    finally:
        if broker.proc.poll() is None:
            broker.kill9()


def test_cluster_deposed_controller_cannot_change_state(cluster: Cluster) -> None:
    c = cluster
    old = c.controller()
    with c.zk() as zk:
        old_epoch = int(zk.get("/controller_epoch")[0])
    proc = c.brokers[old].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        others = [n for n in c.brokers if n != old]
        c.wait_for(lambda: c.controller() in others, "a new controller", timeout_s=30)
        # While the old controller is stopped, a topic is made by the new one.
        create(c, "while-stopped", 4, via=others[0])
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    with c.zk() as zk:
        new_epoch = int(zk.get("/controller_epoch")[0])
    assert new_epoch > old_epoch
    # The resumed broker learns its session is gone, registers again and is not the
    # controller; every partition state written since carries the new controller's epoch.
    c.wait_for(lambda: "1 2 3".split() == sorted(c.zk_children("/brokers/ids")),
               "the resumed broker registered again")
    create(c, "after-resume", 3, via=old)
    c.wait_for(lambda: -1 not in leaders(c, "after-resume", old).values(), "leaders")
    assert c.controller() != old
    with c.zk() as zk:
        for topic in ("while-stopped", "after-resume"):
            for p in zk.get_children(f"/brokers/topics/{topic}/partitions"):
                state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
                assert state["controller_epoch"] == new_epoch
        assert int(zk.get("/controller_epoch")[0]) == new_epoch


def test_cluster_brokers_racing_to_create_an_internal_topic_all_name_its_coordinator(
        cluster: Cluster) -> None:
    # Three brokers asked at once each try to create `__transaction_state`; the ones that
    # lose the race must wait for it to reach their metadata, not fail with a traceback.
    c = cluster
    assert "__transaction_state" not in c.zk_children("/brokers/topics")
    start = threading.Barrier(len(c.brokers))
    answers: dict[int, tuple[int, int]] = {}

    def ask(node: int) -> None:
        with RawConnection(c.brokers[node].bootstrap) as conn:
            start.wait(10)
            resp = conn.request(m.ApiKey.FIND_COORDINATOR, 3,
                                m.FindCoordinatorRequest(key="racing", key_type=1))
            answers[node] = (resp.error_code, resp.node_id)

    askers = [threading.Thread(target=ask, args=(n,)) for n in c.brokers]
    for t in askers:
        t.start()
    for t in askers:
        t.join(60)
    coordinators = {node for _, node in answers.values()}
    assert sorted(answers) == sorted(c.brokers)
    assert {code for code, _ in answers.values()} == {ErrorCode.NONE}, answers
    assert len(coordinators) == 1 and coordinators <= set(c.brokers)
    for broker in c.brokers.values():
        assert "Traceback" not in broker.log(), broker.log()
