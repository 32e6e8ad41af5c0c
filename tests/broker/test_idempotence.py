"""Idempotent producers: the broker deduplicates by producer id, epoch and sequence."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from broker_process import BrokerProcess
from conftest import create_topic
from kafka_wire import RawConnection


def _init_pid(conn: RawConnection) -> tuple[int, int]:
    resp = conn.request(m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert resp.error_code == ErrorCode.NONE
    return resp.producer_id, resp.producer_epoch


def _produce(conn: RawConnection, batch: bytes) -> tuple[int, int]:
    P = m.ProduceRequest  # noqa: N806
    resp = conn.request(m.ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name="idem", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=batch)])]))
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def _log_end(conn: RawConnection) -> int:
    LO = m.ListOffsetsRequest  # noqa: N806
    resp = conn.request(m.ApiKey.LIST_OFFSETS, 7, LO(replica_id=-1, topics=[
        LO.ListOffsetsTopic(name="idem", partitions=[
            LO.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    return int(resp.topics[0].partitions[0].offset)


def _batch(pid: int, epoch: int, seq: int, n: int = 3) -> bytes:
    return build_batch([(None, f"r{seq + i}".encode(), ()) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_idempotence_replayed_batch_stored_once(bootstrap: str) -> None:
    create_topic(bootstrap, "idem")
    with RawConnection(bootstrap) as conn:
        pid, epoch = _init_pid(conn)
        first = _batch(pid, epoch, 0)
        assert _produce(conn, first) == (ErrorCode.NONE, 0)
        assert _produce(conn, _batch(pid, epoch, 3)) == (ErrorCode.NONE, 3)
        # A retry of the first batch: acknowledged with its original offset, not appended.
        assert _produce(conn, first) == (ErrorCode.NONE, 0)
        assert _log_end(conn) == 6
        # A gap in the sequence.
        code, _ = _produce(conn, _batch(pid, epoch, 10))
        assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # A newer epoch fences the old one.
        assert _produce(conn, _batch(pid, epoch + 1, 0))[0] == ErrorCode.NONE
        code, _ = _produce(conn, _batch(pid, epoch, 6))
        assert code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
        assert _log_end(conn) == 9


@pytest.mark.broker_process
@pytest.mark.slow
def test_idempotence_dedup_survives_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "idem")
    with RawConnection(broker.bootstrap) as conn:
        pid, epoch = _init_pid(conn)
        first = _batch(pid, epoch, 0)
        assert _produce(conn, first) == (ErrorCode.NONE, 0)
    broker.kill9()  # unclean: state is rebuilt from the log
    broker.start()
    with RawConnection(broker.bootstrap) as conn:
        assert _produce(conn, first) == (ErrorCode.NONE, 0)
        assert _log_end(conn) == 3
    assert broker.stop() == 0  # clean: state comes from the snapshot
    broker.start()
    with RawConnection(broker.bootstrap) as conn:
        assert _produce(conn, first) == (ErrorCode.NONE, 0)
        assert _produce(conn, _batch(pid, epoch, 3)) == (ErrorCode.NONE, 3)
        assert _log_end(conn) == 6
    broker.stop()


@pytest.mark.broker_process
@pytest.mark.slow
def test_idempotence_librdkafka_across_broker_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "idem", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 1, "message.timeout.ms": 60000,
                         "reconnect.backoff.ms": 50, "retry.backoff.ms": 50})
    errors: list = []  # type: ignore[type-arg]

    def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)

    for i in range(2000):
        producer.produce("idem", value=f"v{i}".encode(), on_delivery=cb)
    producer.flush(30)
    assert broker.stop() == 0
    for i in range(2000, 3000):
        producer.produce("idem", value=f"v{i}".encode(), on_delivery=cb)
    producer.poll(0.5)
    broker.start()
    assert producer.flush(60) == 0
    assert not errors, errors

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("idem", 0, 0)])
    got = []
    deadline = time.time() + 30
    while len(got) < 3000 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    broker.stop()
    assert got == [f"v{i}".encode() for i in range(3000)]


def test_idempotence_kafka_python_default_producer(bootstrap: str) -> None:
    create_topic(bootstrap, "kp-idem")
    producer = KafkaProducer(bootstrap_servers=bootstrap)  # idempotent by default in 3.x
    futures = [producer.send("kp-idem", f"{i}".encode()) for i in range(100)]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(100))
    producer.close()
