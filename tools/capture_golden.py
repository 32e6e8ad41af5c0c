"""Capture request frames sent by real Kafka clients, for the codec's golden-bytes tests.

Usage: .venv/bin/python tools/capture_golden.py OUTPUT_DIR

Starts an in-process ADS broker whose advertised address is a recording proxy, runs a
typical workload with each client library (confluent-kafka, kafka-python, aiokafka), and
writes the first frame of every (client, API, version) seen to
OUTPUT_DIR/<client>/<ApiName>-v<version>.bin (size prefix included). Re-run it when a
client library starts using new versions.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import threading
from pathlib import Path

from ads.protocol.messages import ApiKey


class RecordingProxy:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target = ("127.0.0.1", 0)
        self.client = "unknown"
        self.seen: set[tuple[str, int, int]] = set()

    def serve(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self.listener.accept()
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump_requests, args=(conn, upstream),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            dst.close()

    def _pump_requests(self, src: socket.socket, dst: socket.socket) -> None:
        buf = b""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                buf += data
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + size:
                        break
                    self._record(buf[:4 + size])
                    buf = buf[4 + size:]
        except OSError:
            pass
        finally:
            dst.close()

    def _record(self, frame: bytes) -> None:
        api_key, version = struct.unpack_from(">hh", frame, 4)
        key = (self.client, api_key, version)
        if key in self.seen:
            return
        self.seen.add(key)
        folder = self.out_dir / self.client
        folder.mkdir(parents=True, exist_ok=True)
        name = ApiKey(api_key).name.title().replace("_", "")
        (folder / f"{name}-v{version}.bin").write_bytes(frame)


def run_confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("golden", 2, 1, config={"retention.ms": "100000"})])[
        "golden"].result(10)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                      "enable.idempotence": True})
        p.produce("golden", key=b"k", value=b"v" * 100, headers=[("h", b"1")], partition=0)
        p.flush(10)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden"})
    c.assign([TopicPartition("golden", 0, 0)])
    c.poll(2)
    c.close()
    res = ConfigResource(ConfigResource.Type.TOPIC, "golden")
    admin.describe_configs([res])[res].result(10)
    tp = TopicPartition("golden", 0)
    admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10)
    list(admin.delete_records([TopicPartition("golden", 0, 1)]).values())[0].result(10)
    admin.create_partitions([NewPartitions("golden", 3)])["golden"].result(10)
    admin.delete_topics(["golden"])["golden"].result(10)


def run_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    p.send("golden-kp", key=b"k", value=b"v", headers=[("h", b"1")]).get(10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1000)
    c.assign([TopicPartition("golden-kp", 0)])
    c.seek_to_beginning()
    list(c)
    c.close()


def run_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4")
        await p.start()
        await p.send_and_wait("golden-aio", b"v", key=b"k", headers=[("h", b"1")])
        await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await c.start()
        c.assign([TopicPartition("golden-aio", 0)])
        await c.seek_to_beginning()
        await c.getmany(timeout_ms=1000)
        await c.stop()

    asyncio.run(main())


def main() -> int:
    from ads.testing import EmbeddedBroker

    out = Path(sys.argv[1])
    proxy = RecordingProxy(out)
    config = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
    with EmbeddedBroker(config=config) as broker:
        assert broker.broker is not None
        proxy.target = broker.broker.bound_address
        proxy.serve()
        bootstrap = f"127.0.0.1:{proxy.port}"
        for name, run in (("confluent-kafka", run_confluent), ("kafka-python", run_kafka_python),
                          ("aiokafka", run_aiokafka)):
            proxy.client = name
            run(bootstrap)
    print(f"captured {len(proxy.seen)} frames into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
