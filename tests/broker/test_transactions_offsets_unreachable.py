"""TxnOffsetCommit when the transaction's coordinator cannot be asked.

Two `ads broker` processes on a real ZooKeeper; the group's coordinator and the
transaction's coordinator on different brokers (`__transaction_state` not replicated).
With the transaction's broker killed, the group's broker cannot verify the transaction
(KIP-890) and answers COORDINATOR_NOT_AVAILABLE, which clients retry: librdkafka aborts
the transaction on NOT_ENOUGH_REPLICAS, Produce's answer to the same failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster
from kafka_wire import RawConnection
from replication_support import partition_state

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(180)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 2, "transaction.state.log.num.partitions=4",
                "transaction.state.log.replication.factor=1",
                "offsets.topic.replication.factor=1")
    try:
        yield c.start()
    finally:
        c.stop()


def _coordinator(bootstrap: str, key: str, key_type: int) -> int:
    with RawConnection(bootstrap) as conn:
        found = conn.request(m.ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(
            key=key, key_type=key_type))
    assert found.error_code == ErrorCode.NONE
    return int(found.node_id)


def test_transactions_txn_offset_commit_coordinator_unreachable(cluster: Cluster) -> None:
    c = cluster
    first = c.brokers[1].bootstrap
    c.wait_for(lambda: _coordinator(first, "g", 0) > 0, "the group coordinator")
    group_node = _coordinator(first, "g", 0)
    txn_id = next(t for t in (f"tx-{i}" for i in range(64))
                  if _coordinator(first, t, 1) != group_node)
    txn_node = _coordinator(first, txn_id, 1)
    c.brokers[txn_node].kill9()
    c.wait_for(lambda: all(partition_state(c, "__transaction_state", p)["leader"] != txn_node
                           for p in range(4)), "the transaction coordinator gone")
    T = m.TxnOffsetCommitRequest  # noqa: N806
    with RawConnection(c.brokers[group_node].bootstrap, timeout=60) as conn:
        resp = conn.request(m.ApiKey.TXN_OFFSET_COMMIT, 3, T(
            transactional_id=txn_id, group_id="g", producer_id=1000, producer_epoch=0,
            generation_id=-1, member_id="", topics=[T.TxnOffsetCommitRequestTopic(
                name="in", partitions=[
                    T.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=5)])]))
    assert resp.topics[0].partitions[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
