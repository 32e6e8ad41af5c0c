"""Bad input to the transaction APIs over a raw socket: Kafka's error codes, and nothing
changes in the logs (an unknown id, a wrong epoch, EndTxn without a transaction, an unknown
topic, offsets of a group the transaction did not add, writes outside the transaction);
offsets committed in a transaction stay unstable until it commits."""

from __future__ import annotations

import time

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from conftest import create_topic
from kafka_wire import RawConnection

TXN = "raw-tx"


def _find(conn: RawConnection, key: str, key_type: int) -> None:
    resp = conn.request(m.ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(
        key=key, key_type=key_type))
    assert resp.error_code == ErrorCode.NONE


def _add(conn: RawConnection, pid: int, epoch: int, topic: str, partition: int,
         version: int = 3) -> int:
    A = m.AddPartitionsToTxnRequest  # noqa: N806
    resp = conn.request(m.ApiKey.ADD_PARTITIONS_TO_TXN, version, A(
        v3_and_below_transactional_id=TXN, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            A.AddPartitionsToTxnTopic(name=topic, partitions=[partition])]))
    return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0]
               .partition_error_code)


def _end(conn: RawConnection, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(conn.request(m.ApiKey.END_TXN, version, m.EndTxnRequest(
        transactional_id=TXN, producer_id=pid, producer_epoch=epoch,
        committed=commit)).error_code)


def _txn_commit(conn: RawConnection, pid: int, epoch: int, offset: int) -> int:
    T = m.TxnOffsetCommitRequest  # noqa: N806
    resp = conn.request(m.ApiKey.TXN_OFFSET_COMMIT, 3, T(
        transactional_id=TXN, group_id="raw-group", producer_id=pid, producer_epoch=epoch,
        topics=[T.TxnOffsetCommitRequestTopic(name="raw", partitions=[
            T.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset)])]))
    return int(resp.topics[0].partitions[0].error_code)


def _fetch_offset(conn: RawConnection) -> tuple[int, int]:
    F = m.OffsetFetchRequest  # noqa: N806
    resp = conn.request(m.ApiKey.OFFSET_FETCH, 7, F(
        group_id="raw-group", require_stable=True,
        topics=[F.OffsetFetchRequestTopic(name="raw", partition_indexes=[0])]))
    part = resp.topics[0].partitions[0]
    return int(part.error_code), int(part.committed_offset)


def _produce(conn: RawConnection, pid: int, epoch: int, seq: int) -> int:
    P = m.ProduceRequest  # noqa: N806
    batch = build_batch([(None, b"v")], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=True)
    resp = conn.request(m.ApiKey.PRODUCE, 9, P(
        transactional_id=TXN, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="raw", partition_data=[P.TopicProduceData.PartitionProduceData(
                index=0, records=batch)])]))
    return int(resp.responses[0].partition_responses[0].error_code)


