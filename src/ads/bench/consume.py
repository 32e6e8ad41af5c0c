"""`ads bench consume`: consumer throughput, like Kafka's `kafka-consumer-perf-test.sh`.

Assign mode (the default) reads every partition of the topic from its start, or only its
last `last` records, without a group; group mode (`group`) subscribes and lets the group
coordinator assign partitions. The run stops after `num_records` records, or when no record
came for `timeout_s`. `rounds` > 1 reads the same range again, seeking back each time, for
brokers that keep little data per partition.

Reported: records/s and MB/s from the first record to the last (steady state), the same over
the whole run including connection and assignment, and the time to the first record.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ads.bench.produce import CLIENT_LOG, CLIENTS, BenchError
from ads.bench.stats import Progress, rate

_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ConsumeOptions:
    bootstrap: str
    topic: str
    num_records: int  # per round
    group: str | None = None
    last: int | None = None  # assign mode: read only the last N records of each partition
    rounds: int = 1
    timeout_s: float = 10.0  # stop when nothing came this long
    client: str = "confluent-kafka"
    config: dict[str, str] = field(default_factory=dict)
    progress: bool = False


class _Client(Protocol):
    def partitions(self) -> list[int]: ...
    def watermarks(self, partition: int) -> tuple[int, int]: ...
    def assign(self, offsets: dict[int, int]) -> None: ...
    def subscribe(self) -> None: ...
    def poll(self, timeout_s: float) -> tuple[int, int]: ...
    def close(self) -> None: ...


class _Confluent:
    def __init__(self, opts: ConsumeOptions) -> None:
        conf: dict[str, Any] = {
            "bootstrap.servers": opts.bootstrap, "logger": CLIENT_LOG,
            "group.id": opts.group or f"ads-bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": opts.group is not None, "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever its local
            # queue is over queued.min.messages; a reader as fast as this one then measures
            # that pause rather than the broker.
            "fetch.queue.backoff.ms": 10,
        }
        if opts.rounds > 1:
            # At the end of a round a fetch waits at the high watermark, and the next round
            # cannot start before it returns: keep that wait short.
            conf["fetch.wait.max.ms"] = 5
        conf.update(opts.config)
        self._topic = opts.topic
        self._c = Consumer(conf)

    def partitions(self) -> list[int]:
        md = self._c.list_topics(self._topic, timeout=_TIMEOUT_S)
        topic = md.topics.get(self._topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise BenchError(f"topic {self._topic!r} does not exist")
        return sorted(topic.partitions)

    def watermarks(self, partition: int) -> tuple[int, int]:
        lo, hi = self._c.get_watermark_offsets(TopicPartition(self._topic, partition),
                                               timeout=_TIMEOUT_S)
        return int(lo), int(hi)

    def assign(self, offsets: dict[int, int]) -> None:
        self._c.assign([TopicPartition(self._topic, p, o) for p, o in offsets.items()])

    def subscribe(self) -> None:
        self._c.subscribe([self._topic])

    def poll(self, timeout_s: float) -> tuple[int, int]:
        # consume(n, timeout) waits until n records are there: block for one record only,
        # then take whatever else is already fetched.
        first = self._c.poll(timeout_s)
        if first is None:
            return 0, 0
        msgs = [first, *self._c.consume(10_000, 0)]
        errors = [err for m in msgs if (err := m.error()) is not None]
        if errors:
            err = errors[0]
            if err.fatal() or not err.retriable():
                raise BenchError(f"consumer error: {err.str()}")
            msgs = [m for m in msgs if m.error() is None]
        return len(msgs), sum(map(len, msgs))

    def close(self) -> None:
        self._c.close()


class _KafkaPython:
    def __init__(self, opts: ConsumeOptions) -> None:
        from kafka import KafkaConsumer  # noqa: PLC0415 - optional client

        self._topic = opts.topic
        self._c = KafkaConsumer(bootstrap_servers=opts.bootstrap, group_id=opts.group,
                                enable_auto_commit=opts.group is not None,
                                auto_offset_reset="earliest")

    def partitions(self) -> list[int]:
        found = self._c.partitions_for_topic(self._topic)
        if not found:
            raise BenchError(f"topic {self._topic!r} does not exist")
        return sorted(found)

    def watermarks(self, partition: int) -> tuple[int, int]:
        from kafka import TopicPartition as Tp  # noqa: PLC0415

        tp = Tp(self._topic, partition)
        return (int(self._c.beginning_offsets([tp])[tp]), int(self._c.end_offsets([tp])[tp]))

    def assign(self, offsets: dict[int, int]) -> None:
        from kafka import TopicPartition as Tp  # noqa: PLC0415

        tps = {p: Tp(self._topic, p) for p in offsets}
        self._c.assign(list(tps.values()))
        for p, o in offsets.items():
            self._c.seek(tps[p], o)

    def subscribe(self) -> None:
        self._c.subscribe([self._topic])

    def poll(self, timeout_s: float) -> tuple[int, int]:
        batches = self._c.poll(timeout_ms=int(timeout_s * 1000), max_records=10_000)
        count = size = 0
        for records in batches.values():
            count += len(records)
            size += sum(len(r.value or b"") for r in records)
        return count, size

    def close(self) -> None:
        self._c.close()


class _AioKafka:
    """aiokafka behind the same blocking interface, on a private event loop."""

    def __init__(self, opts: ConsumeOptions) -> None:
        from aiokafka import AIOKafkaConsumer  # noqa: PLC0415 - optional client

        self._topic = opts.topic
        self._loop = asyncio.new_event_loop()

        async def make() -> Any:
            c = AIOKafkaConsumer(bootstrap_servers=opts.bootstrap, group_id=opts.group,
                                 enable_auto_commit=opts.group is not None,
                                 auto_offset_reset="earliest")
            await c.start()
            return c

        self._c = self._loop.run_until_complete(make())

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def partitions(self) -> list[int]:
        found = self._run(self._c._client.fetch_all_metadata()).partitions_for_topic(self._topic)
        if not found:
            raise BenchError(f"topic {self._topic!r} does not exist")
        return sorted(found)

    def watermarks(self, partition: int) -> tuple[int, int]:
        from aiokafka import TopicPartition as Tp  # noqa: PLC0415

        tp = Tp(self._topic, partition)
        lo = self._run(self._c.beginning_offsets([tp]))[tp]
        hi = self._run(self._c.end_offsets([tp]))[tp]
        return int(lo), int(hi)

    def assign(self, offsets: dict[int, int]) -> None:
        from aiokafka import TopicPartition as Tp  # noqa: PLC0415

        tps = {p: Tp(self._topic, p) for p in offsets}

        async def assign() -> None:  # aiokafka wants its loop running here
            self._c.assign(list(tps.values()))
            for p, o in offsets.items():
                self._c.seek(tps[p], o)

        self._run(assign())

    def subscribe(self) -> None:
        async def subscribe() -> None:
            self._c.subscribe([self._topic])

        self._run(subscribe())

    def poll(self, timeout_s: float) -> tuple[int, int]:
        batches = self._run(self._c.getmany(timeout_ms=int(timeout_s * 1000),
                                            max_records=10_000))
        count = size = 0
        for records in batches.values():
            count += len(records)
            size += sum(len(r.value or b"") for r in records)
        return count, size

    def close(self) -> None:
        self._run(self._c.stop())
        self._loop.close()


_CLIENTS: dict[str, type[_Confluent] | type[_KafkaPython] | type[_AioKafka]] = {
    "confluent-kafka": _Confluent, "kafka-python": _KafkaPython, "aiokafka": _AioKafka}


def _start_offsets(client: _Client, opts: ConsumeOptions) -> tuple[dict[int, int], int]:
    """Where each partition starts, and how many records one round holds."""
    offsets: dict[int, int] = {}
    available = 0
    for p in client.partitions():
        lo, hi = client.watermarks(p)
        start = lo if opts.last is None else max(lo, hi - opts.last)
        offsets[p] = start
        available += hi - start
    return offsets, available


def _check_options(opts: ConsumeOptions) -> None:
    if opts.client not in _CLIENTS:
        raise BenchError(f"unknown client {opts.client!r} (one of {', '.join(CLIENTS)})")
    if opts.num_records <= 0 or opts.rounds <= 0:
        raise BenchError("--num-records and --rounds must be positive")
    if opts.group is not None and (opts.rounds > 1 or opts.last is not None):
        raise BenchError("--rounds and --last need assign mode (no --group)")


def run_consume(opts: ConsumeOptions) -> dict[str, Any]:
    """Runs the consumer benchmark and returns its report (JSON-ready)."""
    _check_options(opts)
    start = time.perf_counter()
    try:
        client: _Client = _CLIENTS[opts.client](opts)
    except KafkaException as exc:
        raise BenchError(f"cannot create the consumer: {exc}") from exc
    progress = Progress("consume", opts.progress)
    count = size = first_batch = 0
    first = last = 0.0
    target = opts.num_records * opts.rounds
    try:
        offsets: dict[int, int] = {}
        per_round = opts.num_records
        if opts.group is None:
            offsets, available = _start_offsets(client, opts)
            if opts.rounds > 1:
                per_round = min(per_round, available)
                target = per_round * opts.rounds
            client.assign(offsets)
        else:
            client.subscribe()
        in_round = 0
        idle_since = time.perf_counter()
        while count < target:
            n, b = client.poll(0.2)
            now = time.perf_counter()
            if not n:
                if now - idle_since > opts.timeout_s:
                    break
                continue
            idle_since = now
            if not count:
                first, first_batch = now, n
            count += n
            size += b
            last = now
            in_round += n
            if opts.rounds > 1 and in_round >= per_round and count < target:
                in_round = 0
                client.assign(offsets)
            progress.update(count)
    finally:
        client.close()
    steady = last - first
    elapsed = (last or time.perf_counter()) - start
    # The first poll's records arrived during connection setup: the steady rate starts after.
    steady_count = count - first_batch if steady > 0 else count
    steady = steady if steady > 0 else elapsed
    steady_bytes = size * steady_count / count if count else 0
    return {
        "tool": "consume", "client": opts.client, "topic": opts.topic,
        "mode": "group" if opts.group else "assign", "target": target,
        "records": count, "bytes": size, "complete": count >= target,
        "elapsed_s": round(elapsed, 4), "steady_s": round(steady, 4),
        "records_per_s": round(rate(steady_count, steady), 1),
        "mb_per_s": round(rate(steady_bytes, steady) / 1e6, 3),
        "records_per_s_total": round(rate(count, elapsed), 1),
        "mb_per_s_total": round(rate(size, elapsed) / 1e6, 3),
        "time_to_first_record_ms": round((first - start) * 1000, 2) if count else None,
    }
