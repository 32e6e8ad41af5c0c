"""Transactions with confluent-kafka (librdkafka): the transactional producer, read_committed
and read_uncommitted consumers, offsets in the transaction, fencing and timeouts."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from conftest import create_topic
from kafka_wire import RawConnection


def txn_producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 30000, **extra})
    p.init_transactions(15)
    return p


def consume_all(bootstrap: str, topic: str, partitions: int, isolation: str,
                expected: int, group: str | None = None) -> list[bytes]:
    """Every record a consumer of the isolation level reads, waiting up to 15 s for
    `expected` of them (and a little longer for any extra)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"read-{isolation}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    quiet_until = None
    while time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg.value())
            continue
        if len(got) >= expected:
            quiet_until = quiet_until or time.monotonic() + 1.0
            if time.monotonic() > quiet_until:
                break
    c.close()
    return got


def describe(bootstrap: str, txn_id: str) -> m.DescribeTransactionsResponse.TransactionState:
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.DESCRIBE_TRANSACTIONS, 0,
                            m.DescribeTransactionsRequest(transactional_ids=[txn_id]))
    state: m.DescribeTransactionsResponse.TransactionState = resp.transaction_states[0]
    return state


def wait_for_state(bootstrap: str, txn_id: str, state: str) -> str:
    seen = ""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen = describe(bootstrap, txn_id).transaction_state
        if seen == state:
            break
        time.sleep(0.1)
    return seen


def test_transactions_confluent_commit_and_abort_across_partitions(bootstrap: str) -> None:
    create_topic(bootstrap, "tx", 3)
    p = txn_producer(bootstrap, "tx-commit-abort")
    p.begin_transaction()
    for i in range(9):
        p.produce("tx", value=f"committed-{i}".encode(), partition=i % 3)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(9):
        p.produce("tx", value=f"aborted-{i}".encode(), partition=i % 3)
    p.flush(15)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce("tx", value=b"committed-last", partition=1)
    p.commit_transaction(15)

    committed = consume_all(bootstrap, "tx", 3, "read_committed", 10)
    everything = consume_all(bootstrap, "tx", 3, "read_uncommitted", 19)
    assert sorted(committed) == sorted([f"committed-{i}".encode() for i in range(9)]
                                       + [b"committed-last"])
    assert sorted(everything) == sorted(committed + [f"aborted-{i}".encode() for i in range(9)])
    d = describe(bootstrap, "tx-commit-abort")
    assert (d.error_code, d.transaction_state) == (ErrorCode.NONE, "CompleteCommit")


def _list_offsets(bootstrap: str, topic: str, isolation: int) -> int:
    LO = m.ListOffsetsRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.LIST_OFFSETS, 7, LO(
            replica_id=-1, isolation_level=isolation, topics=[LO.ListOffsetsTopic(
                name=topic, partitions=[LO.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, timestamp=-1)])]))
    return int(resp.topics[0].partitions[0].offset)


def test_transactions_confluent_open_transaction_holds_the_last_stable_offset(
        bootstrap: str) -> None:
    create_topic(bootstrap, "lso", 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("lso", value=b"before")
    plain.flush(10)
    p = txn_producer(bootstrap, "tx-lso")
    p.begin_transaction()
    p.produce("lso", value=b"open")
    p.flush(10)
    plain.produce("lso", value=b"after")
    plain.flush(10)
    # Offsets: 0 before, 1 open (transactional), 2 after. The LSO stays at 1.
    assert _list_offsets(bootstrap, "lso", 0) == 3
    assert _list_offsets(bootstrap, "lso", 1) == 1
    assert consume_all(bootstrap, "lso", 1, "read_committed", 1) == [b"before"]
    p.commit_transaction(15)
    # The marker takes offset 3.
    assert _list_offsets(bootstrap, "lso", 1) == 4
    assert consume_all(bootstrap, "lso", 1, "read_committed", 3) == [b"before", b"open",
                                                                    b"after"]


def test_transactions_confluent_offsets_committed_with_the_transaction(bootstrap: str) -> None:
    create_topic(bootstrap, "in", 2)
    create_topic(bootstrap, "out", 2)
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        source.produce("in", value=f"v{i}".encode(), partition=i % 2)
    source.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe(["in"])
    p = txn_producer(bootstrap, "tx-copier")

    def copy_batch(commit: bool) -> int:
        p.begin_transaction()
        msgs = consumer.consume(10, 10)
        for msg in msgs:
            assert not msg.error()
            p.produce("out", value=msg.value().upper(), partition=msg.partition())
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                      consumer.consumer_group_metadata(), 15)
        if commit:
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
        return len(msgs)

    assert copy_batch(commit=False) == 10  # aborted: output and offsets discarded
    tps = [TopicPartition("in", 0), TopicPartition("in", 1)]
    assert [tp.offset for tp in consumer.committed(tps, 10)] == [-1001, -1001]
    # Rewind to the committed offsets, as an application restarts after an abort.
    for tp in consumer.assignment():
        consumer.seek(TopicPartition(tp.topic, tp.partition, 0))
    assert copy_batch(commit=True) == 10
    assert [tp.offset for tp in consumer.committed(tps, 10)] == [5, 5]
    consumer.close()
    out = consume_all(bootstrap, "out", 2, "read_committed", 10)
    assert sorted(out) == sorted(f"V{i}".encode() for i in range(10))


def test_transactions_confluent_new_instance_fences_the_old(bootstrap: str) -> None:
    create_topic(bootstrap, "fence", 1)
    old = txn_producer(bootstrap, "tx-fence")
    old.begin_transaction()
    old.produce("fence", value=b"from-old")
    old.flush(10)
    new = txn_producer(bootstrap, "tx-fence")  # aborts what the old one left open
    new.begin_transaction()
    new.produce("fence", value=b"from-new")
    new.commit_transaction(15)
    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(15)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert consume_all(bootstrap, "fence", 1, "read_committed", 1) == [b"from-new"]
    assert sorted(consume_all(bootstrap, "fence", 1, "read_uncommitted", 2)) == [
        b"from-new", b"from-old"]


def test_transactions_confluent_open_transaction_aborted_after_its_timeout(
        bootstrap: str) -> None:
    create_topic(bootstrap, "slow", 1)
    p = txn_producer(bootstrap, "tx-slow", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("slow", value=b"left-open")
    p.flush(10)
    assert _list_offsets(bootstrap, "slow", 1) == 0
    assert wait_for_state(bootstrap, "tx-slow", "CompleteAbort") == "CompleteAbort"
    # The abort marker moved the last stable offset past the transaction.
    assert _list_offsets(bootstrap, "slow", 1) == 2
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    later = txn_producer(bootstrap, "tx-slow-2")
    later.begin_transaction()
    later.produce("slow", value=b"committed")
    later.commit_transaction(15)
    assert consume_all(bootstrap, "slow", 1, "read_committed", 1) == [b"committed"]


def test_transactions_confluent_timeout_above_the_maximum_is_refused(bootstrap: str) -> None:
    with RawConnection(bootstrap) as conn:
        conn.request(m.ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(
            key="tx-too-long", key_type=1))
        resp = conn.request(m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
            transactional_id="tx-too-long", transaction_timeout_ms=900_001))
    assert resp.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
