"""The blocking client connection (`ads.client.Connection`) against an in-process broker:
typed requests, raw frames, pipelining, and every failure as one `ClientError`."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from ads.client import ClientError, Connection, choose_versions, parse_address, parse_servers
from ads.protocol import codec
from ads.protocol import messages as m
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker

F, P = m.FetchRequest, m.ProduceRequest


def _create(conn: Connection, name: str) -> None:
    C = m.CreateTopicsRequest  # noqa: N806
    resp = conn.request(m.ApiKey.CREATE_TOPICS, 7, C(topics=[C.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10_000, validate_only=False))
    assert isinstance(resp, m.CreateTopicsResponse)
    assert resp.topics[0].error_code == 0


def _fetch(topic: str, offset: int, max_wait_ms: int = 0) -> m.FetchRequest:
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                 partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def _produce(topic: str, value: bytes) -> m.ProduceRequest:
    return P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(build_batch([(None, value)])))])])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_client_api_versions_and_choice(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers) as conn:
        ranges = conn.api_versions()
    assert ranges[m.ApiKey.FETCH][0] <= 12 <= ranges[m.ApiKey.FETCH][1]
    wanted: dict[int, int] = {m.ApiKey.FETCH: 12, m.ApiKey.METADATA: 9, 999: 1}
    minimum: dict[int, int] = {m.ApiKey.METADATA: 10}
    chosen = choose_versions(ranges, wanted, minimum)
    assert chosen == {m.ApiKey.FETCH: 12}


def test_client_metadata_names_the_broker(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers) as conn:
        resp = conn.request(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None))
    assert isinstance(resp, m.MetadataResponse)
    assert [(b.host, b.port) for b in resp.brokers] == [("127.0.0.1", broker.port)]


def test_client_produce_then_fetch_returns_the_batch(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers) as conn:
        _create(conn, "client-pf")
        produced = conn.request(m.ApiKey.PRODUCE, 9, _produce("client-pf", b"hello client"))
        assert isinstance(produced, m.ProduceResponse)
        assert produced.responses[0].partition_responses[0].error_code == 0
        fetched = conn.request(m.ApiKey.FETCH, 12, _fetch("client-pf", 0))
    assert isinstance(fetched, m.FetchResponse)
    part = fetched.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark) == (0, 1)
    assert b"hello client" in bytes(part.records or b"")


def test_client_pipelined_requests_answer_in_order(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers) as conn:
        _create(conn, "client-pipe")
        ids = [conn.send(m.ApiKey.PRODUCE, 9, _produce("client-pipe", b"v%d" % i))
               for i in range(20)]
        ids.append(conn.send(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None)))
        assert ids == list(range(ids[0], ids[0] + 21))
        assert conn.in_flight == 21
        offsets = []
        for _ in range(20):
            resp = conn.receive()
            assert isinstance(resp, m.ProduceResponse)
            offsets.append(resp.responses[0].partition_responses[0].base_offset)
        assert isinstance(conn.receive(), m.MetadataResponse)
        assert conn.in_flight == 0
    assert offsets == list(range(20))


def test_client_raw_frames_round_trip(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers) as conn:
        conn.send_frame(codec.encode_request(m.ApiKey.API_VERSIONS, 0, 4242, "raw",
                                             m.ApiVersionsRequest()))
        frame = conn.receive_frame()
    correlation, resp = codec.decode_response(m.ApiKey.API_VERSIONS, 0, frame)
    assert correlation == 4242
    assert isinstance(resp, m.ApiVersionsResponse)
    assert resp.error_code == 0


def test_client_broker_closing_is_a_closed_error(broker: EmbeddedBroker) -> None:
    conn = Connection.connect(broker.bootstrap_servers)
    conn.send_frame(struct.pack(">i", -5))  # a negative size: the broker hangs up
    with pytest.raises(ClientError) as caught:
        conn.receive_frame()
    assert caught.value.closed
    assert conn.closed
    with pytest.raises(ClientError, match="is closed"):
        conn.send(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None))
    conn.close()
    conn.close()


def test_client_connect_failure() -> None:
    with pytest.raises(ClientError, match="cannot connect") as caught:
        Connection("127.0.0.1", _closed_port(), timeout_s=2)
    assert caught.value.address.startswith("127.0.0.1:")
    with pytest.raises(ClientError):
        Connection.connect("no-port-here")


def test_client_timeout_closes_the_connection(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers, timeout_s=0.3) as conn:
        _create(conn, "client-timeout")
        began = time.monotonic()
        conn.send(m.ApiKey.FETCH, 12, _fetch("client-timeout", 0, max_wait_ms=5_000))
        with pytest.raises(ClientError, match="timed out") as caught:
            conn.receive()
        assert time.monotonic() - began < 3
        assert not caught.value.closed
        assert conn.closed


def test_client_refuses_an_oversized_frame(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers, max_frame_bytes=16) as conn:
        conn.send(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None))
        with pytest.raises(ClientError, match="frame of"):
            conn.receive()
        assert conn.closed


def test_client_correlation_mismatch(broker: EmbeddedBroker) -> None:
    with Connection.connect(broker.bootstrap_servers) as conn:
        # An answer nobody tracked arrives first, where the tracked request's is expected.
        conn.send_frame(codec.encode_request(m.ApiKey.API_VERSIONS, 0, 777, "raw",
                                             m.ApiVersionsRequest()))
        conn.send(m.ApiKey.API_VERSIONS, 0, m.ApiVersionsRequest())
        with pytest.raises(ClientError, match="correlation id 777"):
            conn.receive()
        with pytest.raises(ClientError, match="no request in flight"):
            conn.receive()


def test_client_parse_servers() -> None:
    assert parse_servers("a:1, PLAINTEXT://b:2,[::1]:3,") == [("a", 1), ("b", 2), ("::1", 3)]
    assert parse_address("host:9092") == ("host", 9092)
    for bad in ("", "a", "a:b", " , "):
        with pytest.raises(ValueError):
            parse_servers(bad)
    with pytest.raises(ValueError, match="expected one"):
        parse_address("a:1,b:2")
