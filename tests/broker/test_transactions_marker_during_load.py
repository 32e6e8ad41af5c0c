"""A transaction's marker on `__consumer_offsets` that arrives while that partition is still
loading: the offsets the transaction committed must count once the load ends.

The broker restarts with a large `__consumer_offsets` partition (its load takes seconds) and
a transaction left open with offsets in it (TxnOffsetCommit, by a real transactional
producer). As soon as the broker listens, the transaction's COMMIT marker is sent to it the
way a transaction coordinator on another broker sends it (WriteTxnMarkers), while the
group's partition loads. Written past the end the load reads and not replayed, the marker
used to be lost to the group coordinator: the broker answered NONE, the offsets stayed
pending, and a read_committed consumer asking for them (OffsetFetch with require_stable)
got UNSTABLE_OFFSET_COMMIT for good. The marker is now a write of the coordinator's shard,
refused while it loads (NOT_LEADER_OR_FOLLOWER, so its sender tries again) and replayed once
written."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from broker_process import BrokerProcess
from conftest import create_topic
from kafka_wire import RawConnection

SETS = ("offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1",
        # Read in small chunks, the load leaves the event loop to the listener's start-up.
        "offsets.load.buffer.size=16384",
        "group.initial.rebalance.delay.ms=0")
FILL_REQUESTS, FILL_PARTITIONS, FILL_REPEAT = 400, 4, 250  # 400,000 offset records


def fill_offsets(bootstrap: str, group: str) -> None:
    """Simple commits of one group, 1,000 records per request, into the one partition."""
    topic_t = m.OffsetCommitRequest.OffsetCommitRequestTopic
    part_t = topic_t.OffsetCommitRequestPartition
    with RawConnection(bootstrap) as conn:
        for i in range(FILL_REQUESTS):
            request = m.OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1,
                topics=[topic_t(name="filler", partitions=[
                    part_t(partition_index=p, committed_offset=i)
                    for p in range(FILL_PARTITIONS) for _ in range(FILL_REPEAT)])])
            response = conn.request(m.ApiKey.OFFSET_COMMIT, 7, request)
            assert {p.error_code for t in response.topics for p in t.partitions} == {0}


def send_marker_until_written(bootstrap: str, producer_id: int, producer_epoch: int
                              ) -> list[ErrorCode]:
    """WriteTxnMarkers (COMMIT) for the group's partition, again while it is refused; every
    answer, in order."""
    w = m.WriteTxnMarkersRequest.WritableTxnMarker
    request = m.WriteTxnMarkersRequest(markers=[w(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=True,
        coordinator_epoch=0, topics=[w.WritableTxnMarkerTopic(
            name="__consumer_offsets", partition_indexes=[0])])])
    answers: list[ErrorCode] = []
    deadline = time.monotonic() + 30
    with RawConnection(bootstrap) as conn:
        while time.monotonic() < deadline:
            response = conn.request(m.ApiKey.WRITE_TXN_MARKERS, 1, request)
            answers.append(ErrorCode(response.markers[0].topics[0].partitions[0].error_code))
            if answers[-1] is not ErrorCode.NOT_LEADER_OR_FOLLOWER:
                break
            time.sleep(0.05)
    return answers


@pytest.mark.broker_process
def test_transaction_marker_written_while_offsets_partition_loads(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", None, *SETS).start()
    try:
        create_topic(broker.bootstrap, "filler", FILL_PARTITIONS)
        create_topic(broker.bootstrap, "mdl-in", 1)
        create_topic(broker.bootstrap, "mdl-out", 1)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mdl-group",
                             "isolation.level": "read_committed"})
        # The group's offsets partition exists (FindCoordinator) before it is filled.
        consumer.commit(offsets=[TopicPartition("mdl-in", 0, 1)], asynchronous=False)
        fill_offsets(broker.bootstrap, "mdl-filler")
        producer = Producer({"bootstrap.servers": broker.bootstrap,
                             "transactional.id": "mdl-txn", "transaction.timeout.ms": 60_000})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("mdl-out", value=b"copied")
        producer.send_offsets_to_transaction([TopicPartition("mdl-in", 0, 42)],
                                             consumer.consumer_group_metadata(), 15)
        producer.flush(15)

        with RawConnection(broker.bootstrap) as conn:
            state = conn.request(m.ApiKey.DESCRIBE_TRANSACTIONS, 0, m.DescribeTransactionsRequest(
                transactional_ids=["mdl-txn"])).transaction_states[0]
        assert state.transaction_state == "Ongoing"

        broker.stop()
        broker.start()
        # At once, while the group's partition (400,000 records, 2-4 s on a 2-core machine)
        # loads: refused until it is served, then written.
        answers = send_marker_until_written(broker.bootstrap, state.producer_id,
                                            state.producer_epoch)
        assert answers[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER, answers
        assert answers[-1] == ErrorCode.NONE, answers

        # The offset committed in the transaction counts: a read_committed consumer (which
        # asks for stable offsets) gets it; a pending one would answer UNSTABLE_OFFSET_COMMIT
        # until this call times out.
        committed = consumer.committed([TopicPartition("mdl-in", 0)], 30)
        assert committed[0].offset == 42
        loads = re.findall(r"loaded 1 partitions of __consumer_offsets: (\d+) records",
                           broker.log())
        assert loads and int(loads[-1]) > FILL_REQUESTS * FILL_PARTITIONS * FILL_REPEAT
        producer.flush(5)
        consumer.close()
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill9()
