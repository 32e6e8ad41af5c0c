"""`ads bench produce`: producer throughput and acknowledgement latency, like Kafka's
`kafka-producer-perf-test.sh`.

Records are sent as fast as the client takes them, or paced to `throughput` records/s, and
each record's latency runs from the send call to its delivery report (librdkafka measures
it itself; the pure-Python clients are timed around their futures). The report gives
records/s, MB/s (10^6 bytes of record values), and latency avg/p50/p95/p99/p99.9/max in ms.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ads.bench.stats import Progress, latency_summary, rate

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                          KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE})
COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
_TIMEOUT_S = 30.0

# librdkafka logs every failed connection attempt; a benchmark reports failures once.
CLIENT_LOG = logging.getLogger("ads.bench.client")
CLIENT_LOG.addHandler(logging.NullHandler())
CLIENT_LOG.propagate = False


def quiet_admin(bootstrap: str) -> AdminClient:
    """An admin client whose librdkafka log goes to CLIENT_LOG."""
    # confluent-kafka takes a logging.Logger for "logger"; its type hints allow only str,
    # int and float values.
    return AdminClient({"bootstrap.servers": bootstrap,
                        "logger": CLIENT_LOG})  # type: ignore[dict-item]  # a Logger, see above


class BenchError(Exception):
    """The benchmark could not run (unreachable cluster, refused topic, failed records)."""


@dataclass(frozen=True, slots=True)
class ProduceOptions:
    bootstrap: str
    topic: str
    num_records: int
    record_size: int = 100
    payloads: Sequence[bytes] = ()  # from --payload-file; random choice per record
    throughput: float = -1.0  # records/s; <= 0 means unlimited
    acks: str = "1"
    linger_ms: float = 5.0
    batch_size: int | None = None
    compression: str = "none"
    partitions: int | None = None  # create the topic with this many partitions if missing
    round_robin: bool = False  # name the partition of each record (i mod partitions)
    client: str = "confluent-kafka"
    config: dict[str, str] = field(default_factory=dict)  # extra librdkafka properties
    progress: bool = False
    # Time from one first acknowledged record on (confluent-kafka only): the client's set-up
    # (connections, metadata, an idempotent producer's id) is reported apart, not counted.
    warm_up: bool = False


def random_payload(size: int, seed: int = 0) -> bytes:
    """Upper-case letters, as Kafka's perf tool makes them: compressible like text."""
    rng = random.Random(seed)
    return bytes(rng.randrange(65, 91) for _ in range(size))


