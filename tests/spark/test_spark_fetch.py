"""The task-side fetch loop of the ads Spark source (ads.spark.reader.read_range), without
Spark: many fetches per range, a broker killed and restarted in the middle of a range, and a
broker that stays away; the same for the offset lookups planning sends (ListOffsets)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from test_spark_read import produce

from ads.spark import reader
from ads.spark.planning import OffsetRange
from ads.spark.reader import FetchSettings, read_range
from ads.spark.wire import LATEST, Cluster, KafkaWireError, TopicPartition
from broker_process import BrokerProcess
from conftest import create_topic


def produce_batches(bootstrap: str, topic: str, batches: int, per_batch: int) -> None:
    """Each call flushes, so the log holds at least ``batches`` record batches."""
    for _ in range(batches):
        produce(bootstrap, topic, per_batch, 1)


def settings(bootstrap: str, fetch_max_bytes: int = 4096) -> FetchSettings:
    return FetchSettings(bootstrap_servers=bootstrap, client_id="test", include_headers=False,
                         read_committed=False, fail_on_data_loss=True,
                         fetch_max_bytes=fetch_max_bytes, fetch_max_wait_ms=100,
                         request_timeout_ms=5000, check_crcs=True)


def test_spark_fetch_range_over_many_fetches(bootstrap: str) -> None:
    create_topic(bootstrap, "many", 1)
    produce_batches(bootstrap, "many", 10, 50)
    # One byte per fetch: the broker still returns one whole batch each time (KIP-74).
    batches = list(read_range(OffsetRange("many", 0, 17, 433), settings(bootstrap, 1)))
    assert len(batches) >= 8
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(17, 433))


@pytest.mark.broker_process
def test_spark_fetch_broker_restart_mid_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(reader, "_BACKOFF_S", 0.2)
    caplog.set_level(logging.INFO, logger="ads.spark.reader")
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, "restart", 1)
        produce_batches(broker.bootstrap, "restart", 10, 200)
        batches = read_range(OffsetRange("restart", 0, 0, 2000), settings(broker.bootstrap))
        offsets = next(batches).column("offset").to_pylist()
        broker.kill9()
        broker.start()
        for batch in batches:
            offsets.extend(batch.column("offset").to_pylist())
        assert offsets == list(range(2000))
        assert "retrying after" in caplog.text
    finally:
        broker.stop()


@pytest.mark.broker_process
def test_spark_fetch_broker_gone_fails_the_task(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "_BACKOFF_S", 0.01)
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "gone", 1)
    produce_batches(broker.bootstrap, "gone", 10, 100)
    batches = read_range(OffsetRange("gone", 0, 0, 1000), settings(broker.bootstrap))
    next(batches)
    broker.kill9()
    with pytest.raises(KafkaWireError, match="connect|closed|failed"):
        list(batches)


@pytest.mark.broker_process
def test_spark_list_offsets_waits_for_the_leader_within_the_timeout(tmp_path: Path) -> None:
    """A leader that cannot be reached is asked again until the cluster's timeout, as
    while a dead broker's leaderships move: a query planning then does not fail."""
    broker = BrokerProcess(tmp_path / "data").start()
    tp = TopicPartition("moving", 0)
    try:
        create_topic(broker.bootstrap, tp.topic, 1)
        produce(broker.bootstrap, tp.topic, 30, 1)
        with Cluster(broker.bootstrap, timeout_s=30) as cluster:
            cluster.refresh([tp.topic])
            assert cluster.list_offsets({tp: LATEST})[tp][0] == 30
            broker.kill9()
            back = threading.Timer(1.0, broker.start)
            back.start()
            try:
                assert cluster.list_offsets({tp: LATEST})[tp][0] == 30
            finally:
                back.join()
        broker.kill9()
        with Cluster(broker.bootstrap, timeout_s=1) as cluster:
            began = time.monotonic()
            with pytest.raises(KafkaWireError, match="no bootstrap server reachable"):
                cluster.list_offsets({tp: LATEST})
            assert time.monotonic() - began < 10
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
