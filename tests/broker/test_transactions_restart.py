"""Transactions survive a broker restart in the middle: committed and aborted transactions,
the open one, the offsets committed in a transaction, the last stable offset and the
aborted-transaction index (rebuilt from the log when its files are gone)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from test_transactions_confluent import _list_offsets, consume_all, describe, txn_producer

from broker_process import BrokerProcess
from conftest import create_topic

SETS = ("transaction.state.log.num.partitions=4", "offsets.topic.num.partitions=4",
        "group.initial.rebalance.delay.ms=0")


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed"})
    offset = c.committed([TopicPartition(topic, 0)], 15)[0].offset
    c.close()
    return int(offset)


@pytest.mark.broker_process
def test_transactions_restart_keeps_state_lso_and_aborted_index(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", None, *SETS).start()
    try:
        create_topic(broker.bootstrap, "rs", 1)
        create_topic(broker.bootstrap, "rs-in", 1)
        p = txn_producer(broker.bootstrap, "rs-a")
        # Phase 1: a committed transaction with offsets, an aborted one, one left open.
        p.begin_transaction()
        for i in range(3):
            p.produce("rs", value=f"committed-{i}".encode())
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rs-group"})
        p.send_offsets_to_transaction([TopicPartition("rs-in", 0, 42)],
                                      c.consumer_group_metadata(), 15)
        c.close()
        p.commit_transaction(15)  # offsets 0-2, marker 3
        p.begin_transaction()
        for i in range(3):
            p.produce("rs", value=f"aborted-{i}".encode())
        p.flush(10)
        p.abort_transaction(15)  # offsets 4-6, marker 7
        p.begin_transaction()
        p.produce("rs", value=b"open")
        p.flush(10)  # offset 8, no marker
        assert _list_offsets(broker.bootstrap, "rs", 1) == 8

        # Phase 2: kill -9, drop the aborted index; recovery rebuilds it from the log.
        broker.kill9()
        part_dir = tmp_path / "data" / "rs-0"
        indexes = list(part_dir.glob("*.txnindex"))
        assert indexes and indexes[0].stat().st_size == 34  # one aborted transaction
        for index in indexes:
            index.unlink()
        broker.start()

        # Phase 3: the open transaction still holds the LSO; the aborted one stays hidden;
        # the committed offsets are there.
        assert describe(broker.bootstrap, "rs-a").transaction_state == "Ongoing"
        assert _list_offsets(broker.bootstrap, "rs", 1) == 8
        assert _list_offsets(broker.bootstrap, "rs", 0) == 9
        committed = sorted(f"committed-{i}".encode() for i in range(3))
        assert sorted(consume_all(broker.bootstrap, "rs", 1, "read_committed", 3)) == committed
        assert committed_offset(broker.bootstrap, "rs-group", "rs-in") == 42
        assert (part_dir / indexes[0].name).stat().st_size == 34

        # Phase 4: a new instance fences the old one and aborts its open transaction.
        p2 = txn_producer(broker.bootstrap, "rs-a")
        p2.begin_transaction()
        p2.produce("rs", value=b"after-restart")
        p2.commit_transaction(15)
        expected = sorted([*committed, b"after-restart"])
        assert sorted(consume_all(broker.bootstrap, "rs", 1, "read_committed", 4)) == expected

        # Phase 5: a clean restart reads the same from the files as they are.
        assert broker.stop() == 0
        broker.start()
        assert sorted(consume_all(broker.bootstrap, "rs", 1, "read_committed", 4)) == expected
        assert len(consume_all(broker.bootstrap, "rs", 1, "read_uncommitted", 8)) == 8
        assert _list_offsets(broker.bootstrap, "rs", 1) == _list_offsets(broker.bootstrap, "rs", 0)
        assert describe(broker.bootstrap, "rs-a").transaction_state == "CompleteCommit"
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill9()
