"""Refusals of what ADS does not support yet leave one INFO line per client and reason:
Produce v0-2, an API version outside the advertised range; retries and reconnections of
the same client add none. (Transactional producers are served now:
tests/broker/test_transactions_*.py.)"""

from __future__ import annotations

import logging

import pytest

from ads.broker.refusals import RefusalLog
from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "ads.broker" and r.levelno == logging.INFO
            and r.getMessage().startswith("refused a request")]


def test_refusals_old_produce_and_unsupported_versions(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    caplog.set_level(logging.INFO, logger="ads.broker")
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "t")
        P = m.ProduceRequest  # noqa: N806
        req = P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
            name="t", partition_data=[P.TopicProduceData.PartitionProduceData(
                index=0, records=build_batch([(b"k", b"v")]))])])
        for _ in range(3):
            with RawConnection(bs) as conn:
                part = conn.request(0, 2, req).responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.UNSUPPORTED_VERSION
        for _ in range(2):  # JoinGroup v1 is below the advertised floor: closed each time
            with RawConnection(bs) as conn:
                conn.send_raw(_join_v1_frame())
                assert conn.is_closed()
    lines = refusal_lines(caplog)
    assert sum("Produce v2" in line for line in lines) == 1
    assert sum("JOIN_GROUP v1 is not supported (supported 2-9)" in line for line in lines) == 1


def _join_v1_frame() -> bytes:
    body = m.JoinGroupRequest(group_id="g", session_timeout_ms=10_000,
                              rebalance_timeout_ms=10_000, member_id="",
                              protocol_type="consumer", protocols=[])
    return bytes(codec.encode_request(11, 1, 7, "raw-test", body))


def test_refusals_memory_is_bounded() -> None:
    logger = logging.getLogger("test.refusals")
    refusals = RefusalLog(logger, capacity=2)
    assert refusals.refused("10.0.0.1:5000", "a", "r")
    assert not refusals.refused("10.0.0.1:6000", "a", "r")  # another port, same client
    assert refusals.refused("10.0.0.1:5000", "b", "r")
    assert refusals.refused("10.0.0.1:5000", "c", "r")  # forgets the oldest, ("a", "r")
    assert refusals.refused("10.0.0.1:5000", "a", "r")
