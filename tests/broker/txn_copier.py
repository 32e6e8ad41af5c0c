"""A consume-transform-produce copier in its own process, for tests that kill it.

Usage: python tests/broker/txn_copier.py BOOTSTRAP SOURCE SINK PARTITIONS BATCH
Reads SOURCE (read_committed, partitions assigned, positions from the committed offsets of
group "copier") and writes each record upper-cased to the same partition of SINK, BATCH
records per transaction with the consumer's offsets in it (transactional id "copier").
A new instance fences a killed one and aborts what it left open. Prints "committed N"
after each transaction and exits 0 once every partition is copied to its end.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, Producer, TopicPartition


def main(bootstrap: str, source: str, sink: str, partitions: int, batch: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "copier",
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(source, p) for p in range(partitions)])
    ends = {p: consumer.get_watermark_offsets(TopicPartition(source, p), 30)[1]
            for p in range(partitions)}
    copied = 0
    for _ in range(100_000):  # bounded: far more transactions than any test needs
        msgs = [m for m in consumer.consume(batch, 0.5) if m.error() is None]
        if msgs:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, value=m.value().upper(), key=m.key(),
                                 partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            copied += len(msgs)
            print("committed", copied, flush=True)
        positions = consumer.position(consumer.assignment())
        if all(tp.offset >= ends[tp.partition] for tp in positions):
            break
    consumer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
