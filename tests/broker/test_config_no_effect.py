"""Every broker and topic key either acts or is listed, with its reason, as accepted without
effect: the list in configdefs, the README's table and the code agree. And the keys that
were accepted without effect before and act now do act."""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka.admin import AdminClient

from ads.broker.config import BrokerConfig, effective_topic_config
from ads.broker.configdefs import (
    BROKER_CONFIG_DEFS,
    BROKER_SYNONYMS,
    NO_EFFECT_BROKER_KEYS,
    NO_EFFECT_TOPIC_KEYS,
    TOPIC_CONFIG_DEFS,
    TOPIC_TO_BROKER,
)
from ads.broker.settings import log_config_from
from ads.protocol import messages as m
from ads.records.batch import build_batch
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "ads"
ROW = re.compile(r"\| `([^`]+)` \| (broker|topic) \| (.+) \|")


def readme_rows() -> dict[tuple[str, str], str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- no-effect-keys:begin -->")[1].split("<!-- no-effect-keys:end -->")[0]
    rows = [ROW.fullmatch(line) for line in block.strip().splitlines()[2:]]
    assert all(rows), "every table row names a key, its scope and a reason"
    return {(r[1], r[2]): r[3] for r in rows if r is not None}


def test_config_no_effect_readme_lists_exactly_the_table() -> None:
    expected = {**{(k, "broker"): why for k, why in NO_EFFECT_BROKER_KEYS.items()},
                **{(k, "topic"): why for k, why in NO_EFFECT_TOPIC_KEYS.items()}}
    assert readme_rows() == expected
    assert set(NO_EFFECT_BROKER_KEYS) <= set(BROKER_CONFIG_DEFS)
    assert set(NO_EFFECT_TOPIC_KEYS) <= set(TOPIC_CONFIG_DEFS)


def _read_in_code(key: str) -> bool:
    """Whether some module other than the definitions names the key."""
    for path in SRC.rglob("*.py"):
        if path.name in ("configdefs.py", "messages.py"):
            continue
        if f'"{key}"' in path.read_text():
            return True
    return False


def test_config_no_effect_every_other_key_is_read() -> None:
    acting_topic = set(TOPIC_CONFIG_DEFS) - set(NO_EFFECT_TOPIC_KEYS)
    for key in acting_topic:
        assert _read_in_code(key), f"topic key {key} is neither read nor listed"
    backing = {TOPIC_TO_BROKER[k] for k in acting_topic if k in TOPIC_TO_BROKER}
    synonyms = {name for group in BROKER_SYNONYMS.values() for name, _ in group}
    for key in set(BROKER_CONFIG_DEFS) - set(NO_EFFECT_BROKER_KEYS):
        if key in backing or key in synonyms:
            continue  # it acts through the topic key it backs, or its synonym group
        assert _read_in_code(key), f"broker key {key} is neither read nor listed"
    for key in NO_EFFECT_TOPIC_KEYS:
        assert key not in TOPIC_TO_BROKER or TOPIC_TO_BROKER[key] in NO_EFFECT_BROKER_KEYS


def test_config_no_effect_segment_keys_reach_the_log() -> None:
    effective = effective_topic_config(BrokerConfig({"log.roll.jitter.ms": "500"}),
                                       {"segment.index.bytes": "4096"})
    cfg = log_config_from(effective)
    assert (cfg.segment_index_bytes, cfg.segment_jitter_ms) == (4096, 500)


def test_config_no_effect_broker_rack_and_fetch_max_bytes() -> None:
    config = {"broker.rack": "rack-7", "fetch.max.bytes": "1024"}
    with EmbeddedBroker(config=config) as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        cluster = admin.describe_cluster().result(10)
        assert [n.rack for n in cluster.nodes] == ["rack-7"]
        create_topic(bs, "t", partitions=2)
        P = m.ProduceRequest.TopicProduceData.PartitionProduceData  # noqa: N806
        F = m.FetchRequest.FetchTopic  # noqa: N806
        with RawConnection(bs) as conn:
            for p in (0, 1):
                batch = build_batch([(b"k", b"x" * 900)])
                conn.request(0, 9, m.ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                    m.ProduceRequest.TopicProduceData(name="t", partition_data=[
                        P(index=p, records=batch)])]))
            fetch = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1,
                                   max_bytes=10_000_000, topics=[F(topic="t", partitions=[
                                       F.FetchPartition(partition=p, fetch_offset=0,
                                                        partition_max_bytes=1_000_000)
                                       for p in (0, 1)])])
            parts = conn.request(1, 11, fetch).responses[0].partitions
            # The broker's 1,024 bytes cap the client's 10 MB: one batch, the first
            # partition's (it always gets at least one, KIP-74).
            sizes = [0 if p.records is None else len(p.records) for p in parts]
            assert sizes[0] > 900 and sizes[1] == 0
