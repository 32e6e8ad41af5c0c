"""A broker whose ZooKeeper connection drops while it starts: every start-up step waits for
kazoo to reconnect within the session and goes on, as Kafka's ZooKeeper client waits.

On a loaded machine a ping answered late makes kazoo drop the connection; a broker that
was registering then died with `ConnectionLoss` out of `ensure_path`. Here a relay between
the broker and a real ZooKeeper cuts the connection right after passing on chosen requests,
so the request is carried out but its answer is lost: the layout's cluster id, the check
for a stale registration, the registration itself (made, answer lost: the retry finds the
node made by its own session) and the entity configs' paths.
"""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kazoo.client import KazooClient

from ads.metadata import zk_layout as zl
from ads.testing.zookeeper import ZooKeeperServer
from broker_process import BrokerProcess
from cluster_support import wait_until
from kafka_wire import recv_exactly

# ZooKeeper's request types (its jute protocol): the ones cut here carry a path first.
CREATE, EXISTS = 1, 3
PATH_FIRST = {CREATE, EXISTS, 15}  # 15: create2


class CuttingRelay:
    """Relays ZooKeeper connections and closes one, after passing the request on, when a
    request matches a cut still to make: `(type, path)`, each cut once."""

    def __init__(self, upstream: int, cuts: list[tuple[int, str]]) -> None:
        self.upstream = upstream
        self.to_cut = list(cuts)
        self.made: list[tuple[int, str]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._server.close()
        with self._lock:
            for s in self._sockets:
                s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._answers, args=(server, client), daemon=True).start()
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def _requests(self, client: socket.socket, server: socket.socket) -> None:
        first = True  # the connect request has no type
        try:
            while packet := _packet(client):
                server.sendall(packet)
                if not first and self._cut(packet):
                    break
                first = False
        except OSError:
            pass
        _close(client, server)

    def _cut(self, packet: bytes) -> bool:
        kind = struct.unpack_from(">i", packet, 8)[0]
        if kind not in PATH_FIRST:
            return False
        length = struct.unpack_from(">i", packet, 12)[0]
        path = packet[16:16 + length].decode()
        with self._lock:
            if (kind, path) not in self.to_cut:
                return False
            self.to_cut.remove((kind, path))
            self.made.append((kind, path))
        return True


def _packet(sock: socket.socket) -> bytes:
    """One length-prefixed packet, or b"" at the end of the stream."""
    head = recv_exactly(sock, 4)
    body = recv_exactly(sock, struct.unpack(">i", head)[0]) if head else None
    return head + body if head and body is not None else b""


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


CUTS = [(CREATE, zl.CLUSTER_ID), (EXISTS, zl.broker_path(1)), (CREATE, zl.broker_path(1)),
        (EXISTS, "/config/users")]


@pytest.mark.broker_process
def test_broker_start_goes_on_when_zookeeper_connections_drop(
        tmp_path: Path, zookeeper_server: ZooKeeperServer) -> None:
    relay = CuttingRelay(zookeeper_server.port, CUTS)
    broker = BrokerProcess(tmp_path / "broker", None, "node.id=1",
                           f"zookeeper.connect=127.0.0.1:{relay.port}",
                           "zookeeper.session.timeout.ms=6000",
                           "offsets.topic.num.partitions=1")
    try:
        broker.start(timeout=60)
        zk = KazooClient(hosts=zookeeper_server.connect)
        zk.start(timeout=30)
        try:
            wait_until(lambda: zk.exists(zl.broker_path(1)) is not None, "broker 1 registered",
                       60, broker.log)
        finally:
            zk.stop()
            zk.close()
        # It serves: a record written is read back.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        producer.produce("after-cuts", b"v")
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("after-cuts", 0, 0)])
        values: list[bytes | None] = []
        try:
            for _ in range(30):  # bounded: 30 polls of a second
                msg = consumer.poll(1.0)
                if msg is not None and msg.error() is None:
                    values.append(msg.value())
                    break
        finally:
            consumer.close()
        assert values == [b"v"]
        assert broker.proc is not None and broker.proc.poll() is None
        assert sorted(relay.made) == sorted(CUTS), broker.log()[-3000:]
        assert "Traceback" not in broker.log()
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill9()
        relay.close()
