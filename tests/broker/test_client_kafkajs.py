"""kafkajs (the Node.js client) against a real ADS broker: produce, consume, groups, admin.

The tests run `tests/js/kafkajs_driver.js` with Node; `make test` installs Node (Debian
packages nodejs and npm) and kafkajs (tests/js/package.json). kafkajs decodes only gzip
among the codecs without add-on packages, so the codecs here are none and gzip.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ads.testing import EmbeddedBroker
from conftest import create_topic

JS_DIR = Path(__file__).parents[1] / "js"
NODE = shutil.which("node") or shutil.which("nodejs")
CONFIG = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


def kafkajs(command: str, bootstrap: str, args: dict[str, object],
            timeout: float = 90) -> dict:  # type: ignore[type-arg]
    assert NODE, "Node.js is installed by `make test` (Debian packages nodejs and npm)"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), \
        "kafkajs is installed by `make test` (npm install in tests/js)"
    done = subprocess.run(
        [NODE, str(JS_DIR / "kafkajs_driver.js"), command, bootstrap, json.dumps(args)],
        capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    with EmbeddedBroker(data_dir=tmp_path / "data", config=CONFIG) as embedded:
        yield embedded.bootstrap_servers


def _messages(n: int, partitions: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        out.append({"key": None if i % 7 == 0 else b64(b"key-%d" % i),
                    "value": b64(bytes([i % 256]) * (i + 1) + b"\x00\xff"),
                    "headers": {"n": b64(b"%d" % i)}, "partition": i % partitions})
    return out


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple]:  # type: ignore[type-arg]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple] = []  # type: ignore[type-arg]
    try:
        for _ in range(300):
            for m in c.consume(500, 0.1):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.key(), m.value(),
                            dict(m.headers() or [])))
            if len(got) >= expected:
                break
    finally:
        c.close()
    return sorted(got, key=lambda r: (r[0], r[1]))


@pytest.mark.parametrize(("compression", "acks"), [("none", -1), ("gzip", 1), ("none", 0)])
def test_kafkajs_produce_is_read_by_confluent_kafka(broker: str, compression: str,
                                                    acks: int) -> None:
    topic = f"kjs-{compression}-{acks}".replace("-1", "all")
    create_topic(broker, topic, partitions=3)
    msgs = _messages(60, 3)
    result = kafkajs("produce", broker, {"topic": topic, "messages": msgs,
                                         "compression": compression, "acks": acks,
                                         "batch": 20})
    if acks != 0:
        assert {r["errorCode"] for r in result["results"]} == {0}
    got = _read_all(broker, topic, 3, 60)
    expected = sorted(
        [(int(m["partition"]), unb64(m["key"]), unb64(m["value"]),  # type: ignore[arg-type,call-overload]
          {"n": unb64(m["headers"]["n"])}) for m in msgs],  # type: ignore[index]
        key=lambda r: r[0])
    assert [(p, k, v, h) for p, _, k, v, h in got] == expected
    for p in range(3):
        assert [o for q, o, *_ in got if q == p] == list(range(20))


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_kafkajs_group_consumer_reads_what_confluent_kafka_wrote(broker: str,
                                                                compression: str) -> None:
    topic = f"to-kjs-{compression}"
    create_topic(broker, topic, partitions=2)
    p = Producer({"bootstrap.servers": broker, "compression.type": compression})
    sent = []
    for i in range(40):
        key, value = (None if i == 3 else b"k%d" % i), b"\x01value %d\xfe" % i
        p.produce(topic, value, key=key, partition=i % 2, headers=[("h", b"%d" % i)],
                  timestamp=1_700_000_000_000 + i)
        sent.append((i % 2, key, value, b"%d" % i, 1_700_000_000_000 + i))
    assert p.flush(10) == 0
    got = kafkajs("consume", broker, {"topic": topic, "group": "kjs-readers", "count": 40})
    records = sorted(got["records"], key=lambda r: (r["partition"], r["offset"]))
    assert len(records) == 40
    as_sent = sorted(sent, key=lambda r: (r[0], r[4]))
    for rec, (part, key, value, header, ts) in zip(records, as_sent, strict=True):
        assert (rec["partition"], unb64(rec["key"]), unb64(rec["value"])) == (part, key, value)
        assert unb64(rec["headers"]["h"]) == header and rec["timestamp"] == ts
    # Stopping the kafkajs consumer committed its positions to the group.
    c = Consumer({"bootstrap.servers": broker, "group.id": "kjs-readers"})
    committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    c.close()
    assert [tp.offset for tp in committed] == [20, 20]


def test_kafkajs_idempotent_producer(broker: str) -> None:
    create_topic(broker, "kjs-idem", partitions=1)
    msgs = [{"key": None, "value": b64(b"m%d" % i), "partition": 0} for i in range(30)]
    result = kafkajs("produce", broker, {"topic": "kjs-idem", "messages": msgs,
                                         "idempotent": True, "batch": 10})
    assert [int(r["baseOffset"]) for r in result["results"]] == [0, 10, 20]
    got = _read_all(broker, "kjs-idem", 1, 30)
    assert [v for _, _, _, v, _ in got] == [b"m%d" % i for i in range(30)]


def _fill(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    """A new topic with `count` records spread round robin (written by confluent-kafka)."""
    create_topic(bootstrap, topic, partitions=partitions)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(topic, b"%d" % i, partition=i % partitions)
    assert p.flush(10) == 0


def test_kafkajs_two_consumers_share_a_group(broker: str) -> None:
    _fill(broker, "kjs-shared", 4, 40)
    out = kafkajs("group-pair", broker, {"topic": "kjs-shared", "group": "kjs-pair",
                                         "partitions": 4, "count": 40})
    a, b = out["assigned"]
    assert a and b and sorted(a + b) == [0, 1, 2, 3]
    assert out["seen"] == 40


def test_kafkajs_admin_topics_configs_offsets(broker: str) -> None:
    out = kafkajs("admin", broker, {"topic": "kjs-admin"})
    assert out["created"] is True and out["createdAgain"] is False and out["listed"] is True
    assert out["partitions"] == [0, 1]
    assert [(o["partition"], o["low"], o["high"]) for o in out["offsets"]] == \
        [(0, "0", "5"), (1, "0", "5")]
    # Records i=0..9 go to partition i % 2 at 1700000000000 + i s: the first at or after
    # +4 s is i=4 (offset 2 of partition 0) and i=5 (offset 2 of partition 1).
    assert [(o["partition"], o["offset"]) for o in out["byTimestamp"]] == [(0, "2"), (1, "2")]
    assert out["configs"] == {"retention.ms": "3600000", "cleanup.policy": "delete"}
    assert out["retentionAfter"] == "7200000"
    assert out["partitionsAfter"] == 3
    assert out["afterDelete"]["low"] == "2" and out["afterDelete"]["high"] == "5"
    assert out["brokers"] == 1
    assert out["listedAfterDelete"] is False


def test_kafkajs_group_admin(broker: str) -> None:
    _fill(broker, "kjs-ga", 2, 6)
    kafkajs("consume", broker, {"topic": "kjs-ga", "group": "kjs-admin-group", "count": 6})
    out = kafkajs("group-admin", broker, {"topic": "kjs-ga", "group": "kjs-admin-group"})
    assert "kjs-admin-group" in out["listed"]
    assert out["state"] == "Empty" and out["protocolType"] == "consumer"
    assert [(o["partition"], o["offset"]) for o in out["offsets"]] == [(0, "3"), (1, "3")]
    assert out["afterSet"]["offset"] == "1"
    # kafkajs commits its "earliest" sentinel (-2) as the offset, and a broker stores what
    # is committed, as Kafka does; the group's next consumer resolves it and starts from the
    # beginning again (without the reset it would start at the committed 3 and read nothing).
    assert out["afterReset"] == ["-2", "-2"]
    again = kafkajs("consume", broker, {"topic": "kjs-ga", "group": "kjs-admin-group",
                                        "count": 6})
    assert sorted((r["partition"], r["offset"]) for r in again["records"]) == \
        [(p, o) for p in range(2) for o in range(3)]
    gone = kafkajs("delete-group", broker, {"group": "kjs-admin-group"})
    assert [(d["groupId"], d["errorCode"]) for d in gone["deleted"]] == [("kjs-admin-group", 0)]
    assert "kjs-admin-group" not in gone["listed"]
