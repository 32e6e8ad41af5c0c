"""`ads bench e2e`: end-to-end latency at a fixed rate, like Kafka's EndToEndLatency tool.

A producer sends `num_records` records at `rate` records/s; each value starts with the send
time (8 bytes, big-endian nanoseconds of this process's monotonic clock). A consumer in the
same process, assigned to the partition at its end before the first send, subtracts it from
the time the record reaches the application. A few warm-up records go first so connection
setup is not measured. Only librdkafka (confluent-kafka) is used: both ends are timed in C
threads, so the figure is the broker's and the network's, not the client's.

`requests_per_s` counts the producer's requests from librdkafka's statistics (`tx`), which is
the produce request rate when every request carries one record (`batch.num.messages=1`).
The same statistics give each client's round trips to the broker as librdkafka times them
(request sent to response read, so the broker's wait for its loop and both kernels'
wake-ups count): `produce_rtt_p50_us` and `fetch_rtt_p50_us` are the medians, over the
measured part, of each 200 ms interval's p50; `fetch_requests_per_s` is the consumer's
request rate, nearly all fetches (with `fetch.wait.max.ms=0` it sends the next as soon as
one is answered).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from ads.bench.produce import CLIENT_LOG, BenchError, ensure_topic, random_payload
from ads.bench.stats import Progress, latency_summary, rate

_WARMUP = 10
_TIMEOUT_S = 30.0
_DRAIN_S = 10.0

_Delivered = Callable[[KafkaError | None, Any], None]


@dataclass(frozen=True, slots=True)
class E2EOptions:
    bootstrap: str
    topic: str
    num_records: int
    rate: float = 10_000.0
    record_size: int = 100
    acks: str = "1"
    linger_ms: float = 5.0
    partition: int = 0
    partitions: int | None = None  # create the topic with this many partitions if missing
    producer_config: dict[str, str] = field(default_factory=dict)
    consumer_config: dict[str, str] = field(default_factory=dict)
    progress: bool = False


class _Receiver(threading.Thread):
    def __init__(self, consumer: Consumer) -> None:
        super().__init__(name="e2e-consumer", daemon=True)
        self.consumer = consumer
        self.latencies = array("d")
        self.warmup = 0
        self.received = 0
        self.error: str | None = None
        self.stop_event = threading.Event()

    def run(self) -> None:
        clock = time.perf_counter_ns
        append = self.latencies.append
        while not self.stop_event.is_set():
            # consume(n, timeout) would wait for n records: block for one, take the rest.
            first = self.consumer.poll(0.05)
            if first is None:
                continue
            now = clock()
            msgs = [first, *self.consumer.consume(1000, 0)]
            for m in msgs:
                err, value = m.error(), m.value()
                if err is not None:
                    if self.error is None and err.code() != KafkaError._PARTITION_EOF:
                        self.error = err.str()
                    continue
                sent = int.from_bytes((value or b"")[:8], "big")
                if sent:
                    append((now - sent) / 1e9)
                    self.received += 1
                else:
                    self.warmup += 1


class _ClientStats:
    """A client's requests sent and round-trip p50s, from librdkafka's statistics callback
    (called on the client's polling thread every `statistics.interval.ms`)."""

    def __init__(self) -> None:
        self.tx = 0
        self.rtt_p50_us: list[int] = []  # one per interval with round trips, while measuring
        self.measuring = False

    def __call__(self, stats_json: str) -> None:
        brokers = [b for b in json.loads(stats_json).get("brokers", {}).values()
                   if b.get("nodeid", -1) >= 0]  # not the bootstrap connections
        self.tx = sum(int(b.get("tx", 0)) for b in brokers)
        if self.measuring:
            self.rtt_p50_us += [int(b["rtt"]["p50"]) for b in brokers
                                if b.get("rtt", {}).get("cnt", 0) > 0]

    def rtt_p50(self) -> int | None:
        return int(median(self.rtt_p50_us)) if self.rtt_p50_us else None


def _producer_config(opts: E2EOptions, stats: _ClientStats) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": opts.bootstrap, "logger": CLIENT_LOG,
                            "acks": opts.acks,
                            "linger.ms": opts.linger_ms, "statistics.interval.ms": 200,
                            "stats_cb": stats}
    conf.update(opts.producer_config)
    return conf


def _consumer_config(opts: E2EOptions, stats: _ClientStats) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": opts.bootstrap, "logger": CLIENT_LOG,
                            "group.id": f"ads-bench-e2e-{uuid.uuid4().hex[:8]}",
                            "enable.auto.commit": False, "enable.partition.eof": False,
                            # As Kafka's EndToEndLatency: no temporal batching in the broker.
                            "fetch.wait.max.ms": 0,
                            "statistics.interval.ms": 200, "stats_cb": stats}
    conf.update(opts.consumer_config)
    return conf


