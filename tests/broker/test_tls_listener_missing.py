"""A cluster where one broker lacks a listener: a client on that listener is not told of
that broker, and a partition it leads answers LISTENER_NOT_FOUND, as in Kafka. The other
broker is a registration written to ZooKeeper as Kafka writes it (PLAINTEXT only), next to
an in-process ADS broker with PLAINTEXT and SSL listeners."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from ads.metadata import zk_layout as zl
from ads.metadata.model import BrokerEndpoint, ListenerEndpoint
from ads.testing.embedded import EmbeddedBroker
from tls_support import make_pki


def test_tls_listener_missing_on_a_broker(zk: KazooClient, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    other = ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 1)  # never connected to
    zk.create(zl.broker_path(2), zl.encode_broker(BrokerEndpoint(2, "127.0.0.1", 1, None,
                                                                 (other,))), ephemeral=True)
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
              "zookeeper.connect": ",".join(f"{h}:{p}" for h, p in zk.hosts),
              "controlled.shutdown.enable": "false", **pki.broker_settings()}
    with EmbeddedBroker(tmp_path / "data", config=config, node_id=1) as b:
        ssl_conf = {"bootstrap.servers": b.bootstrap_for("SSL"), "security.protocol": "SSL",
                    "ssl.ca.location": str(pki.ca)}
        plain_conf = {"bootstrap.servers": b.bootstrap_for("PLAINTEXT")}
        ssl_admin, plain_admin = AdminClient(ssl_conf), AdminClient(plain_conf)
        plain_admin.create_topics([NewTopic("elsewhere", 1, replica_assignment=[[2]])])[
            "elsewhere"].result(30)
        deadline = time.time() + 30
        while time.time() < deadline:
            plain = plain_admin.list_topics("elsewhere", timeout=10)
            if plain.topics["elsewhere"].partitions[0].leader == 2:
                break
            time.sleep(0.2)
        assert sorted(plain.brokers) == [1, 2]
        assert plain.topics["elsewhere"].partitions[0].error is None
        md = ssl_admin.list_topics("elsewhere", timeout=10)
        assert sorted(md.brokers) == [1]
        error = md.topics["elsewhere"].partitions[0].error
        assert error is not None and error.code() == KafkaError.LISTENER_NOT_FOUND
