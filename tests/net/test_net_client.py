"""The outbound asyncio connection (`ads.net.client.BrokerConnection`) against an
in-process broker: requests, pipelining, timeouts, and failures of the connection."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from ads.net.client import (
    BrokerConnection,
    ConnectError,
    ConnectionLostError,
    RequestTimeoutError,
)
from ads.protocol import messages as m
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker

F, P = m.FetchRequest, m.ProduceRequest


async def _connect(broker: EmbeddedBroker) -> BrokerConnection:
    return await BrokerConnection.connect("127.0.0.1", broker.port)


async def _create(conn: BrokerConnection, name: str) -> None:
    C = m.CreateTopicsRequest  # noqa: N806
    resp = await conn.request(m.ApiKey.CREATE_TOPICS, 7, C(topics=[C.CreatableTopic(
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


async def test_net_client_api_versions(broker: EmbeddedBroker) -> None:
    conn = await _connect(broker)
    try:
        resp = await conn.request(m.ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="ads-test", client_software_version="1"))
    finally:
        await conn.close()
    assert isinstance(resp, m.ApiVersionsResponse)
    assert resp.error_code == 0
    assert m.ApiKey.FETCH in {k.api_key for k in resp.api_keys}


async def test_net_client_metadata(broker: EmbeddedBroker) -> None:
    conn = await _connect(broker)
    try:
        resp = await conn.request(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None))
    finally:
        await conn.close()
    assert isinstance(resp, m.MetadataResponse)
    assert [(b.node_id, b.port) for b in resp.brokers] == [(1, broker.port)]


async def test_net_client_produce_then_fetch(broker: EmbeddedBroker) -> None:
    conn = await _connect(broker)
    try:
        await _create(conn, "net-pf")
        produced = await conn.request(m.ApiKey.PRODUCE, 9, _produce("net-pf", b"from a peer"))
        assert isinstance(produced, m.ProduceResponse)
        assert produced.responses[0].partition_responses[0].error_code == 0
        fetched = await conn.request(m.ApiKey.FETCH, 12, _fetch("net-pf", 0))
    finally:
        await conn.close()
    assert isinstance(fetched, m.FetchResponse)
    part = fetched.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark) == (0, 1)
    assert b"from a peer" in bytes(part.records or b"")


async def test_net_client_pipelined_requests_are_answered_in_order(
        broker: EmbeddedBroker) -> None:
    conn = await _connect(broker)
    try:
        await _create(conn, "net-pipe")
        requests = [conn.request(m.ApiKey.PRODUCE, 9, _produce("net-pipe", b"%d" % i))
                    for i in range(100)]
        tasks = [asyncio.ensure_future(r) for r in requests]
        await asyncio.sleep(0)
        assert conn.in_flight == 100
        answers = await asyncio.gather(*tasks)
        assert conn.in_flight == 0
    finally:
        await conn.close()
    offsets = []
    for a in answers:
        assert isinstance(a, m.ProduceResponse)
        offsets.append(a.responses[0].partition_responses[0].base_offset)
    assert offsets == list(range(100))


async def test_net_client_timeout_then_connection_still_works(broker: EmbeddedBroker) -> None:
    conn = await _connect(broker)
    try:
        await _create(conn, "net-timeout")
        began = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await conn.request(m.ApiKey.FETCH, 12, _fetch("net-timeout", 0, max_wait_ms=1000),
                               timeout_s=0.2)
        assert time.monotonic() - began < 0.9
        assert not conn.closed
        # The late fetch answer arrives first and is dropped; this one is matched by id.
        resp = await conn.request(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None),
                                  timeout_s=10)
        assert isinstance(resp, m.MetadataResponse)
    finally:
        await conn.close()


async def test_net_client_broker_stopping_fails_pending_requests(tmp_path: Path) -> None:
    broker = EmbeddedBroker(data_dir=tmp_path / "data").start()
    try:
        conn = await _connect(broker)
        await _create(conn, "net-stop")
        parked = asyncio.ensure_future(conn.request(
            m.ApiKey.FETCH, 12, _fetch("net-stop", 0, max_wait_ms=60_000)))
        behind = asyncio.ensure_future(conn.request(
            m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None)))
        await asyncio.sleep(0.2)
        assert conn.in_flight == 2
        await asyncio.to_thread(broker.stop)
        for task in (parked, behind):
            with pytest.raises(ConnectionLostError, match="closed the connection"):
                await task
        assert conn.closed
        with pytest.raises(ConnectionLostError):
            await conn.request(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None))
        await conn.close()
    finally:
        broker.close()


async def test_net_client_close_fails_pending_and_is_idempotent(
        broker: EmbeddedBroker) -> None:
    conn = await _connect(broker)
    await _create(conn, "net-close")
    parked = asyncio.ensure_future(conn.request(
        m.ApiKey.FETCH, 12, _fetch("net-close", 0, max_wait_ms=30_000)))
    await asyncio.sleep(0.1)
    await conn.close()
    with pytest.raises(ConnectionLostError, match="was closed"):
        await parked
    await asyncio.gather(conn.close(), conn.close())
    assert conn.closed


async def test_net_client_cancelled_request_does_not_disturb_the_next(
        broker: EmbeddedBroker) -> None:
    conn = await _connect(broker)
    try:
        await _create(conn, "net-cancel")
        parked = asyncio.ensure_future(conn.request(
            m.ApiKey.FETCH, 12, _fetch("net-cancel", 0, max_wait_ms=300)))
        await asyncio.sleep(0.05)
        parked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await parked
        assert conn.in_flight == 0
        resp = await conn.request(m.ApiKey.API_VERSIONS, 0, m.ApiVersionsRequest())
        assert isinstance(resp, m.ApiVersionsResponse)
    finally:
        await conn.close()


async def test_net_client_connect_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError, match="cannot connect"):
        await BrokerConnection.connect("127.0.0.1", port, connect_timeout_s=2)


async def test_net_client_oversized_frame_fails_the_connection(broker: EmbeddedBroker) -> None:
    conn = await BrokerConnection.connect("127.0.0.1", broker.port, max_frame_bytes=16)
    with pytest.raises(ConnectionLostError, match="frame of"):
        await conn.request(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=None))
    assert conn.closed
    await conn.close()
