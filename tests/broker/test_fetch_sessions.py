"""Incremental fetch sessions (KIP-227): raw requests for the rules, kafka-python (which
opens sessions) for a client that relies on them."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

F = m.FetchRequest


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path / "data",
                        config={"max.incremental.fetch.session.cache.slots": "2"}) as broker:
        create_topic(broker.bootstrap_servers, "fs", partitions=2)
        yield broker


def _fetch(session_id: int, epoch: int, partitions: list[tuple[int, int]],
           forgotten: list[int] | None = None, topic_id: uuid.UUID | None = None) -> F:
    topic = {"topic_id": topic_id} if topic_id else {"topic": "fs"}
    topics = [F.FetchTopic(**topic, partitions=[F.FetchTopic.FetchPartition(
        partition=p, current_leader_epoch=-1, fetch_offset=o, log_start_offset=-1,
        partition_max_bytes=1 << 20) for p, o in partitions])] if partitions else []
    gone = [F.ForgottenTopic(**topic, partitions=forgotten)] if forgotten else []
    return F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=session_id, session_epoch=epoch, topics=topics,
             forgotten_topics_data=gone, rack_id="")


def _parts(resp: m.FetchResponse) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, bytes of records) of what the response carries."""
    return {p.partition_index: (p.high_watermark, len(p.records or b""))
            for t in resp.responses for p in t.partitions}


def _produce(bootstrap: str, partition: int, count: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce("fs", b"v%d" % i, partition=partition)
    assert p.flush(10) == 0


def test_fetch_sessions_incremental_responses_carry_only_what_changed(
        embedded: EmbeddedBroker) -> None:
    bs = embedded.bootstrap_servers
    with RawConnection(bs) as conn:
        full = conn.request(m.ApiKey.FETCH, 12, _fetch(0, 0, [(0, 0), (1, 0)]))
        sid = full.session_id
        assert full.error_code == ErrorCode.NONE and sid != 0
        assert _parts(full) == {0: (0, 0), 1: (0, 0)}
        # Nothing new: the incremental response leaves both partitions out.
        quiet = conn.request(m.ApiKey.FETCH, 12, _fetch(sid, 1, []))
        assert quiet.session_id == sid and _parts(quiet) == {}
        _produce(bs, 1, 3)
        changed = conn.request(m.ApiKey.FETCH, 12, _fetch(sid, 2, []))
        assert list(_parts(changed)) == [1]
        hw, size = _parts(changed)[1]
        assert hw == 3 and size > 0  # records from the session's fetch offset 0
        # The client moves partition 1 on; partition 0 is forgotten and no longer reported.
        moved = conn.request(m.ApiKey.FETCH, 12, _fetch(sid, 3, [(1, 3)], forgotten=[0]))
        assert _parts(moved) == {}
        _produce(bs, 0)
        assert _parts(conn.request(m.ApiKey.FETCH, 12, _fetch(sid, 4, []))) == {}


def test_fetch_sessions_errors_and_closing(embedded: EmbeddedBroker) -> None:
    with RawConnection(embedded.bootstrap_servers) as conn:
        sid = conn.request(m.ApiKey.FETCH, 12, _fetch(0, 0, [(0, 0)])).session_id
        wrong = conn.request(m.ApiKey.FETCH, 12, _fetch(sid, 5, []))
        assert wrong.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        unknown = conn.request(m.ApiKey.FETCH, 12, _fetch(sid + 1000, 1, []))
        assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        ok = conn.request(m.ApiKey.FETCH, 12, _fetch(sid, 1, []))
        assert ok.error_code == ErrorCode.NONE
        # Epoch -1 closes the session and answers as a sessionless full fetch.
        closing = conn.request(m.ApiKey.FETCH, 12, _fetch(sid, -1, [(0, 0)]))
        assert closing.session_id == 0 and list(_parts(closing)) == [0]
        gone = conn.request(m.ApiKey.FETCH, 12, _fetch(sid, 2, []))
        assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_sessions_by_topic_id_and_a_full_cache(embedded: EmbeddedBroker) -> None:
    broker = embedded.broker
    assert broker is not None
    topic_id = broker.metadata.topics["fs"].topic_id
    with RawConnection(embedded.bootstrap_servers) as conn:
        first = conn.request(m.ApiKey.FETCH, 13, _fetch(0, 0, [(0, 0)], topic_id=topic_id))
        assert first.session_id != 0
        assert [t.topic_id for t in first.responses] == [topic_id]
        second = conn.request(m.ApiKey.FETCH, 13, _fetch(0, 0, [(1, 0)], topic_id=topic_id))
        assert second.session_id not in (0, first.session_id)
        # Two slots, both used just now: the third fetcher is served without a session.
        third = conn.request(m.ApiKey.FETCH, 13, _fetch(0, 0, [(1, 0)], topic_id=topic_id))
        assert third.session_id == 0 and list(_parts(third)) == [1]


def test_fetch_sessions_kafka_python_consumer(embedded: EmbeddedBroker) -> None:
    bs = embedded.bootstrap_servers
    producer = Producer({"bootstrap.servers": bs})

    def produce() -> None:
        for i in range(100):
            producer.produce("fs", b"%d" % i, partition=i % 2)
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(10)

    writer = threading.Thread(target=produce)
    writer.start()
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                      enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        c.assign([TopicPartition("fs", 0), TopicPartition("fs", 1)])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        deadline = time.time() + 30
        while sum(map(len, got.values())) < 100 and time.time() < deadline:
            for tp, records in c.poll(timeout_ms=200).items():
                got[tp.partition].extend(r.value for r in records)
        writer.join()
        assert got == {p: [b"%d" % i for i in range(p, 100, 2)] for p in (0, 1)}
        broker = embedded.broker
        assert broker is not None
        sessions = list(broker.fetch_sessions._sessions.values())
        # kafka-python opened a session and kept it going with incremental fetches.
        assert len(sessions) == 1 and sessions[0].epoch > 10
        assert sorted(p for _, p in sessions[0].partitions) == [0, 1]
        # Dropping a partition from the assignment removes it from the session.
        c.assign([TopicPartition("fs", 1)])
        _produce(bs, 1)
        deadline = time.time() + 10
        more: list[bytes] = []
        while not more and time.time() < deadline:
            for records in c.poll(timeout_ms=200).values():
                more.extend(r.value for r in records)
        assert more == [b"v0"]
        sessions = list(broker.fetch_sessions._sessions.values())
        assert [sorted(p for _, p in s.partitions) for s in sessions] == [[1]]
    finally:
        c.close()
