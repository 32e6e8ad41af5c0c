"""New partitions' files are made off the event loop: the broker keeps serving every other
connection meanwhile, shows the partitions as LEADER_NOT_AVAILABLE until they are served,
and finishes the work even if the client that asked goes away."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_wire import RawConnection

C = m.CreateTopicsRequest


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[EmbeddedBroker, threading.Event]]:
    """A broker whose partition-making worker waits until the event is set."""
    with EmbeddedBroker(data_dir=tmp_path / "data") as embedded:
        broker = embedded.broker
        assert broker is not None
        release = threading.Event()
        make = broker.topics._make_logs

        def held_make(*args):  # type: ignore[no-untyped-def]
            assert release.wait(30)
            make(*args)

        broker.topics._make_logs = held_make  # type: ignore[method-assign]
        yield embedded, release
        release.set()


def _create(name: str, partitions: int) -> C:
    return C(topics=[C.CreatableTopic(name=name, num_partitions=partitions,
                                      replication_factor=1, assignments=[], configs=[])],
             timeout_ms=30_000, validate_only=False)


def _metadata(conn: RawConnection, name: str, version: int = 9
              ) -> m.MetadataResponse.MetadataResponseTopic:
    req = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)],
                            allow_auto_topic_creation=False)
    return conn.request(m.ApiKey.METADATA, version, req).topics[0]


def test_topics_other_connections_are_served_while_partitions_are_made(
        held: tuple[EmbeddedBroker, threading.Event]) -> None:
    embedded, release = held
    bs = embedded.bootstrap_servers
    with RawConnection(bs) as creator, RawConnection(bs) as other:
        creator.send_raw(codec.encode_request(
            m.ApiKey.CREATE_TOPICS, 7, 99, "off-loop", _create("slow", 40)))
        time.sleep(0.2)
        topic = _metadata(other, "slow")  # answered while the worker is held
        assert topic.error_code == ErrorCode.NONE and len(topic.partitions) == 40
        assert {p.error_code for p in topic.partitions} == {ErrorCode.LEADER_NOT_AVAILABLE}
        assert {p.leader_id for p in topic.partitions} == {-1}
        again = other.request(m.ApiKey.CREATE_TOPICS, 7, _create("slow", 40))
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        release.set()
        frame = creator.recv_frame()
        assert frame is not None
        topic = _metadata(other, "slow")
        assert {p.error_code for p in topic.partitions} == {ErrorCode.NONE}
    p = Producer({"bootstrap.servers": bs})
    p.produce("slow", b"served", partition=39)
    assert p.flush(10) == 0


def _ask_for_a_coordinator_and_leave(embedded: EmbeddedBroker) -> None:
    """FindCoordinator on a connection closed before the answer: the broker starts making
    `__consumer_offsets` (its worker held by the `held` fixture)."""
    with RawConnection(embedded.bootstrap_servers) as asker:
        asker.send_raw(codec.encode_request(
            m.ApiKey.FIND_COORDINATOR, 3, 5, "off-loop",
            m.FindCoordinatorRequest(key="g", key_type=0)))
        time.sleep(0.2)


def test_topics_offsets_topic_is_finished_after_the_asker_disconnects(
        held: tuple[EmbeddedBroker, threading.Event]) -> None:
    embedded, release = held
    _ask_for_a_coordinator_and_leave(embedded)
    release.set()  # the asking connection is gone; the broker finishes anyway
    broker = embedded.broker
    assert broker is not None
    deadline = time.time() + 10
    served = 0
    while time.time() < deadline:
        served = embedded.call(lambda: sum(
            1 for part in broker.replica_manager if part.topic == "__consumer_offsets"))
        if served == 50:
            break
        time.sleep(0.05)
    assert served == 50
    with RawConnection(embedded.bootstrap_servers) as again:
        resp = again.request(m.ApiKey.FIND_COORDINATOR, 3,
                             m.FindCoordinatorRequest(key="g", key_type=0))
        assert resp.error_code == ErrorCode.NONE and resp.node_id == broker.node_id


def test_topics_stopping_waits_for_the_partition_files_being_made(
        held: tuple[EmbeddedBroker, threading.Event]) -> None:
    # The worker thread cannot be cancelled: a broker that returned from stop() while it
    # still made files raced the removal of its data dir (the embedded broker's temporary
    # folders were left behind, half deleted).
    embedded, release = held
    _ask_for_a_coordinator_and_leave(embedded)
    stopped = threading.Event()
    stopper = threading.Thread(target=lambda: (embedded.stop(), stopped.set()))
    stopper.start()
    try:
        assert not stopped.wait(0.5), "stop() returned while partition files were being made"
    finally:
        release.set()
        stopper.join(30)
    assert stopped.is_set()
    made = sorted(embedded.data_dir.glob("__consumer_offsets-*"))
    assert len(made) == 50  # the worker finished before stop() returned
    time.sleep(0.2)
    assert sorted(embedded.data_dir.glob("__consumer_offsets-*")) == made


def test_topics_metadata_follows_changes_to_a_topic(tmp_path: Path) -> None:
    # Metadata keeps built topic entries between requests: every change must show.
    with EmbeddedBroker(data_dir=tmp_path / "data") as embedded, \
            RawConnection(embedded.bootstrap_servers) as conn:
        conn.request(m.ApiKey.CREATE_TOPICS, 7, _create("changing", 2))
        first = _metadata(conn, "changing", 12)
        assert len(first.partitions) == 2 and _metadata(conn, "changing").partitions
        grow = m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
            name="changing", count=4, assignments=None)], timeout_ms=10_000, validate_only=False)
        assert conn.request(m.ApiKey.CREATE_PARTITIONS, 3, grow).results[0].error_code == 0
        assert sorted(p.partition_index for p in _metadata(conn, "changing").partitions) == \
            [0, 1, 2, 3]
        gone = m.DeleteTopicsRequest(topic_names=["changing"], timeout_ms=10_000)
        conn.request(m.ApiKey.DELETE_TOPICS, 4, gone)
        assert _metadata(conn, "changing").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        conn.request(m.ApiKey.CREATE_TOPICS, 7, _create("changing", 1))
        again = _metadata(conn, "changing", 12)
        assert again.topic_id != first.topic_id and len(again.partitions) == 1


def test_topics_segment_roll_fsync_runs_off_the_loop(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A roll fsyncs the finished segment; held here, it must not hold up any request.
    from ads.storage.segment import LogSegment

    release = threading.Event()
    flush = LogSegment.flush
    held: list[str] = []

    def held_flush(self: LogSegment) -> None:
        held.append(threading.current_thread().name)
        assert release.wait(30)
        flush(self)

    monkeypatch.setattr(LogSegment, "flush", held_flush)
    try:
        with EmbeddedBroker(data_dir=tmp_path / "data") as embedded:
            bs = embedded.bootstrap_servers
            create = C(topics=[C.CreatableTopic(
                name="rolling", num_partitions=1, replication_factor=1, assignments=[],
                configs=[C.CreatableTopic.CreatableTopicConfig(name="segment.bytes",
                                                               value="1024")])],
                timeout_ms=10_000, validate_only=False)
            with RawConnection(bs) as conn:
                assert conn.request(m.ApiKey.CREATE_TOPICS, 7, create).topics[0].error_code == 0
            p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
            for i in range(8):  # about 700 bytes per batch: a roll every other batch
                p.produce("rolling", b"x" * 600 + b"%d" % i)
                assert p.flush(10) == 0
            assert held, "no segment roll happened"
            assert all(name != "ads-embedded-broker" for name in held)  # not the loop thread
            with RawConnection(bs) as conn:
                assert len(_metadata(conn, "rolling").partitions) == 1
            release.set()
    finally:
        release.set()
