"""What an `ads broker` process logs when its internal topics are first used: one INFO line
per internal topic for the loading of its partitions, each partition's line at DEBUG."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker_process import BrokerProcess
from conftest import create_topic

pytestmark = pytest.mark.broker_process

PER_PARTITION = re.compile(r" INFO ads\.coordinator: loaded __\w+-\d+: ")


def _summaries(log: str, topic: str) -> list[str]:
    return re.findall(rf" INFO ads\.coordinator: loaded (\d+) partitions of {topic}: "
                      r"(\d+) records in \d+ ms", log)


def test_broker_first_use_of_internal_topics_logs_one_line_each(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, "t")
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("t", 0, 0)], asynchronous=False)
        c.close()
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx"})
        p.init_transactions(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                _summaries(broker.log(), "__consumer_offsets")
                and _summaries(broker.log(), "__transaction_state")):
            time.sleep(0.2)
        log = broker.log()
    finally:
        broker.stop()
    assert _summaries(log, "__consumer_offsets") == [("50", "0")]
    assert _summaries(log, "__transaction_state") == [("50", "0")]
    assert not PER_PARTITION.search(log)
