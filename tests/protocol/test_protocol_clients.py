"""Real clients against a scripted peer that speaks only through this codec.

librdkafka (confluent-kafka) and kafka-python send their real ApiVersions, Metadata and
Produce requests; the peer decodes them with `codec.decode_request` and answers with
`codec.encode_response`. The clients accepting those answers (delivery succeeds) shows our
encodings are the ones they expect; the decoded requests show we read theirs.
"""

from __future__ import annotations

import socketserver
import struct
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ads.protocol import codec
from ads.protocol import messages as m
from kafka_wire import recv_exactly

# librdkafka writes RecordBatch v2 only to brokers that also advertise Fetch v4+.
ADVERTISED = {m.ApiKey.PRODUCE: (0, 9), m.ApiKey.FETCH: (4, 12), m.ApiKey.METADATA: (0, 12),
              m.ApiKey.API_VERSIONS: (0, 3)}
TOPIC_ID = uuid.UUID(int=0xADD5)


class ScriptedBroker(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[codec.RequestHeader, m.Message]] = []
        self.errors: list[BaseException] = []
        self.port = self.server_address[1]

    def answer(self, header: codec.RequestHeader, body: Any) -> m.Message:
        key, version = header.api_key, header.api_version
        if key == m.ApiKey.API_VERSIONS:
            av = m.ApiVersionsResponse
            return av(error_code=0, throttle_time_ms=0, api_keys=[
                av.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in ADVERTISED.items()])
        if key == m.ApiKey.METADATA:
            md = m.MetadataResponse
            topics = [md.MetadataResponseTopic(
                error_code=0, name=t.name, topic_id=TOPIC_ID, partitions=[
                    md.MetadataResponseTopic.MetadataResponsePartition(
                        error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                        replica_nodes=[1], isr_nodes=[1])])
                for t in (body.topics or [])]
            return md(brokers=[md.MetadataResponseBroker(node_id=1, host="127.0.0.1",
                                                         port=self.port)],
                      cluster_id="scripted", controller_id=1, topics=topics)
        if key == m.ApiKey.PRODUCE:
            pr = m.ProduceResponse
            return pr(responses=[pr.TopicProduceResponse(name=t.name, partition_responses=[
                pr.TopicProduceResponse.PartitionProduceResponse(
                    index=p.index, error_code=0, base_offset=0, log_append_time_ms=-1)
                for p in t.partition_data]) for t in body.topic_data])
        raise AssertionError(f"unexpected API {key} v{version}")


class _Handler(socketserver.BaseRequestHandler):
    server: ScriptedBroker

    def handle(self) -> None:
        sock = self.request
        try:
            while True:
                head = recv_exactly(sock, 4)
                if head is None:
                    return
                frame = recv_exactly(sock, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                header, body = codec.decode_request(frame)
                self.server.requests.append((header, body))
                answer = self.server.answer(header, body)
                if header.api_key == m.ApiKey.PRODUCE and body.acks == 0:
                    continue
                chunks = codec.encode_response(header.api_key, header.api_version,
                                               header.correlation_id, answer)
                sock.sendall(b"".join(chunks))
        except (ConnectionError, OSError):
            return
        except Exception as exc:  # recorded for the test to report
            self.server.errors.append(exc)


@pytest.fixture
def broker() -> Iterator[ScriptedBroker]:
    server = ScriptedBroker()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _produced(server: ScriptedBroker) -> m.ProduceRequest:
    assert not server.errors, server.errors
    produce = [b for h, b in server.requests if h.api_key == m.ApiKey.PRODUCE]
    assert produce, [h for h, _ in server.requests]
    req = produce[0]
    assert isinstance(req, m.ProduceRequest)
    return req


def test_protocol_clients_librdkafka_produce(broker: ScriptedBroker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    results: list[Any] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 0, "acks": 1,
        "socket.timeout.ms": 5000, "message.timeout.ms": 8000})
    producer.produce("events", key=b"k1", value=b"hello-ads",
                     on_delivery=lambda err, msg: results.append((err, msg)))
    assert producer.flush(10) == 0
    assert len(results) == 1 and results[0][0] is None, results
    versions = {h.api_key: h.api_version for h, _ in broker.requests}
    assert versions[m.ApiKey.API_VERSIONS] == 3  # flexible request header v2
    assert versions[m.ApiKey.PRODUCE] == 9  # flexible, capped by what we advertised
    req = _produced(broker)
    assert req.acks == 1
    part = req.topic_data[0].partition_data[0]
    assert req.topic_data[0].name == "events" and part.index == 0
    records = bytes(part.records)
    assert records[16] == 2  # RecordBatch magic
    assert b"hello-ads" in records and b"k1" in records
    client_ids = {h.client_id for h, _ in broker.requests}
    assert client_ids == {"rdkafka"}


def test_protocol_clients_kafka_python_produce(broker: ScriptedBroker) -> None:
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{broker.port}", acks=1, linger_ms=0,
        request_timeout_ms=5000, max_block_ms=8000)
    try:
        meta = producer.send("events", key=b"k2", value=b"from-kafka-python").get(timeout=8)
        assert meta.offset == 0
    finally:
        producer.close(timeout=2)
    req = _produced(broker)
    records = bytes(req.topic_data[0].partition_data[0].records)
    assert b"from-kafka-python" in records
    assert {h.api_key for h, _ in broker.requests} >= {m.ApiKey.METADATA, m.ApiKey.PRODUCE}
