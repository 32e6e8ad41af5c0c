"""Idle idempotent producers expire after producer.id.expiration.ms."""

from __future__ import annotations

import time
from pathlib import Path

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection


def test_producer_expiration_forgets_idle_producer(tmp_path: Path) -> None:
    config = {"producer.id.expiration.ms": "300",
              "producer.id.expiration.check.interval.ms": "100"}
    with EmbeddedBroker(data_dir=tmp_path / "d", config=config) as broker:
        create_topic(broker.bootstrap_servers, "exp")
        with RawConnection(broker.bootstrap_servers) as conn:
            resp = conn.request(m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=1000))
            pid, epoch = resp.producer_id, resp.producer_epoch
            P = m.ProduceRequest  # noqa: N806
            batch = build_batch([(None, b"v", ())], producer_id=pid, producer_epoch=epoch,
                                base_sequence=0)
            req = P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
                name="exp", partition_data=[P.TopicProduceData.PartitionProduceData(
                    index=0, records=batch)])])
            assert conn.request(m.ApiKey.PRODUCE, 9, req).responses[0].partition_responses[
                0].error_code == ErrorCode.NONE
            log = broker.broker.replica_manager.partition("exp", 0).log  # type: ignore[union-attr]
            assert pid in broker.call(lambda: dict(log.producer_state.producers))
            deadline = time.time() + 10
            while time.time() < deadline and pid in broker.call(
                    lambda: dict(log.producer_state.producers)):
                time.sleep(0.1)
            assert pid not in broker.call(lambda: dict(log.producer_state.producers))
