"""A compacted topic with committed and aborted transactions and tombstones: the cleaner
removes the aborted records, then the markers of transactions with no data left once
`delete.retention.ms` has passed; read_committed consumers of confluent-kafka and
kafka-python see exactly the committed records throughout, and a restart that rebuilds the
producer state from the cleaned log alone finds the same state."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from test_transactions_confluent import _list_offsets, consume_all, txn_producer
from test_transactions_other_clients import kafka_python_read

from ads.protocol import messages as m
from ads.records.batch import BatchHeader, iter_batches
from ads.records.errors import RecordError
from broker_process import BrokerProcess
from conftest import create_topic
from kafka_wire import RawConnection

SETS = ("transaction.state.log.num.partitions=1", "offsets.topic.num.partitions=1",
        "log.cleaner.backoff.ms=50")
TOPIC = "txc"
FILLER = b"f" * 100


def headers(part_dir: Path) -> list[BatchHeader] | None:
    """Every batch header of the partition's segments; None if a pass swapped files under
    the read."""
    out: list[BatchHeader] = []
    try:
        for path in sorted(part_dir.glob("*.log")):
            out += [hdr for _, hdr in iter_batches(path.read_bytes())]
    except (OSError, RecordError):
        return None
    return out


def producers(bootstrap: str) -> list[tuple[int, int, int, int, int]]:
    DP = m.DescribeProducersRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.DESCRIBE_PRODUCERS, 0, DP(
            topics=[DP.TopicRequest(name=TOPIC, partition_indexes=[0])]))
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return sorted((s.producer_id, s.producer_epoch, s.last_sequence, s.coordinator_epoch,
                   s.current_txn_start_offset) for s in part.active_producers)


def committed_values(values: list[bytes | None]) -> list[bytes | None]:
    return sorted((v for v in values if v != FILLER), key=lambda v: v or b"")


@pytest.mark.broker_process
def test_transactions_compaction_removes_markers_and_keeps_producer_state(
        tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", None, *SETS).start()
    try:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, TOPIC, 1, **{
            "cleanup.policy": "compact", "segment.bytes": "600", "file.delete.delay.ms": "0",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3000"})
        txn = txn_producer(bootstrap, "txc-a", **{"linger.ms": 0, "batch.num.messages": 1})
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                          "batch.num.messages": 1})

        def transaction(records: list[tuple[bytes, bytes]], commit: bool) -> None:
            txn.begin_transaction()
            for key, value in records:
                txn.produce(TOPIC, key=key, value=value, partition=0)
            txn.flush(15)
            if commit:
                txn.commit_transaction(15)
            else:
                txn.abort_transaction(15)

        def fill(tag: str, count: int = 8) -> None:
            for i in range(count):
                plain.produce(TOPIC, key=f"filler-{tag}-{i}".encode(), value=FILLER,
                              partition=0)
            assert plain.flush(15) == 0

        transaction([(b"k1", b"a1"), (b"k2", b"a2")], commit=True)   # 0-1, marker 2
        transaction([(b"k1", b"b1"), (b"k3", b"b3")], commit=False)  # 3-4, marker 5
        transaction([(b"k4", b"c4")], commit=True)                   # 6, marker 7
        plain.produce(TOPIC, key=b"k1", value=b"new1", partition=0)  # 8
        plain.produce(TOPIC, key=b"k2", value=None, partition=0)     # 9: supersedes a2
        # 10: supersedes c4, whose batch stays (empty): the producer's last sequence
        plain.produce(TOPIC, key=b"k4", value=b"new4", partition=0)
        fill("a")
        committed = [b"new1", b"new4"]

        # Passes run as the log gets dirty: the first removes the aborted and superseded
        # records, a later one finds the first two transactions empty and starts their
        # markers' delete.retention.ms, a pass after it removes them.
        part_dir = tmp_path / "data" / f"{TOPIC}-0"
        markers: set[int] = set()
        deadline = time.monotonic() + 60
        step = 0
        while time.monotonic() < deadline:
            found = headers(part_dir)
            if found is not None:
                markers = {h.base_offset for h in found if h.is_control and h.records_count}
                if 2 not in markers and 5 not in markers:
                    break
            step += 1
            fill(f"s{step}", 4)
            # Between passes read_committed consumers see exactly the committed records.
            if step == 3:
                seen = consume_all(bootstrap, TOPIC, 1, "read_committed", 0)
                assert all(v in (b"a1", b"a2", b"c4", *committed, None, FILLER) for v in seen)
                assert b"b1" not in seen and b"b3" not in seen
            time.sleep(0.5)
        assert 2 not in markers and 5 not in markers, markers
        # The producer's last data batch is kept, empty, so its transaction keeps its marker.
        assert 7 in markers
        last = [h for h in headers(part_dir) or [] if h.base_offset == 6]
        assert [h.records_count for h in last] == [0]

        end = _list_offsets(bootstrap, TOPIC, 0)
        assert _list_offsets(bootstrap, TOPIC, 1) == end  # nothing open
        fillers = 8 + 4 * step
        read_committed = consume_all(bootstrap, TOPIC, 1, "read_committed", fillers + 2)
        assert committed_values(read_committed) == committed
        assert committed_values(kafka_python_read(bootstrap, TOPIC, 1, "read_committed")) == (
            committed)
        assert committed_values(consume_all(bootstrap, TOPIC, 1, "read_uncommitted",
                                            fillers + 2)) == committed

        # A restart that must rebuild producer state from the cleaned log alone.
        state = producers(bootstrap)
        assert len(state) == 1 and state[0][2] == 4 and state[0][4] == -1  # sequences 0-4
        broker.kill9()
        for snapshot in part_dir.glob("*.snapshot"):
            snapshot.unlink()
        broker.start()
        assert producers(bootstrap) == state
        # The same producer goes on in sequence, and its transaction still commits.
        transaction([(b"k5", b"e5")], commit=True)
        assert producers(bootstrap)[0][2] == 5
        expected = sorted([*committed, b"e5"])
        assert committed_values(consume_all(bootstrap, TOPIC, 1, "read_committed",
                                            fillers + 3)) == expected
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill9()
