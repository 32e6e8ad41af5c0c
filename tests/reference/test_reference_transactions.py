"""Refused transactional requests, Apache Kafka against ADS.

A client library hides most of these answers behind its own state machine, so each step is
one request sent through kafka-python's protocol classes (tests/kafka_python_wire.py) at
the versions librdkafka uses, to a Kafka broker (tests/kafka_reference.py) and to an ADS
broker; the two must answer the same error codes, and the codes the comments name are
Kafka's. The sequence is the classic transaction protocol (no KIP-890 part 2).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)

from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_python_wire import GROUP, Wire
from kafka_reference import KafkaReference

pytestmark = pytest.mark.kafka_reference

TOPIC = "txn-topic"
OFFSETS_TOPIC = "txn-offsets-topic"


def _name(code: int) -> str:
    return ErrorCode(code).name


def _init(wire: Wire, txn_id: str, timeout_ms: int = 60_000) -> Any:
    return wire.init_producer_id(txn_id, timeout_ms)


def _add(wire: Wire, txn_id: str, pid: int, epoch: int, topic: str,
         partitions: list[int]) -> list[str]:
    """AddPartitionsToTxn v3: the error of each partition, in order."""
    r = AddPartitionsToTxnRequest
    answer = wire.request(r(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[r.AddPartitionsToTxnTopic(name=topic, partitions=partitions)],
        version=3))
    return [_name(p.partition_error_code)
            for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]


def _end(wire: Wire, txn_id: str, pid: int, epoch: int, commit: bool) -> str:
    return _name(wire.request(EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit,
        version=3)).error_code)


def _create_topic(bootstrap: str, name: str = TOPIC) -> None:
    """Creates the topic and returns once the broker's Metadata shows its partition led:
    Kafka answers CreateTopics once its controller has the topic, and its broker checks
    TxnOffsetCommit's topics against its own metadata cache, which follows a moment later."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(15)
    deadline = time.monotonic() + 15
    while True:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and topic.partitions \
                and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        assert time.monotonic() < deadline, f"{name} not in the metadata of {bootstrap}"
        time.sleep(0.05)


def _producer_answers(bootstrap: str) -> dict[str, object]:
    _create_topic(bootstrap)
    a: dict[str, object] = {}
    with Wire(bootstrap) as w:
        init = _init(w, "tx-a")
        pid, epoch = init.producer_id, init.producer_epoch
        a["init"] = _name(init.error_code)
        a["init, timeout above the maximum"] = _name(
            _init(w, "tx-b", timeout_ms=2**31 - 1).error_code)
        a["commit, no transaction"] = _end(w, "tx-a", pid, epoch, commit=True)
        a["abort, no transaction"] = _end(w, "tx-a", pid, epoch, commit=False)
        a["commit, unknown transactional id"] = _end(w, "tx-none", pid, epoch, commit=True)
        a["add, unknown transactional id"] = _add(w, "tx-none", pid, epoch, TOPIC, [0])
        a["add, unknown producer id"] = _add(w, "tx-a", pid + 1000, epoch, TOPIC, [0])
        a["add, epoch ahead"] = _add(w, "tx-a", pid, epoch + 1, TOPIC, [0])
        a["add, unknown partition"] = _add(w, "tx-a", pid, epoch, TOPIC, [0, 7])
        a["add, unknown topic and epoch ahead"] = _add(w, "tx-a", pid, epoch + 1, "nope", [0])
        a["add"] = _add(w, "tx-a", pid, epoch, TOPIC, [0])
        a["add again"] = _add(w, "tx-a", pid, epoch, TOPIC, [0])
        a["commit, epoch ahead"] = _end(w, "tx-a", pid, epoch + 1, commit=True)
        a["abort"] = _end(w, "tx-a", pid, epoch, commit=False)
        fenced = _init(w, "tx-a")
        a["init again: same id, next epoch"] = (fenced.producer_id == pid,
                                                fenced.producer_epoch - epoch)
        a["add, fenced epoch"] = _add(w, "tx-a", pid, epoch, TOPIC, [0])
        a["commit, fenced epoch"] = _end(w, "tx-a", pid, epoch, commit=True)
    return a


PRODUCER_EXPECTED = {
    "init": "NONE",
    "init, timeout above the maximum": "INVALID_TRANSACTION_TIMEOUT",
    "commit, no transaction": "INVALID_TXN_STATE",
    "add, unknown producer id": ["INVALID_PRODUCER_ID_MAPPING"],
    "add, epoch ahead": ["PRODUCER_FENCED"],
    "add, unknown partition": ["OPERATION_NOT_ATTEMPTED", "UNKNOWN_TOPIC_OR_PARTITION"],
    "add": ["NONE"],
    "init again: same id, next epoch": (True, 1),
    "add, fenced epoch": ["PRODUCER_FENCED"],
}


def test_transactional_refusals_match_kafka(kafka: KafkaReference,
                                            ads: EmbeddedBroker) -> None:
    reference = _producer_answers(kafka.bootstrap)
    assert {k: reference[k] for k in PRODUCER_EXPECTED} == PRODUCER_EXPECTED
    assert _producer_answers(ads.bootstrap_servers) == reference


def _describe_state(wire: Wire, txn_id: str) -> str:
    answer = wire.request(DescribeTransactionsRequest(transactional_ids=[txn_id], version=0))
    return str(answer.transaction_states[0].transaction_state)


