"""Fetch long polling over raw sockets: a fetch with nothing to return waits in purgatory until
an append to one of its partitions or `max_wait_ms`, whichever comes first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ads.protocol import codec
from ads.protocol import messages as m
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

F = m.FetchRequest
P = m.ProduceRequest


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:
        create_topic(broker.bootstrap_servers, "lp")
        yield broker


def _fetch(offset: int, max_wait_ms: int) -> bytes:
    body = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic="lp", partitions=[F.FetchTopic.FetchPartition(
                 partition=0, current_leader_epoch=-1, fetch_offset=offset,
                 log_start_offset=-1, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")
    return codec.encode_request(m.ApiKey.FETCH, 11, 1, "lp-test", body)


def _produce(value: bytes) -> bytes:
    body = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="lp", partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(build_batch([(None, value)])))])])
    return codec.encode_request(m.ApiKey.PRODUCE, 9, 2, "lp-test", body)


def _records(conn: RawConnection) -> tuple[bytes, float]:
    start = time.monotonic()
    frame = conn.recv_frame()
    assert frame is not None
    _, resp = codec.decode_response(m.ApiKey.FETCH, 11, frame)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0
    return bytes(part.records or b""), time.monotonic() - start


def test_fetch_long_poll_is_woken_by_an_append(embedded: EmbeddedBroker) -> None:
    bs = embedded.bootstrap_servers
    with RawConnection(bs) as fetcher, RawConnection(bs) as producer:
        fetcher.send_raw(_fetch(0, 30_000))
        time.sleep(0.2)  # parked
        producer.send_raw(_produce(b"wake"))
        assert producer.recv_frame() is not None
        records, waited = _records(fetcher)
        assert b"wake" in records and waited < 10


def test_fetch_long_poll_sees_an_append_read_in_the_same_loop_pass(
        embedded: EmbeddedBroker) -> None:
    # The loop is held busy while the fetch and then the produce arrive, so both are read
    # in one pass: the fetch finds nothing, the append lands before the fetch's waiting
    # coroutine first runs. It must still be answered at once, not after max_wait_ms.
    bs = embedded.bootstrap_servers
    with RawConnection(bs) as fetcher, RawConnection(bs) as producer:
        busy = threading.Thread(target=embedded.call, args=(time.sleep, 0.5))
        busy.start()
        time.sleep(0.1)
        fetcher.send_raw(_fetch(0, 30_000))
        time.sleep(0.05)
        producer.send_raw(_produce(b"same pass"))
        busy.join()
        assert producer.recv_frame() is not None
        records, waited = _records(fetcher)
        assert b"same pass" in records and waited < 10


def test_fetch_long_poll_answers_empty_at_max_wait(embedded: EmbeddedBroker) -> None:
    with RawConnection(embedded.bootstrap_servers) as fetcher:
        start = time.monotonic()
        fetcher.send_raw(_fetch(0, 300))
        records, _ = _records(fetcher)
        assert records == b"" and time.monotonic() - start >= 0.29


def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_fetch_long_poll_of_a_closed_connection_leaves_the_purgatory(
        embedded: EmbeddedBroker) -> None:
    """A consumer gone while its fetch waits: the parked fetch is withdrawn at once (not at
    its 30 s deadline), and the next append is served as usual."""
    assert embedded.broker is not None
    purgatory = embedded.broker.replica_manager.fetch_purgatory
    bs = embedded.bootstrap_servers
    fetcher = RawConnection(bs)
    fetcher.send_raw(_fetch(0, 30_000))
    assert _until(lambda: purgatory.watched() == 1)
    fetcher.close()
    assert _until(lambda: purgatory.watched() == 0)
    with RawConnection(bs) as producer:
        producer.send_raw(_produce(b"after"))
        assert producer.recv_frame() is not None
    with RawConnection(bs) as reader:
        reader.send_raw(_fetch(0, 500))
        records, _ = _records(reader)
    assert b"after" in records
