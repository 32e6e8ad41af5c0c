"""Three `ads broker` processes on a real ZooKeeper that replicate over TLS: the
inter-broker listener is SSL with client certificates required, and the PLAINTEXT listener
is advertised at an address nothing listens on, so followers can only fetch over SSL. An
acks=all produce to an RF=3 topic with min.insync.replicas=3 succeeds only when both
followers fetch; a transaction over partitions led by every broker commits only when the
coordinator's markers reach the other leaders; a stopping broker's controlled shutdown
reaches the controller."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ads.testing.zookeeper import zookeeper_available
from broker_process import free_port
from cluster_support import Cluster
from tls_support import make_pki

pytestmark = [pytest.mark.slow, pytest.mark.broker_process]


def test_tls_cluster_replicates_over_the_inter_broker_ssl_listener(tmp_path: Path) -> None:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    pki = make_pki(tmp_path / "pki")
    c = Cluster(tmp_path, 3, "inter.broker.listener.name=SSL", "ssl.client.auth=required",
                *(f"{k}={v}" for k, v in pki.broker_settings().items()))
    ssl_ports = {}
    for node, broker in c.brokers.items():
        ssl_ports[node] = free_port()
        broker.sets = (
            *broker.sets,
            f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_ports[node]}",
            f"advertised.listeners=PLAINTEXT://127.0.0.2:{broker.port},"
            f"SSL://127.0.0.1:{ssl_ports[node]}")
    c.start()
    try:
        with c.zk() as zk:
            data = json.loads(zk.get("/brokers/ids/1")[0])
        assert data["endpoints"] == [f"PLAINTEXT://127.0.0.2:{c.brokers[1].port}",
                                     f"SSL://127.0.0.1:{ssl_ports[1]}"]
        assert data["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                          "SSL": "SSL"}
        conf = {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ssl_ports.values()),
                "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
                "ssl.certificate.location": str(pki.client_cert),
                "ssl.key.location": str(pki.client_key)}
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("replicated", 1, 3,
                                      config={"min.insync.replicas": "3"})])[
            "replicated"].result(30)
        c.wait_for(lambda: len(admin.list_topics("replicated", timeout=10)
                               .topics["replicated"].partitions[0].isrs) == 3,
                   "a full ISR")
        producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
        for i in range(50):
            producer.produce("replicated", f"r{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({**conf, "group.id": "check", "enable.auto.commit": False})
        consumer.assign([TopicPartition("replicated", 0, 0)])
        values: list[bytes] = []
        deadline = time.time() + 30
        while len(values) < 50 and time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                values.append(msg.value())
        consumer.close()
        assert values == [f"r{i}".encode() for i in range(50)]

        admin.create_topics([NewTopic("spread", 3, 1)])["spread"].result(30)
        leaders = {p.leader for p in admin.list_topics("spread", timeout=10)
                   .topics["spread"].partitions.values()}
        assert leaders == {1, 2, 3}
        txn = Producer({**conf, "transactional.id": "tls-txn"})
        txn.init_transactions(30)
        txn.begin_transaction()
        for i in range(30):
            txn.produce("spread", f"t{i}".encode(), partition=i % 3)
        txn.commit_transaction(30)
        reader = Consumer({**conf, "group.id": "committed", "isolation.level": "read_committed",
                           "enable.auto.commit": False})
        reader.assign([TopicPartition("spread", p, 0) for p in range(3)])
        committed: list[bytes] = []
        deadline = time.time() + 30
        while len(committed) < 30 and time.time() < deadline:
            msg = reader.poll(1.0)
            if msg is not None and not msg.error():
                committed.append(msg.value())
        reader.close()
        assert sorted(committed) == sorted(f"t{i}".encode() for i in range(30))

        leaving = next(n for n in c.brokers if n != c.controller())
        assert c.brokers[leaving].stop() == 0
        assert "controlled shutdown succeeded" in c.brokers[leaving].log()
    finally:
        c.stop()
