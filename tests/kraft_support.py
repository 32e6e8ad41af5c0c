"""Apache Kafka's KRaft controller, alone, for tests of ADS brokers in a KRaft cluster
(docs/kraft.md).

`KafkaController` runs one Kafka 4.x node with `process.roles=controller` only: a quorum of
one voter (`controller.quorum.voters`), listening on its CONTROLLER listener and nothing
else, from the jars of tests/kafka_reference (as `KafkaReference` does). The log directory
is formatted with the features ADS brokers can run (`FORMAT_FEATURES`, unless told
otherwise): the controller refuses to register a broker that cannot run a finalized
feature level. Start returns once
the controller answers ApiVersions; stop is SIGTERM, then SIGKILL (`KafkaPeer`).

`KafkaController.request` sends one request to the controller, as an admin client
bootstrapped to controllers (KIP-919) would, for what ADS does not do itself.

`KafkaBroker` runs a Kafka 4.x broker (`process.roles=broker`) of that controller's cluster,
beside ADS brokers: its log directory is formatted with the controller's cluster id, and it
reaches the controller through `controller.quorum.voters` (a Kafka broker of a static
quorum must name the voters; ADS brokers may give the same address as bootstrap server).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ads.bench.kafka import LOG4J, KafkaPeer
from ads.bench.produce import BenchError
from ads.net.client import BrokerConnection, NetClientError
from ads.protocol import messages as m
from ads.protocol.base import Message
from kafka_reference import JARS, JVM_OPTIONS

NODE_ID = 3000
# Kafka 4.4 finalizes newer levels by default than ADS brokers run
# (ads.metadata.kraft_lifecycle.SUPPORTED_FEATURES): the controller would refuse them.
FORMAT_FEATURES = ("metadata.version=26", "transaction.version=1", "share.version=1",
                   "eligible.leader.replicas.version=0", "streams.version=0")


async def _request(port: int, api_key: int, version: int, body: Message) -> Message:
    conn = await BrokerConnection.connect("127.0.0.1", port, connect_timeout_s=2.0,
                                          request_timeout_s=10.0)
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


class KafkaController(KafkaPeer):
    """One Apache Kafka KRaft controller (controller role only) in a subprocess."""

    def __init__(self, work_dir: Path, overrides: dict[str, str] | None = None,
                 features: tuple[str, ...] = FORMAT_FEATURES) -> None:
        """`overrides`: server.properties keys set on top of the controller's; `features`:
        the feature levels (`name=level`) the log directory is formatted with."""
        super().__init__(JARS, work_dir, overrides, JVM_OPTIONS, node_id=NODE_ID)
        self.features = features

    @property
    def quorum(self) -> str:
        """The value of `controller.quorum.bootstrap.servers` for its brokers."""
        return f"127.0.0.1:{self.controller_port}"

    def prepare(self, deadline: float) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "controller",
            "node.id": str(NODE_ID),
            "controller.quorum.voters": f"{NODE_ID}@{self.quorum}",
            "listeners": f"CONTROLLER://{self.quorum}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.work_dir / "log4j2.properties").write_text(LOG4J)
        self._format(config, deadline, *(f"--feature={f}" for f in self.features))

    def start(self, timeout_s: float = 90.0) -> KafkaController:
        deadline = time.monotonic() + timeout_s
        self.prepare(deadline)
        self.launch()
        try:
            self._await_answer(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _await_answer(self, deadline: float) -> None:
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise BenchError(f"the controller exited with {self.proc.returncode}\n"
                                 f"{self.log_tail()}")
            try:
                self.request(m.ApiVersionsRequest.API_KEY, 3, m.ApiVersionsRequest(
                    client_software_name="ads-tests", client_software_version="1"))
                return
            except NetClientError:
                if time.monotonic() > deadline:
                    raise BenchError(f"the controller did not answer in time\n"
                                     f"{self.log_tail()}") from None
                time.sleep(0.2)

    def request(self, api_key: int, version: int, body: Message) -> Message:
        """One request to the controller, on a connection of its own."""
        return asyncio.run(_request(self.controller_port, api_key, version, body))

    def __enter__(self) -> KafkaController:
        return self.start()


class KafkaBroker(KafkaPeer):
    """One Apache Kafka broker (broker role only) of `controller`'s cluster."""

    def __init__(self, work_dir: Path, controller: KafkaController, node_id: int,
                 overrides: dict[str, str] | None = None) -> None:
        super().__init__(JARS, work_dir, overrides, JVM_OPTIONS, node_id=node_id)
        self.cluster_id = controller.cluster_id
        self.controller = controller

    def prepare(self, deadline: float) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{NODE_ID}@{self.controller.quorum}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"PLAINTEXT://{self.bootstrap}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.work_dir / "log4j2.properties").write_text(LOG4J)
        self._format(config, deadline)

    def start(self, timeout_s: float = 90.0) -> KafkaBroker:
        super().start(timeout_s)
        return self

    def __enter__(self) -> KafkaBroker:
        return self.start()