def _warm_up(producer: Producer, receiver: _Receiver, opts: E2EOptions, padding: bytes,
             delivered: _Delivered) -> None:
    """Sends the warm-up records and waits until they are consumed back, so that connection
    setup is not measured."""
    for _ in range(_WARMUP):
        producer.produce(opts.topic, bytes(8) + padding, partition=opts.partition,
                         on_delivery=delivered)
    producer.flush(_TIMEOUT_S)
    deadline = time.monotonic() + _TIMEOUT_S
    while receiver.warmup < _WARMUP and time.monotonic() < deadline:
        time.sleep(0.01)
    if receiver.warmup < _WARMUP:
        raise BenchError("warm-up records were not consumed back within "
                         f"{_TIMEOUT_S:g} s")


def _send_paced(producer: Producer, opts: E2EOptions, padding: bytes, delivered: _Delivered,
                progress: Progress, start: int) -> int:
    """Sends `opts.num_records` records at `opts.rate` from `start` (`perf_counter_ns`),
    each value led by its send time; returns how many were sent."""
    clock = time.perf_counter_ns
    interval_ns = 1e9 / opts.rate
    produce, poll, topic, part = producer.produce, producer.poll, opts.topic, opts.partition
    sent = 0
    while sent < opts.num_records:
        due = min(int((clock() - start) / interval_ns) + 1, opts.num_records)
        while sent < due:
            try:
                produce(topic, clock().to_bytes(8, "big") + padding, partition=part,
                        on_delivery=delivered)
            except BufferError:
                poll(0.001)
                continue
            sent += 1
        poll(0)
        progress.update(sent)
        ahead = (start + sent * interval_ns - clock()) / 1e9
        if ahead > 0:
            # Sleep even for a few microseconds: spinning here took a whole core from
            # the brokers and client threads sharing the machine and made the tail
            # latency the client's. A late wake-up is caught up by the `due` count.
            time.sleep(ahead)
    return sent


def run_e2e(opts: E2EOptions) -> dict[str, Any]:
    """Runs the end-to-end latency benchmark and returns its report (JSON-ready)."""
    if opts.num_records <= 0 or opts.rate <= 0:
        raise BenchError("--num-records and --throughput must be positive")
    if opts.record_size < 8:
        raise BenchError("--record-size must be at least 8 (the timestamp)")
    ensure_topic(opts.bootstrap, opts.topic, opts.partitions, opts.producer_config)
    counter, fetching = _ClientStats(), _ClientStats()
    producer = Producer(_producer_config(opts, counter))
    consumer = Consumer(_consumer_config(opts, fetching))
    tp = TopicPartition(opts.topic, opts.partition)
    _, high = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT_S)
    consumer.assign([TopicPartition(opts.topic, opts.partition, high)])
    receiver = _Receiver(consumer)
    receiver.start()
    padding = random_payload(opts.record_size - 8)
    failed: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed.append(err.str())

    try:
        _warm_up(producer, receiver, opts, padding, delivered)
        tx_start, fetches_start = counter.tx, fetching.tx
        counter.measuring = fetching.measuring = True
        progress = Progress("e2e", opts.progress)
        clock = time.perf_counter_ns
        start = clock()
        sent = _send_paced(producer, opts, padding, delivered, progress, start)
        send_elapsed = (clock() - start) / 1e9
        producer.flush(_TIMEOUT_S)
        deadline = time.monotonic() + _DRAIN_S
        while receiver.received < sent and time.monotonic() < deadline:
            time.sleep(0.01)
            producer.poll(0)
        elapsed = (clock() - start) / 1e9
        time.sleep(0.25)  # one more statistics interval, so the request count is current
        producer.poll(0)
        counter.measuring = fetching.measuring = False
        requests, fetches = counter.tx - tx_start, fetching.tx - fetches_start
    finally:
        receiver.stop_event.set()
        receiver.join()
        consumer.close()
    return {
        "tool": "e2e", "topic": opts.topic, "target_rate": opts.rate,
        "records": opts.num_records, "sent": sent, "received": receiver.received,
        "failed": len(failed), "first_error": failed[0] if failed else receiver.error,
        "elapsed_s": round(elapsed, 4), "send_rate": round(rate(sent, send_elapsed), 1),
        "requests_per_s": round(rate(requests, elapsed), 1),
        "produce_rtt_p50_us": counter.rtt_p50(), "fetch_rtt_p50_us": fetching.rtt_p50(),
        "fetch_requests_per_s": round(rate(fetches, elapsed), 1),
        "latency_ms": latency_summary(receiver.latencies),
    }
