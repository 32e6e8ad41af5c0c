"""/metrics after a known workload with confluent-kafka: counters equal what was produced
and fetched, lag equals produced minus committed; health endpoints and bad HTTP input."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ads.testing import EmbeddedBroker
from conftest import create_topic
from http_support import Samples, http_call, metric_samples

HTTP = {"http.listener": "127.0.0.1:0", "console.sample.interval.ms": "200"}


@pytest.fixture
def ops_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=HTTP) as b:
        yield b


def base_url(b: EmbeddedBroker) -> str:
    assert b.broker is not None and b.broker.ops_http is not None
    host, port = b.broker.ops_http.address
    return f"http://{host}:{port}"


def get(url: str) -> tuple[int, str, str]:
    return tuple(http_call(url))  # type: ignore[return-value]


def scrape(b: EmbeddedBroker) -> Samples:
    return metric_samples(base_url(b))


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v, key=b"k", partition=partition)
    assert p.flush(15) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> int:
    """Reads `count` records and commits the offset after them; returns bytes read."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    last = None
    while seen < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        seen += 1
        last = m
    assert seen >= count and last is not None
    c.commit(offsets=[TopicPartition(topic, last.partition(), count)], asynchronous=False)
    c.close()
    return seen


def test_http_metrics_counts_follow_a_workload(ops_broker: EmbeddedBroker) -> None:
    bootstrap = ops_broker.bootstrap_servers
    create_topic(bootstrap, "metered", partitions=2)
    values = [b"v%04d" % i for i in range(120)]
    produce(bootstrap, "metered", values[:100], partition=0)
    produce(bootstrap, "metered", values[100:], partition=1)
    before = scrape(ops_broker)
    assert value(before, "ads_topic_messages_in_total", topic="metered") == 120
    assert value(before, "ads_log_end_offset", topic="metered", partition="0") == 100
    assert value(before, "ads_partition_high_watermark", topic="metered", partition="1") == 20
    size = sum(value(before, "ads_log_size_bytes", topic="metered", partition=p)
               for p in ("0", "1"))
    # The bytes appended are the log's bytes: batches are written as they came.
    assert value(before, "ads_topic_bytes_in_total", topic="metered") == size
    assert value(before, "ads_log_segments", topic="metered", partition="0") == 1
    assert value(before, "ads_topic_failed_produce_requests_total", topic="metered") == 0
    produce_requests = sum(v for (n, labels), v in before.items()
                           if n == "ads_requests_total" and ("request", "Produce") in labels)
    assert produce_requests >= 2
    assert value(before, "ads_request_duration_seconds_count", request="Produce") \
        == produce_requests

    consume_and_commit(bootstrap, "metered", "metered-group", 30)
    after = scrape(ops_broker)
    assert value(after, "ads_group_committed_offset", group="metered-group", topic="metered",
                 partition="0") == 30
    # Lag is what was produced and not consumed: 100 - 30 on partition 0.
    assert value(after, "ads_group_lag", group="metered-group", topic="metered",
                 partition="0") == 70
    assert value(after, "ads_groups", state="Empty") >= 1
    # The consumer read at least the batches holding the first 30 records.
    assert value(after, "ads_topic_bytes_out_total", topic="metered") > 0
    assert value(after, "ads_topic_fetch_requests_total", topic="metered") > 0
    assert value(after, "ads_under_replicated_partitions") == 0
    assert value(after, "ads_offline_partitions") == 0
    assert value(after, "ads_active_controller") == 1
    assert value(after, "ads_log_cleaner_passes_total") >= 0

    # More records: the lag grows by exactly as many.
    produce(bootstrap, "metered", values[:5], partition=0)
    later = scrape(ops_broker)
    assert value(later, "ads_group_lag", group="metered-group", topic="metered",
                 partition="0") == 75
    assert value(later, "ads_topic_messages_in_total", topic="metered") == 125


def test_http_metrics_failed_produce_and_connections(ops_broker: EmbeddedBroker) -> None:
    bootstrap = ops_broker.bootstrap_servers
    create_topic(bootstrap, "small", **{"max.message.bytes": "200"})
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                  "message.max.bytes": 100000})
    errors = []
    p.produce("small", value=b"x" * 5000, callback=lambda err, _m: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None
    samples = scrape(ops_broker)
    assert value(samples, "ads_topic_failed_produce_requests_total", topic="small") >= 1
    assert value(samples, "ads_topic_messages_in_total", topic="small") == 0
    assert value(samples, "ads_connections") >= 1
    assert value(samples, "ads_http_connections") == 1  # this scrape


def test_http_health_and_bad_requests(ops_broker: EmbeddedBroker) -> None:
    url = base_url(ops_broker)
    assert get(url + "/healthz")[0] == 200
    assert get(url + "/readyz")[:1] == (200,)
    assert get(url + "/no/such/page")[0] == 404
    assert get(url + "/static/../app.py")[0] == 404
    assert get(url + "/api/nothing")[0] == 404
    assert http_call(url + "/metrics", method="POST", data=b"x").status == 405
    host, port = ops_broker.broker.ops_http.address  # type: ignore[union-attr]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GARBAGE\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        head = s.recv(1000)
        assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
    # Past its connection limit the HTTP server answers 503 at once; Kafka clients and
    # later HTTP clients are served as before.
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(64)]
    try:
        time.sleep(0.5)
        with socket.create_connection((host, port), timeout=10) as s:
            assert s.recv(100).startswith(b"HTTP/1.1 503")
        create_topic(ops_broker.bootstrap_servers, "still-serving")
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 10
    while get(url + "/healthz")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert get(url + "/healthz")[0] == 200


def test_http_listener_off_unless_set() -> None:
    with EmbeddedBroker() as b:
        assert b.broker is not None and b.broker.ops_http is None


def test_http_listener_address_in_use_stops_start_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        broker = EmbeddedBroker(tmp_path, config={"http.listener": f"127.0.0.1:{port}"})
        with pytest.raises(OSError, match="address already in use"):
            broker.start()
        assert broker.broker is not None and not broker.broker.started
    finally:
        taken.close()
