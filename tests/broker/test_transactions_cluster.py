"""Transactions across brokers: three `ads broker` processes on a real ZooKeeper, partitions
of one transaction led by different brokers, so the coordinator writes its markers there
with WriteTxnMarkers (`ads.broker.markers`), offsets included, and leaders verify
transactional writes with the coordinator on another broker (`ads.broker.txn_verify`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic
from test_transactions_confluent import consume_all, txn_producer

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster
from kafka_wire import RawConnection

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]


@pytest.fixture
def small_cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    # Kafka's defaults: __transaction_state replicated three times, min.insync.replicas 2.
    c = Cluster(tmp_path, 3, "transaction.state.log.num.partitions=3",
                "offsets.topic.num.partitions=3", "group.initial.rebalance.delay.ms=0")
    try:
        yield c.start()
    finally:
        c.stop()


def test_transactions_cluster_markers_reach_every_leader(small_cluster: Cluster) -> None:
    c = small_cluster
    admin = c.admin(1)
    admin.create_topics([NewTopic("xtx", 6, 1), NewTopic("xin", 3, 1)])["xtx"].result(30)
    c.wait_for(lambda: len({p.leader for p in admin.list_topics("xtx", timeout=10)
                            .topics["xtx"].partitions.values()}) == 3,
               "xtx's leaders on all three brokers")
    p = txn_producer(c.bootstrap, "cluster-tx")
    group = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "cluster-group"})
    p.begin_transaction()
    for i in range(12):
        p.produce("xtx", value=f"kept-{i}".encode(), partition=i % 6)
    p.send_offsets_to_transaction([TopicPartition("xin", i, 10 + i) for i in range(3)],
                                  group.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(12):
        p.produce("xtx", value=f"dropped-{i}".encode(), partition=i % 6)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("xtx", value=b"kept-last", partition=5)
    p.commit_transaction(30)

    kept = sorted([f"kept-{i}".encode() for i in range(12)] + [b"kept-last"])
    assert sorted(consume_all(c.bootstrap, "xtx", 6, "read_committed", 13)) == kept
    assert len(consume_all(c.bootstrap, "xtx", 6, "read_uncommitted", 25)) == 25
    committed = group.committed([TopicPartition("xin", i) for i in range(3)], 30)
    assert [tp.offset for tp in committed] == [10, 11, 12]
    group.close()

    # KIP-890 part 1 across brokers: a leader asks the coordinator on another broker, and
    # refuses a transactional write to a partition outside an ongoing transaction.
    md = admin.list_topics("xtx", timeout=10)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    with RawConnection(c.bootstrap.split(",")[0]) as conn:
        found = conn.request(m.ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(
            key="cluster-tx", key_type=1))
    with RawConnection(brokers[found.node_id]) as conn:  # only the coordinator knows it
        pid = conn.request(m.ApiKey.DESCRIBE_TRANSACTIONS, 0, m.DescribeTransactionsRequest(
            transactional_ids=["cluster-tx"])).transaction_states[0]
    assert pid.error_code == ErrorCode.NONE
    index, leader = next((p.id, p.leader) for p in md.topics["xtx"].partitions.values()
                         if p.leader != found.node_id)
    batch = build_batch([(None, b"late")], producer_id=pid.producer_id,
                        producer_epoch=pid.producer_epoch, base_sequence=1000,
                        is_transactional=True)
    P = m.ProduceRequest  # noqa: N806
    with RawConnection(brokers[leader]) as conn:
        resp = conn.request(m.ApiKey.PRODUCE, 9, P(
            transactional_id="cluster-tx", acks=-1, timeout_ms=10000, topic_data=[
                P.TopicProduceData(name="xtx", partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=index, records=batch)])]))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TXN_STATE
