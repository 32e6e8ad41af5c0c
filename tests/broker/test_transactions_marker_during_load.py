"""A transaction's marker on `__consumer_offsets` that arrives while that partition is still
loading: the offsets the transaction committed must count once the load ends.

The broker restarts with a large `__consumer_offsets` partition (its load takes seconds) and
a transaction left open with offsets in it (TxnOffsetCommit); the producer commits as soon
as the broker is back, so the coordinator writes the marker while the group's partition
loads. Written past the end the load reads and not replayed, the marker used to be lost to
the group coordinator: the offsets stayed pending, and a read_committed consumer asking for
them (OffsetFetch with require_stable) got UNSTABLE_OFFSET_COMMIT for good. The marker is
now a write of the coordinator's shard, refused while it loads and sent again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ads.protocol import messages as m
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
                             "transactional.id": "mdl-txn", "transaction.timeout.ms": 60_000,
                             "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("mdl-out", value=b"copied")
        producer.send_offsets_to_transaction([TopicPartition("mdl-in", 0, 42)],
                                             consumer.consumer_group_metadata(), 15)
        producer.flush(15)

        broker.stop()
        broker.start()
        # Back at once (the listener opens while the partitions load): the coordinator
        # writes the markers while the group's partition (400,000 records, about 3 s on a
        # 2-core machine) is still loading.
        producer.commit_transaction(30)

        # The offset committed in the transaction counts: a read_committed consumer (which
        # asks for stable offsets) gets it; a pending one would answer UNSTABLE_OFFSET_COMMIT
        # until this call times out.
        committed = consumer.committed([TopicPartition("mdl-in", 0)], 30)
        assert committed[0].offset == 42
        log = broker.log()
        loads = re.findall(r"loaded __consumer_offsets-0: (\d+) records", log)
        assert loads and int(loads[-1]) > FILL_REQUESTS * FILL_PARTITIONS * FILL_REPEAT
        # The marker did come during the load: refused, then sent again.
        assert re.search(r"marker of producer \d+ on __consumer_offsets-0 not committed: "
                         r"NOT_LEADER_OR_FOLLOWER", log), log[-3000:]
        producer.flush(5)
        consumer.close()
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill9()
