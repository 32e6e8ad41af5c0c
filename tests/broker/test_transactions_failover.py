"""A transaction's end survives the loss of a leader that wrote its marker alone.

Three `ads broker` processes on a real ZooKeeper. The data partition has two replicas, a
leader L and a follower F (min.insync.replicas=2); the transaction coordinator runs on
the third broker C. The producer's records are acknowledged (acks=all) by both; then F is
paused with SIGSTOP, so the marker L writes for the commit or abort cannot be copied, and
L is killed with SIGKILL while it has the marker alone. F resumes and becomes the leader
without the marker, its ISR only itself: the marker is refused with NOT_ENOUGH_REPLICAS
until L returns and catches up. Markers are committed like data (acks=all, sent again to
whoever leads), so in the end the transaction is ended on every replica, read_committed
consumers see exactly the committed records, and the last stable offset reaches the high
watermark. When markers were written with acks=1 the transaction stayed open on F: its
records invisible (or an abort unresolved) and the last stable offset pinned forever.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from test_transactions_confluent import consume_all, txn_producer

from ads.protocol import messages as m
from ads.records.batch import read_batch_header
from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster
from kafka_wire import RawConnection
from replication_support import identical_logs, partition_state, replica_batches

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]

TXN_STATE = "__transaction_state"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 3, "transaction.state.log.num.partitions=1",
                "transaction.state.log.replication.factor=2")
    try:
        yield c.start()
    finally:
        c.stop()


def _list_offset(bootstrap: str, topic: str, isolation: int) -> int:
    """The latest offset a consumer of the isolation level sees (1: the LSO)."""
    LO = m.ListOffsetsRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.LIST_OFFSETS, 5, LO(
            replica_id=-1, isolation_level=isolation, topics=[LO.ListOffsetsTopic(
                name=topic, partitions=[LO.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, timestamp=-1)])]))
    part = resp.topics[0].partitions[0]
    return int(part.offset) if part.error_code == 0 else -1


def _producer_txn_start(bootstrap: str, topic: str) -> int:
    """DescribeProducers on the leader: the first offset of the producer's open
    transaction there (-1: none open, its marker written)."""
    DP = m.DescribeProducersRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.DESCRIBE_PRODUCERS, 0, DP(topics=[DP.TopicRequest(
            name=topic, partition_indexes=[0])]))
    states = resp.topics[0].partitions[0].active_producers
    return max((s.current_txn_start_offset for s in states), default=-1)


def _markers(data_dir: Path, topic: str) -> int:
    return sum(1 for _, _, data in replica_batches(data_dir, topic, 0)
               if read_batch_header(data).is_control)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_transactions_failover_marker_committed_on_every_replica(
        cluster: Cluster, commit: bool) -> None:
    c = cluster
    p = txn_producer(c.bootstrap, "failover-tx", **{"transaction.timeout.ms": 60000})
    c.wait_for(lambda: partition_state(c, TXN_STATE, 0)["leader"] > 0, "a coordinator")
    coordinator = partition_state(c, TXN_STATE, 0)["leader"]
    txn_replicas = set(c.admin().list_topics(TXN_STATE, timeout=10)
                       .topics[TXN_STATE].partitions[0].replicas)
    # L also holds the coordinator's log, so the coordinator keeps a quorum while F is
    # paused; F holds only the data partition.
    leader = next(n for n in txn_replicas if n != coordinator)
    follower = next(n for n in c.brokers if n not in txn_replicas)
    admin = c.admin()
    admin.create_topics([NewTopic("eo", num_partitions=1, replica_assignment=[[leader, follower]],
                                  config={"min.insync.replicas": "2"})])["eo"].result(30)
    c.wait_for(lambda: partition_state(c, "eo", 0)["isr"] == [leader, follower]
               and partition_state(c, "eo", 0)["leader"] == leader, "eo led by L with F")

    p.begin_transaction()
    values = [f"{'kept' if commit else 'dropped'}-{i}".encode() for i in range(20)]
    for v in values:
        p.produce("eo", value=v, partition=0)
    assert p.flush(30) == 0  # acks=all: both replicas have the records
    paused = c.brokers[follower].proc
    assert paused is not None
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        # The fetch F had waiting on L answers empty after replica.fetch.wait.max.ms
        # (500 ms), into F's socket; F sends no other until it resumes.
        time.sleep(1.0)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        # L has written the marker (the transaction is no longer open there), and F,
        # paused, has not copied it: L must not answer it as committed.
        leader_addr = c.brokers[leader].bootstrap
        c.wait_for(lambda: _producer_txn_start(leader_addr, "eo") == -1, "the marker on L")
        assert _list_offset(leader_addr, "eo", 0) == len(values)  # the high watermark
        assert _list_offset(leader_addr, "eo", 1) == 0  # the LSO waits for the marker
        c.brokers[leader].kill9()
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    c.wait_for(lambda: partition_state(c, "eo", 0)["leader"] == follower, "F leads eo",
               timeout_s=60)
    # F alone is below min.insync.replicas: the coordinator's marker is refused until L
    # returns, and sent again.
    c.wait_for(lambda: "on eo-0 not committed: NOT_ENOUGH_REPLICAS" in c.brokers[follower].log(),
               "the marker refused on F", timeout_s=60)
    c.brokers[leader].start()

    c.wait_for(lambda: _producer_txn_start(
        c.brokers[partition_state(c, "eo", 0)["leader"]].bootstrap, "eo") == -1,
        "the transaction ended on the new leader", timeout_s=90)
    p.begin_transaction()
    p.produce("eo", value=b"after", partition=0)
    p.commit_transaction(60)

    expected = sorted([*values, b"after"] if commit else [b"after"])
    assert sorted(consume_all(c.bootstrap, "eo", 1, "read_committed", len(expected))) == expected
    lead = c.brokers[partition_state(c, "eo", 0)["leader"]].bootstrap
    c.wait_for(lambda: _list_offset(lead, "eo", 1) == _list_offset(lead, "eo", 0),
               "the LSO at the high watermark")
    c.wait_for(lambda: identical_logs(c, "eo", 1, [leader, follower]), "both replicas equal",
               timeout_s=60)
    for node in (leader, follower):
        assert _markers(c.brokers[node].data_dir, "eo") >= 2  # this transaction's, "after"'s
