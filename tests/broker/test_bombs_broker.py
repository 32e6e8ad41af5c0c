"""Decompression bombs against a broker process: small batches (gzip, lz4, zstd) that inflate
to hundreds of megabytes, sent where the broker must look inside a batch (a compacted topic
checks keys, a topic with its own compression.type recompresses, a ListOffsets by timestamp
decodes a stored batch). Each is refused with CORRUPT_MESSAGE after inflating at most the
bound (max(64 MiB, 16 x max.message.bytes)), never the whole bomb: the broker's peak
resident memory grows by less than the bombs would inflate to. Memory, never time, is
asserted; snappy cannot bomb (its ratio is about 21) and lying snappy lengths are refused
from the preamble (tests/records)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from broker_process import BrokerProcess
from conftest import create_topic
from fuzz_support import bomb_batch
from kafka_wire import RawConnection

pytestmark = [pytest.mark.broker_process, pytest.mark.slow]

MESSAGE_MAX = 2_000_000
BOUND = 64 << 20  # max(64 MiB, 16 x message.max.bytes)
FUTURE_MS = 4_000_000_000_000  # bombs carry timestamps past every other batch's
BOMBS = {"gzip": (1, 512 << 20), "lz4": (3, 192 << 20), "zstd": (4, 1 << 30)}


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _produce(conn: RawConnection, topic: str, records: bytes) -> int:
    P = m.ProduceRequest  # noqa: N806
    resp = conn.request(m.ApiKey.PRODUCE, 9, P(acks=1, timeout_ms=10_000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=records)])]))
    return int(resp.responses[0].partition_responses[0].error_code)


def _list_offset(conn: RawConnection, topic: str, timestamp: int) -> int:
    LO = m.ListOffsetsRequest  # noqa: N806
    resp = conn.request(m.ApiKey.LIST_OFFSETS, 7, LO(replica_id=-1, topics=[
        LO.ListOffsetsTopic(name=topic, partitions=[
            LO.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]))
    return int(resp.topics[0].partitions[0].error_code)


def test_bombs_refused_within_the_bound(tmp_path: Path) -> None:
    bombs = {name: bomb_batch(codec, size, FUTURE_MS) for name, (codec, size) in BOMBS.items()}
    assert all(len(b) < MESSAGE_MAX for b in bombs.values())
    proc = BrokerProcess(tmp_path / "d", None, f"message.max.bytes={MESSAGE_MAX}").start()
    try:
        assert proc.proc is not None
        bs = proc.bootstrap
        create_topic(bs, "compacted", **{"cleanup.policy": "compact"})
        create_topic(bs, "recompressed", **{"compression.type": "snappy"})
        create_topic(bs, "plain")
        with RawConnection(bs, timeout=60) as conn:
            for topic in ("compacted", "recompressed", "plain"):  # warm every path up
                assert _produce(conn, topic, build_batch([(b"k", b"v")])) == ErrorCode.NONE
                assert _list_offset(conn, topic, 0) == ErrorCode.NONE
            before = _peak_rss_kb(proc.proc.pid)
            for name, bomb in bombs.items():
                for topic in ("compacted", "recompressed"):
                    assert _produce(conn, topic, bomb) == ErrorCode.CORRUPT_MESSAGE, (name, topic)
                # Stored as it came (the plain produce path never inflates), then decoded by
                # a timestamp lookup, which must refuse it the same way.
                assert _produce(conn, "plain", bomb) == ErrorCode.NONE, name
                assert _list_offset(conn, "plain", FUTURE_MS) == ErrorCode.CORRUPT_MESSAGE, name
            grown_kb = _peak_rss_kb(proc.proc.pid) - before
        # Inflating any one bomb whole would take 192 MiB to 1 GiB.
        assert grown_kb * 1024 < 2.5 * BOUND, f"peak resident memory grew by {grown_kb} KB"
        with RawConnection(bs) as conn:
            assert _produce(conn, "compacted", build_batch([(b"k", b"v2")])) == ErrorCode.NONE
        log = proc.log()
        assert "Traceback" not in log, log[-4000:]
    finally:
        proc.stop()