def _log_end(conn: RawConnection) -> int:
    LO = m.ListOffsetsRequest  # noqa: N806
    resp = conn.request(m.ApiKey.LIST_OFFSETS, 7, LO(replica_id=-1, topics=[
        LO.ListOffsetsTopic(name="raw", partitions=[
            LO.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    return int(resp.topics[0].partitions[0].offset)


def test_transactions_bad_input_gets_kafkas_codes(bootstrap: str) -> None:
    create_topic(bootstrap, "raw", 1)
    with RawConnection(bootstrap) as conn:
        _find(conn, TXN, 1)
        _find(conn, "raw-group", 0)
        assert _add(conn, 1, 0, "raw", 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        init = conn.request(m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
            transactional_id=TXN, transaction_timeout_ms=60000))
        pid, epoch = init.producer_id, init.producer_epoch
        assert (init.error_code, epoch) == (ErrorCode.NONE, 0)
        assert _end(conn, pid, epoch, commit=True) == ErrorCode.INVALID_TXN_STATE
        assert _add(conn, pid, epoch, "no-such-topic", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _add(conn, pid, epoch + 1, "raw", 0) == ErrorCode.PRODUCER_FENCED
        assert _add(conn, pid, epoch + 1, "raw", 0, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
        # A transactional write before its partition joined the transaction.
        assert _produce(conn, pid, epoch, 0) == ErrorCode.INVALID_TXN_STATE
        # Offsets of a group the transaction did not add.
        assert _txn_commit(conn, pid, epoch, 5) == ErrorCode.INVALID_TXN_STATE
        assert _log_end(conn) == 0
        assert _add(conn, pid, epoch, "raw", 0) == ErrorCode.NONE
        assert _produce(conn, pid, epoch, 0) == ErrorCode.NONE
        add_offsets = conn.request(m.ApiKey.ADD_OFFSETS_TO_TXN, 3, m.AddOffsetsToTxnRequest(
            transactional_id=TXN, producer_id=pid, producer_epoch=epoch, group_id="raw-group"))
        assert add_offsets.error_code == ErrorCode.NONE
        assert _txn_commit(conn, pid, epoch, 5) == ErrorCode.NONE
        assert _fetch_offset(conn) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert _end(conn, pid, epoch, commit=True) == ErrorCode.NONE
        seen = _fetch_offset(conn)
        deadline = time.monotonic() + 10
        while seen != (ErrorCode.NONE, 5) and time.monotonic() < deadline:
            time.sleep(0.05)  # the markers are written after EndTxn is answered
            seen = _fetch_offset(conn)
        assert seen == (ErrorCode.NONE, 5)
        # Until the coordinator has written COMPLETE_COMMIT an abort is told to wait, as in
        # Kafka; then it is refused.
        ended = _end(conn, pid, epoch, commit=False)
        while ended == ErrorCode.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
            time.sleep(0.05)
            ended = _end(conn, pid, epoch, commit=False)
        assert ended == ErrorCode.INVALID_TXN_STATE
        assert _log_end(conn) == 2  # the record and its COMMIT marker
        # A write after the transaction ended does not open a new one.
        assert _produce(conn, pid, epoch, 1) == ErrorCode.INVALID_TXN_STATE
        assert _log_end(conn) == 2


def test_transactions_bad_input_txn_offset_commit_checks_the_member(bootstrap: str) -> None:
    create_topic(bootstrap, "raw", 1)
    with RawConnection(bootstrap, timeout=30) as conn:
        _find(conn, TXN, 1)
        _find(conn, "raw-group", 0)
        joined = conn.request(m.ApiKey.JOIN_GROUP, 2, m.JoinGroupRequest(
            group_id="raw-group", session_timeout_ms=10000, rebalance_timeout_ms=10000,
            protocol_type="consumer", protocols=[
                m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
        assert joined.error_code == ErrorCode.NONE
        init = conn.request(m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
            transactional_id=TXN, transaction_timeout_ms=60000))
        pid, epoch = init.producer_id, init.producer_epoch
        conn.request(m.ApiKey.ADD_OFFSETS_TO_TXN, 3, m.AddOffsetsToTxnRequest(
            transactional_id=TXN, producer_id=pid, producer_epoch=epoch, group_id="raw-group"))

        def commit(generation: int, member: str) -> int:
            T = m.TxnOffsetCommitRequest  # noqa: N806
            resp = conn.request(m.ApiKey.TXN_OFFSET_COMMIT, 3, T(
                transactional_id=TXN, group_id="raw-group", producer_id=pid,
                producer_epoch=epoch, generation_id=generation, member_id=member,
                topics=[T.TxnOffsetCommitRequestTopic(name="raw", partitions=[
                    T.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=3)])]))
            return int(resp.topics[0].partitions[0].error_code)

        generation, member = joined.generation_id, joined.member_id
        assert commit(generation + 1, member) == ErrorCode.ILLEGAL_GENERATION
        assert commit(generation, "someone-else") == ErrorCode.UNKNOWN_MEMBER_ID
        assert commit(generation, member) == ErrorCode.NONE
        assert _end(conn, pid, epoch, commit=False) == ErrorCode.NONE
        # Aborted: the offset never becomes visible.
        deadline = time.monotonic() + 10
        seen = _fetch_offset(conn)
        while seen[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = _fetch_offset(conn)
        assert seen == (ErrorCode.NONE, -1)