def _under_replicated_answers(bootstrap: str) -> dict[str, object]:
    """A transaction over a partition whose topic wants two in-sync replicas and has one
    replica: Kafka 4 caps min.insync.replicas at the replicas, so the acks=all abort marker
    is written and the abort completes."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("two-isr-wanted", 1, 1, config={"min.insync.replicas": "2"})
    admin.create_topics([topic], operation_timeout=10)[topic.topic].result(15)
    a: dict[str, object] = {}
    with Wire(bootstrap) as w:
        init = _init(w, "tx-d")
        pid, epoch = init.producer_id, init.producer_epoch
        a["add"] = _add(w, "tx-d", pid, epoch, topic.topic, [0])
        a["abort"] = _end(w, "tx-d", pid, epoch, commit=False)
        deadline = time.monotonic() + 10
        state = _describe_state(w, "tx-d")
        while state != "CompleteAbort" and time.monotonic() < deadline:
            time.sleep(0.1)
            state = _describe_state(w, "tx-d")
        a["state"] = state
        a["commit after the abort"] = _end(w, "tx-d", pid, epoch, commit=True)
        a["abort again"] = _end(w, "tx-d", pid, epoch, commit=False)
    return a


def test_abort_over_min_isr_above_replicas_matches_kafka(kafka: KafkaReference,
                                                         ads: EmbeddedBroker) -> None:
    reference = _under_replicated_answers(kafka.bootstrap)
    assert reference == {"add": ["NONE"], "abort": "NONE", "state": "CompleteAbort",
                         "commit after the abort": "INVALID_TXN_STATE",
                         "abort again": "NONE"}
    assert _under_replicated_answers(ads.bootstrap_servers) == reference


def _join(wire: Wire, group: str) -> tuple[int, str]:
    """One consumer joins `group` (JoinGroup v5, SyncGroup v3): its generation and id."""
    wire.await_coordinator(group, GROUP)
    member = ""
    deadline = time.monotonic() + 30
    while True:
        joined = wire.request(JoinGroupRequest(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
            member_id=member, group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                 metadata=b"")],
            version=5))
        member = joined.member_id
        if joined.error_code == 0:
            break
        assert joined.error_code in (ErrorCode.MEMBER_ID_REQUIRED,
                                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                     ErrorCode.NOT_COORDINATOR), joined
        assert time.monotonic() < deadline, joined
        if joined.error_code == ErrorCode.NOT_COORDINATOR:
            # Kafka names itself before its group coordinator has taken the partition on
            # (kafka_python_wire.NOT_COORDINATOR): find it again, as clients do.
            wire.await_coordinator(group, GROUP)
    synced = wire.request(SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=member,
        group_instance_id=None,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member,
                                                                 assignment=b"")],
        version=3))
    assert synced.error_code == 0, synced
    return joined.generation_id, member


def _txn_commit(wire: Wire, pid: int, epoch: int, group: str, generation: int,
                member: str, topic: str = OFFSETS_TOPIC) -> str:
    r = TxnOffsetCommitRequest
    answer = wire.request(r(
        transactional_id="tx-c", group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id=generation, member_id=member, group_instance_id=None,
        topics=[r.TxnOffsetCommitRequestTopic(name=topic, partitions=[
            r.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                committed_metadata="")])],
        version=3))
    return _name(answer.topics[0].partitions[0].error_code)


def _offset_commit_answers(bootstrap: str) -> dict[str, str]:
    # Its own topic: the answers must not depend on another test having run first.
    _create_topic(bootstrap, OFFSETS_TOPIC)
    a: dict[str, str] = {}
    with Wire(bootstrap) as w:
        generation, member = _join(w, "txn-group")
        init = _init(w, "tx-c")
        pid, epoch = init.producer_id, init.producer_epoch
        a["commit offsets, not added to the transaction"] = _txn_commit(
            w, pid, epoch, "txn-group", generation, member)
        a["add offsets"] = _name(w.request(AddOffsetsToTxnRequest(
            transactional_id="tx-c", producer_id=pid, producer_epoch=epoch,
            group_id="txn-group", version=3)).error_code)
        a["commit offsets, next generation"] = _txn_commit(
            w, pid, epoch, "txn-group", generation + 1, member)
        a["commit offsets, unknown member"] = _txn_commit(
            w, pid, epoch, "txn-group", generation, "nobody")
        a["commit offsets, no generation nor member"] = _txn_commit(
            w, pid, epoch, "txn-group", -1, "")
        a["commit offsets, unknown topic"] = _txn_commit(
            w, pid, epoch, "txn-group", generation, member, topic="no-such-topic")
        a["commit offsets"] = _txn_commit(w, pid, epoch, "txn-group", generation, member)
        a["commit"] = _end(w, "tx-c", pid, epoch, commit=True)
    return a


def test_txn_offset_commit_generation_checks_match_kafka(kafka: KafkaReference,
                                                         ads: EmbeddedBroker) -> None:
    reference = _offset_commit_answers(kafka.bootstrap)
    assert reference["commit offsets, next generation"] == "ILLEGAL_GENERATION"
    assert reference["commit offsets, unknown member"] == "UNKNOWN_MEMBER_ID"
    assert reference["commit offsets, unknown topic"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert reference["commit offsets"] == "NONE"
    assert _offset_commit_answers(ads.bootstrap_servers) == reference
