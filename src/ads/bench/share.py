"""`ads bench share-consume`: share group (KIP-932) throughput against a classic consumer.

`consumers` share consumers of a new share group read the topic together, each in its own
thread (confluent-kafka's `ShareConsumer`, which acknowledges a poll's records implicitly
on the next poll, as a queue worker that processes every record would). The group is set to
start at the earliest offset (the group config `share.auto.offset.reset`), so the records
must be there before the run: `ads bench produce` first. The run stops after `num_records`
distinct records or when no record came for `timeout_s`; a record delivered again (a
consumer that stops releases the records its client fetched ahead; a lock that ran out)
counts once, and the report says how many deliveries were repeats.

With `compare`, a classic group consumer (`ads bench consume --group`) reads the same records
in the same run, and the report gives the share consumers' rate over its rate.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from ads.bench.consume import ConsumeOptions, run_consume
from ads.bench.produce import CLIENT_LOG, BenchError
from ads.bench.stats import rate

_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ShareConsumeOptions:
    bootstrap: str
    topic: str
    num_records: int
    consumers: int = 1
    timeout_s: float = 10.0  # stop when nothing came this long
    compare: bool = False  # also a classic group consumer, for the ratio
    config: dict[str, str] = field(default_factory=dict)


class _Tally:
    """What the share consumers read, from their threads."""

    def __init__(self, target: int) -> None:
        self.lock = threading.Lock()
        self.target = target
        self.count = self.size = 0
        self.first = self.last = 0.0
        self.first_batch = 0
        self.offsets: set[tuple[int, int]] = set()
        self.redelivered = 0
        self.idle_since = time.perf_counter()
        self.errors: list[str] = []

    def add(self, msgs: list[Any]) -> None:
        """Counts each record once: one delivered again (a consumer that stopped released
        what it had fetched ahead) is only counted as such."""
        now = time.perf_counter()
        with self.lock:
            new = 0
            for m in msgs:
                key = (m.partition(), m.offset())
                if key in self.offsets:
                    self.redelivered += 1
                    continue
                self.offsets.add(key)
                new += 1
                self.size += len(m)
            if not self.count:
                self.first, self.first_batch = now, new
            self.count += new
            self.last = self.idle_since = now

    def done(self, timeout_s: float) -> bool:
        with self.lock:
            return (self.count >= self.target or bool(self.errors)
                    or time.perf_counter() - self.idle_since > timeout_s)


def _start_at_earliest(opts: ShareConsumeOptions, group: str) -> None:
    conf: dict[str, Any] = {"bootstrap.servers": opts.bootstrap, "logger": CLIENT_LOG,
                            **opts.config}
    admin = AdminClient(conf)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([resource])[resource].result(_TIMEOUT_S)
    except KafkaException as exc:
        raise BenchError(f"cannot set the share group's configs: {exc}") from exc


def _worker(opts: ShareConsumeOptions, group: str, tally: _Tally) -> None:
    try:
        consumer = ShareConsumer({"bootstrap.servers": opts.bootstrap, "group.id": group,
                                  "logger": CLIENT_LOG, **opts.config})
    except KafkaException as exc:
        with tally.lock:
            tally.errors.append(f"cannot create a share consumer: {exc}")
        return
    try:
        consumer.subscribe([opts.topic])
        while not tally.done(opts.timeout_s):
            msgs = [m for m in consumer.poll(0.2) if m.error() is None]
            if msgs:
                tally.add(msgs)
        consumer.commit_sync(_TIMEOUT_S)  # accepts the last poll's records; close would not
    except KafkaException as exc:
        with tally.lock:
            tally.errors.append(str(exc))
    finally:
        consumer.close()


def _share_run(opts: ShareConsumeOptions) -> dict[str, Any]:
    group = f"ads-bench-share-{uuid.uuid4().hex[:8]}"
    _start_at_earliest(opts, group)
    tally = _Tally(opts.num_records)
    start = time.perf_counter()
    workers = [threading.Thread(target=_worker, args=(opts, group, tally),
                                name=f"share-consumer-{n}", daemon=True)
               for n in range(opts.consumers)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if tally.errors:
        raise BenchError(f"share consumer error: {tally.errors[0]}")
    count, first, last = tally.count, tally.first, tally.last
    steady = last - first
    # The first poll's records arrived during joining: the steady rate starts after.
    steady_count = count - tally.first_batch if steady > 0 else count
    steady = steady if steady > 0 else (last or time.perf_counter()) - start
    return {
        "records": count, "bytes": tally.size, "complete": count >= opts.num_records,
        "redelivered": tally.redelivered,
        "steady_s": round(steady, 4),
        "records_per_s": round(rate(steady_count, steady), 1),
        "mb_per_s": round(rate(tally.size * steady_count / count if count else 0,
                               steady) / 1e6, 3),
        "time_to_first_record_ms": round((first - start) * 1000, 2) if count else None,
    }


def run_share_consume(opts: ShareConsumeOptions) -> dict[str, Any]:
    """Runs the share-consume benchmark (and the classic one with `compare`)."""
    if opts.num_records <= 0 or opts.consumers <= 0:
        raise BenchError("--num-records and --consumers must be positive")
    report: dict[str, Any] = {"tool": "share-consume", "topic": opts.topic,
                              "consumers": opts.consumers, "target": opts.num_records,
                              "share": _share_run(opts)}
    if opts.compare:
        classic = run_consume(ConsumeOptions(
            bootstrap=opts.bootstrap, topic=opts.topic, num_records=opts.num_records,
            group=f"ads-bench-classic-{uuid.uuid4().hex[:8]}", timeout_s=opts.timeout_s,
            config=opts.config))
        report["classic"] = {k: classic[k] for k in ("records", "complete", "records_per_s",
                                                     "mb_per_s", "time_to_first_record_ms")}
        report["share_over_classic"] = round(rate(report["share"]["records_per_s"],
                                                  classic["records_per_s"]), 3)
    return report