def ensure_topic(bootstrap: str, topic: str, partitions: int | None,
                 config: dict[str, str] | None = None, replication_factor: int = 1,
                 topic_config: dict[str, str] | None = None) -> int:
    """Creates the topic when it is missing and `partitions` is given; returns its count.
    `config`: the admin client's extra properties; `topic_config`: the new topic's.

    Creation comes first: asking for the metadata of a missing topic may auto-create it with
    the broker's default partition count.
    """
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG,
                            **(config or {})}
    admin = AdminClient(conf)
    if partitions is not None:
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                                replication_factor=replication_factor,
                                                config=topic_config or {})],
                                      operation_timeout=_TIMEOUT_S)
        try:
            futures[topic].result(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() in _UNREACHABLE:
                raise BenchError(f"cannot reach {bootstrap}: {err.str()}") from exc
            # Already there, or a broker without CreateTopics: the metadata tells.
    try:
        md = admin.list_topics(topic, timeout=_TIMEOUT_S)
    except KafkaException as exc:
        raise BenchError(f"cannot reach {bootstrap}: {exc.args[0].str()}") from exc
    found = md.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise BenchError(f"topic {topic!r} does not exist (give --partitions to create it)")
    return len(found.partitions)


def _payload_source(opts: ProduceOptions) -> Callable[[], bytes]:
    if opts.payloads:
        choices = list(opts.payloads)
        rng = random.Random(0)
        return lambda: rng.choice(choices)
    fixed = random_payload(opts.record_size)
    return lambda: fixed


class _Pacer:
    """Kafka's ThroughputThrottler, coarsened: sleeps whenever ahead of the target rate."""

    def __init__(self, throughput: float) -> None:
        self._rate = throughput
        self._start = time.perf_counter()

    def wait(self, sent: int) -> None:
        if self._rate <= 0:
            return
        ahead = sent / self._rate - (time.perf_counter() - self._start)
        if ahead > 0.0005:
            time.sleep(ahead)

    async def async_wait(self, sent: int) -> None:
        if self._rate <= 0:
            return
        ahead = sent / self._rate - (time.perf_counter() - self._start)
        if ahead > 0.0005:
            await asyncio.sleep(ahead)


@dataclass(slots=True)
class _Tally:
    latencies: array[float] = field(default_factory=lambda: array("d"))
    failed: int = 0
    bytes: int = 0
    first_error: str | None = None
    ready_at: float | None = None  # perf_counter() once warmed up, when `warm_up`

    def fail(self, text: str) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = text


def _partition_count(opts: ProduceOptions) -> int:
    return ensure_topic(opts.bootstrap, opts.topic, opts.partitions, opts.config)


def _run_confluent(opts: ProduceOptions, tally: _Tally, progress: Progress) -> None:
    latencies = tally.latencies

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            tally.fail(err.str())
        else:
            latencies.append(msg.latency())

    conf: dict[str, Any] = {
        "bootstrap.servers": opts.bootstrap, "logger": CLIENT_LOG, "acks": opts.acks,
        "linger.ms": opts.linger_ms,
        "compression.type": opts.compression, "on_delivery": delivered,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
    }
    if opts.batch_size is not None:
        conf["batch.size"] = opts.batch_size
    conf.update(opts.config)
    producer = Producer(conf)
    count = _partition_count(opts) if opts.round_robin else 0
    payload = _payload_source(opts)
    if opts.warm_up:
        _warm_up(producer, opts.topic, payload())
        tally.ready_at = time.perf_counter()
    pacer = _Pacer(opts.throughput)
    produce, poll, topic = producer.produce, producer.poll, opts.topic
    total = 0
    for i in range(opts.num_records):
        value = payload()
        total += len(value)
        while True:
            try:
                if count:
                    produce(topic, value, partition=i % count)
                else:
                    produce(topic, value)
                break
            except BufferError:
                poll(0.005)
        if i % 1000 == 999:
            poll(0)
            progress.update(i + 1)
            pacer.wait(i + 1)
        elif opts.throughput > 0:
            pacer.wait(i + 1)
    remaining = producer.flush(_TIMEOUT_S)
    if remaining:
        tally.failed += remaining
        tally.first_error = tally.first_error or f"{remaining} records not acknowledged in time"
    tally.bytes = total


def _warm_up(producer: Producer, topic: str, value: bytes) -> None:
    """Sends one record and waits for its acknowledgement.

    An idempotent librdkafka producer sends nothing before it has its producer id, and
    asks for one on a timer (500 ms) when no broker connection was up at its start: a
    fixed client delay that would otherwise count against acks=all runs only.
    """
    errors: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    producer.produce(topic, value, on_delivery=delivered)
    if producer.flush(_TIMEOUT_S) or errors:
        raise BenchError(f"the warm-up record was not acknowledged: "
                         f"{errors[0] if errors else 'timed out'}")


def _kafka_python_args(opts: ProduceOptions) -> dict[str, Any]:
    acks: int | str = "all" if opts.acks in ("all", "-1") else int(opts.acks)
    args: dict[str, Any] = {"bootstrap_servers": opts.bootstrap, "acks": acks,
                            "linger_ms": opts.linger_ms}
    if opts.compression != "none":
        args["compression_type"] = opts.compression
    if opts.batch_size is not None:
        args["batch_size"] = opts.batch_size
    return args


def _run_kafka_python(opts: ProduceOptions, tally: _Tally, progress: Progress) -> None:
    from kafka import KafkaProducer  # noqa: PLC0415 - optional client, loaded on demand

    args = _kafka_python_args(opts)
    args["linger_ms"] = int(opts.linger_ms)
    producer = KafkaProducer(**args)
    count = _partition_count(opts) if opts.round_robin else 0
    payload = _payload_source(opts)
    pacer = _Pacer(opts.throughput)
    clock = time.perf_counter
    latencies = tally.latencies

    def ok(t0: float, _md: Any) -> None:
        latencies.append(clock() - t0)

    def bad(_t0: float, exc: BaseException) -> None:
        tally.fail(str(exc))

    total = 0
    for i in range(opts.num_records):
        value = payload()
        total += len(value)
        t0 = clock()
        fut = producer.send(opts.topic, value, partition=i % count if count else None)
        fut.add_callback(functools.partial(ok, t0))
        fut.add_errback(functools.partial(bad, t0))
        if i % 1000 == 999:
            progress.update(i + 1)
        pacer.wait(i + 1)
    producer.flush(_TIMEOUT_S)
    producer.close(_TIMEOUT_S)
    tally.bytes = total


async def _aiokafka_main(opts: ProduceOptions, tally: _Tally, progress: Progress) -> None:
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415 - optional client

    args = _kafka_python_args(opts)
    args["linger_ms"] = int(opts.linger_ms)
    args.pop("batch_size", None)
    if opts.batch_size is not None:
        args["max_batch_size"] = opts.batch_size
    producer = AIOKafkaProducer(**args)
    await producer.start()
    count = _partition_count(opts) if opts.round_robin else 0
    payload = _payload_source(opts)
    pacer = _Pacer(opts.throughput)
    clock = time.perf_counter
    latencies = tally.latencies

    def done(t0: float, fut: asyncio.Future[Any]) -> None:
        exc = fut.exception()
        if exc is not None:
            tally.fail(str(exc))
        else:
            latencies.append(clock() - t0)

    pending: list[asyncio.Future[Any]] = []
    total = 0
    try:
        for i in range(opts.num_records):
            value = payload()
            total += len(value)
            t0 = clock()
            fut = await producer.send(opts.topic, value,
                                      partition=i % count if count else None)
            fut.add_done_callback(functools.partial(done, t0))
            pending.append(fut)
            if i % 1000 == 999:
                progress.update(i + 1)
                pending = [f for f in pending if not f.done()]
            await pacer.async_wait(i + 1)
        await producer.flush()
        if pending:
            await asyncio.wait(pending, timeout=_TIMEOUT_S)
    finally:
        await producer.stop()
    tally.bytes = total


def _run_aiokafka(opts: ProduceOptions, tally: _Tally, progress: Progress) -> None:
    asyncio.run(_aiokafka_main(opts, tally, progress))


_RUNNERS = {"confluent-kafka": _run_confluent, "kafka-python": _run_kafka_python,
            "aiokafka": _run_aiokafka}


def run_produce(opts: ProduceOptions) -> dict[str, Any]:
    """Runs the producer benchmark and returns its report (JSON-ready)."""
    if opts.client not in _RUNNERS:
        raise BenchError(f"unknown client {opts.client!r} (one of {', '.join(CLIENTS)})")
    if opts.num_records <= 0:
        raise BenchError("--num-records must be positive")
    if opts.warm_up and opts.client != "confluent-kafka":
        raise BenchError("--warm-up is built for the confluent-kafka client only")
    if opts.partitions is not None:
        ensure_topic(opts.bootstrap, opts.topic, opts.partitions, opts.config)
    tally = _Tally()
    progress = Progress("produce", opts.progress)
    start = time.perf_counter()
    _RUNNERS[opts.client](opts, tally, progress)
    end = time.perf_counter()
    ready_s = None if tally.ready_at is None else tally.ready_at - start  # the set-up's time
    elapsed = end - (tally.ready_at or start)
    acked = len(tally.latencies)
    return {
        "tool": "produce", "client": opts.client, "topic": opts.topic,
        "records": opts.num_records, "acknowledged": acked, "failed": tally.failed,
        "first_error": tally.first_error, "bytes": tally.bytes,
        "ready_ms": None if ready_s is None else round(ready_s * 1000, 1),
        "elapsed_s": round(elapsed, 4),
        "records_per_s": round(rate(acked, elapsed), 1),
        "mb_per_s": round(rate(tally.bytes * acked / opts.num_records, elapsed) / 1e6, 3),
        "latency_ms": latency_summary(tally.latencies),
    }
