"""Partition scale (the suite's W12): what a broker's partition count costs it.

On a broker of its own (started fresh for the run), `partitions` partitions are made as
topics of at most `TOPIC_SIZE` partitions, then measured in turn: the time to create
them (until each answers, as `create_topic` of each side waits), a Metadata request for
all of them, one record produced to each, the broker's resident memory and open
descriptors with them all written, and two restarts: after a clean shutdown (its length
measured too) and after SIGKILL. A restart is timed from the launch of the process until
every partition answers ListOffsets with its one record: the broker serves all of them
again, not merely its first request. The run fails if a record is missing after either.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from ads.bench.produce import CLIENT_LOG, BenchError, quiet_admin
from ads.bench.stats import cpu_seconds, median, peak_rss_mb, rss_mb

TOPIC_SIZE = 1000
_TIMEOUT_S = 600.0


class ScaleBroker(Protocol):
    """A broker process the run may stop, kill and launch again on the same data."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def pid(self) -> int: ...

    def create_topic(self, name: str, partitions: int) -> None: ...

    def stop(self, timeout_s: float) -> object: ...

    def kill(self) -> None: ...

    def relaunch(self, timeout_s: float) -> None: ...


def topic_sizes(partitions: int) -> list[tuple[str, int]]:
    """The topics that make up `partitions` partitions: names and partition counts."""
    out = []
    for i, start in enumerate(range(0, partitions, TOPIC_SIZE)):
        out.append((f"w12-{i}", min(TOPIC_SIZE, partitions - start)))
    return out


def _timed(fn: Callable[[], object]) -> float:
    start = time.monotonic()
    fn()
    return round(time.monotonic() - start, 3)


def _open_files(pid: int) -> int | None:
    try:
        return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return None


def _metadata_ms(bootstrap: str, partitions: int) -> float:
    admin = quiet_admin(bootstrap)
    admin.list_topics(timeout=60)  # connected first: the request is timed, not the set-up
    times = []
    for _ in range(3):
        start = time.monotonic()
        md = admin.list_topics(timeout=60)
        times.append(time.monotonic() - start)
        listed = sum(len(t.partitions) for name, t in md.topics.items()
                     if name.startswith("w12-"))
        if listed != partitions:
            raise BenchError(f"W12: Metadata lists {listed} partitions, expected {partitions}")
    return round(median(times) * 1000, 3)


def _produce_one_each(bootstrap: str, topics: list[tuple[str, int]]) -> None:
    failed: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "logger": CLIENT_LOG})
    for name, count in topics:
        for p in range(count):
            while True:
                try:
                    producer.produce(name, value=b"%s/%d" % (name.encode(), p), partition=p,
                                     on_delivery=report)
                    break
                except BufferError:  # the client's queue is full: let it drain
                    producer.poll(0.1)
    left = producer.flush(_TIMEOUT_S)
    if left or failed:
        raise BenchError(f"W12: {left} records unsent, {len(failed)} failed "
                         f"({failed[:1]})")


def await_served(bootstrap: str, topics: list[tuple[str, int]], deadline: float) -> None:
    """Until every partition answers ListOffsets with an end offset of 1 (its record)."""
    admin = quiet_admin(bootstrap)
    pending = [TopicPartition(name, p) for name, count in topics for p in range(count)]
    wrong: dict[TopicPartition, int] = {}
    while pending:
        if time.monotonic() > deadline:
            raise BenchError(f"W12: {len(pending)} partitions not served in time"
                             + (f"; end offsets {list(wrong.values())[:5]}" if wrong else ""))
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in pending},
                                     request_timeout=30)
        still = []
        for tp, future in futures.items():
            try:
                end = future.result().offset
            except KafkaException:  # not led yet, or still loading
                still.append(tp)
                continue
            if end != 1:
                wrong[tp] = end
        if wrong:
            raise BenchError(f"W12: {len(wrong)} partitions lost or gained records, "
                             f"e.g. end offsets {list(wrong.values())[:5]}")
        pending = still
        if pending:
            time.sleep(0.2)


def run_scale(broker: ScaleBroker, partitions: int) -> dict[str, Any]:
    """Measures `partitions` partitions on `broker` (freshly started, empty)."""
    topics = topic_sizes(partitions)
    out: dict[str, Any] = {"partitions": partitions, "topics": len(topics)}
    out["create_s"] = _timed(lambda: _create(broker, topics))
    out["metadata_ms"] = _metadata_ms(broker.bootstrap, partitions)
    out["produce_one_each_s"] = _timed(lambda: _produce_one_each(broker.bootstrap, topics))
    await_served(broker.bootstrap, topics, time.monotonic() + _TIMEOUT_S)
    out["rss_mb"] = rss_mb(broker.pid)
    out["open_files"] = _open_files(broker.pid)
    # The first process's whole life (creation and writes included), read before it stops:
    # a sampler of its pid would lose it at the restart.
    cpu, peak = cpu_seconds(broker.pid), peak_rss_mb(broker.pid)
    out["broker"] = (None if cpu is None or peak is None
                     else {"cpu_s": round(cpu, 3), "rss_max_mb": round(peak, 1)})
    out["shutdown_s"] = _timed(lambda: broker.stop(_TIMEOUT_S))
    out["restart_clean_s"] = _timed(lambda: _restart(broker, topics))
    broker.kill()
    out["restart_after_kill_s"] = _timed(lambda: _restart(broker, topics))
    out["rss_after_restart_mb"] = rss_mb(broker.pid)
    return out


def _create(broker: ScaleBroker, topics: list[tuple[str, int]]) -> None:
    for name, count in topics:
        broker.create_topic(name, count)


def _restart(broker: ScaleBroker, topics: list[tuple[str, int]]) -> None:
    deadline = time.monotonic() + _TIMEOUT_S
    broker.relaunch(_TIMEOUT_S)
    await_served(broker.bootstrap, topics, deadline)
