"""Transactions with kafka-python (3.x), kafkajs and aiokafka producers; read by read_committed and
read_uncommitted consumers of the same and other client libraries (kcat included)."""

from __future__ import annotations

import base64

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AIOTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from test_client_kafkajs import kafkajs
from test_client_kcat import _kcat
from test_transactions_confluent import consume_all, describe

from ads.protocol.errors import ErrorCode
from conftest import create_topic


def kafka_python_read(bootstrap: str, topic: str, partitions: int, isolation: str
                      ) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, consumer_timeout_ms=3000,
                             auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, i) for i in range(partitions)])
    consumer.seek_to_beginning()
    values = [record.value for record in consumer]
    consumer.close()
    return values


def test_transactions_kafka_python_commit_abort_and_offsets(bootstrap: str) -> None:
    create_topic(bootstrap, "kp-tx", 2)
    create_topic(bootstrap, "kp-in", 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx-id")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(4):
        producer.send("kp-tx", value=f"kept-{i}".encode(), partition=i % 2)
    producer.send_offsets_to_transaction({TopicPartition("kp-in", 0): _offset(7)}, "kp-group")
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(4):
        producer.send("kp-tx", value=f"dropped-{i}".encode(), partition=i % 2)
    producer.flush()
    producer.abort_transaction()
    producer.close()

    kept = sorted(f"kept-{i}".encode() for i in range(4))
    assert sorted(kafka_python_read(bootstrap, "kp-tx", 2, "read_committed")) == kept
    assert sorted(kafka_python_read(bootstrap, "kp-tx", 2, "read_uncommitted")) == sorted(
        kept + [f"dropped-{i}".encode() for i in range(4)])
    # Another client library reads the same way.
    assert sorted(consume_all(bootstrap, "kp-tx", 2, "read_committed", 4)) == kept
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-group",
                           enable_auto_commit=False)
    assert reader.committed(TopicPartition("kp-in", 0)) == 7
    reader.close()
    assert describe(bootstrap, "kp-tx-id").transaction_state == "CompleteAbort"


def _offset(n: int):  # type: ignore[no-untyped-def]
    from kafka.structs import OffsetAndMetadata
    try:
        return OffsetAndMetadata(n, "", -1)
    except TypeError:  # kafka-python before leader epochs in the tuple
        return OffsetAndMetadata(n, "")


def test_transactions_kafka_python_fenced_by_a_new_instance(bootstrap: str) -> None:
    create_topic(bootstrap, "kp-fence", 1)
    old = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-fence-id")
    old.init_transactions()
    old.begin_transaction()
    old.send("kp-fence", value=b"old").get(timeout=10)
    new = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-fence-id")
    new.init_transactions()
    new.begin_transaction()
    new.send("kp-fence", value=b"new")
    new.commit_transaction()
    failed = None
    try:
        old.commit_transaction()
    except KafkaError as exc:
        failed = exc
    assert failed is not None
    old.close(timeout=1)
    new.close()
    assert kafka_python_read(bootstrap, "kp-fence", 1, "read_committed") == [b"new"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_transactions_kafkajs_commit_abort_and_offsets(bootstrap: str) -> None:
    create_topic(bootstrap, "js-tx", 2)
    create_topic(bootstrap, "js-in", 1)
    steps = [
        {"commit": True, "messages": [{"value": b64(f"js-kept-{i}"), "partition": i % 2}
                                      for i in range(4)]},
        {"commit": False, "messages": [{"value": b64(f"js-dropped-{i}"), "partition": i % 2}
                                       for i in range(4)]},
        {"commit": True, "messages": [{"value": b64("js-last"), "partition": 0}]},
    ]
    kafkajs("transaction", bootstrap, {
        "transactionalId": "js-tx-id", "topic": "js-tx", "steps": steps, "group": "js-group",
        "offsets": {"topic": "js-in", "partitions": [{"partition": 0, "offset": 3}]}})
    kept = sorted([f"js-kept-{i}".encode() for i in range(4)] + [b"js-last"])
    assert sorted(consume_all(bootstrap, "js-tx", 2, "read_committed", 5)) == kept
    assert len(consume_all(bootstrap, "js-tx", 2, "read_uncommitted", 9)) == 9
    js_read = kafkajs("read-committed", bootstrap, {"topic": "js-tx", "group": "js-reader",
                                                    "count": 5})
    assert sorted(base64.b64decode(v) for v in js_read["values"]) == kept
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id="js-group",
                           enable_auto_commit=False)
    assert reader.committed(TopicPartition("js-in", 0)) == 3
    reader.close()
    d = describe(bootstrap, "js-tx-id")
    assert (d.error_code, d.transaction_state) == (ErrorCode.NONE, "CompleteCommit")


def test_transactions_kcat_reads_committed_or_everything(bootstrap: str) -> None:
    create_topic(bootstrap, "kcat-tx", 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kcat-tx-id")
    producer.init_transactions()
    for commit in (True, False, True):
        producer.begin_transaction()
        for i in range(3):
            producer.send("kcat-tx", value=f"{'kept' if commit else 'dropped'}-{i}".encode())
        if commit:
            producer.commit_transaction()
        else:
            producer.flush()
            producer.abort_transaction()
    producer.close()

    def read(isolation: str) -> list[str]:
        return _kcat("-b", bootstrap, "-C", "-t", "kcat-tx", "-o", "beginning", "-e",
                     "-X", f"isolation.level={isolation}", "-f", "%s\\n").split()

    assert sorted(read("read_committed")) == sorted([f"kept-{i}" for i in range(3)] * 2)
    assert sorted(read("read_uncommitted")) == sorted(
        [f"kept-{i}" for i in range(3)] * 2 + [f"dropped-{i}" for i in range(3)])


async def test_transactions_aiokafka_commit_and_abort(bootstrap: str) -> None:
    create_topic(bootstrap, "aio-tx", 1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-tx-id")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait("aio-tx", b"aio-kept")
        await producer.begin_transaction()
        await producer.send_and_wait("aio-tx", b"aio-dropped")
        await producer.abort_transaction()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([AIOTopicPartition("aio-tx", 0)])
        got = await consumer.getmany(timeout_ms=3000)
        values = [r.value for records in got.values() for r in records]
    finally:
        await consumer.stop()
    assert values == [b"aio-kept"]
    assert sorted(consume_all(bootstrap, "aio-tx", 1, "read_uncommitted", 2)) == [
        b"aio-dropped", b"aio-kept"]
