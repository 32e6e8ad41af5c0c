"""`ads bench suite`: the same workloads against an ADS broker and its peers: librdkafka's
mock broker, Apache Kafka's broker, or both.

Every broker runs as a subprocess of the suite: ADS from this checkout (`python -m
ads.cli.main broker`, writing segments to a real data directory), the mock in its helper
(`ads.bench.mock`), Kafka as one KRaft node from its jars (`ads.bench.kafka`, its log
directory beside ADS's, on the same disk). Each workload runs against every side,
alternating ADS, peer(s), ADS, peer(s), ... for `reps` repetitions, each on a fresh topic;
the suite reports medians, min-max and the ratio ADS / peer of each workload's main metric,
with each broker's CPU time and peak resident memory sampled while the workload's measured
part ran. Per broker it also records the time from launching its process to the first
answered Metadata request, and its CPU time and peak resident memory over the whole run.

Workloads (sizes of a full run; `--quick` shrinks them to seconds):
- W1-W3 produce (`ads bench produce`): 100 B on 1 partition, 1,000 B on 1, 100 B over 16;
  acks=1, linger.ms=5. Each producer is timed from the acknowledgement of one first record,
  its set-up (connections, metadata, an idempotent producer's id) reported apart as
  `ready_ms` (as W8 connects before it times Metadata). Topics nothing reads later are
  deleted after their run, so the page cache does not fill with dirty segments over the
  suite.
- W4 consume the last records W1 wrote, re-read in rounds; W5 consume 10,000 B records over 8
  partitions, versus the loopback bandwidth measured in the same run. Both are sized to what
  the mock keeps (about 5 MiB per partition), so both brokers serve the same data.
- W6 end-to-end latency at 10,000 records/s with linger.ms=5; W7 the same with linger.ms=0
  and one record per request (`batch.num.messages=1`).
- W8 a 1,000-partition topic: Metadata latency, then produce spread over every partition.
- W11 broker-bound saturation (`ads.bench.saturate`): Produce requests of 1 and then 10
  records of 100 B pipelined over raw sockets by a client that costs almost nothing, 4
  connections with 8 requests in flight each over 8 partitions, acks=1: requests/s,
  records/s, the broker's CPU time per request and the cores it used.
- W12 partition scale (`ads.bench.scale`): on a fresh broker per count (1,000 and 10,000
  partitions in topics of 1,000): creation, Metadata, one record to each, resident memory
  and open descriptors, the clean shutdown, and the restarts after it and after SIGKILL
  until every partition is served again. ADS and Kafka only (the mock keeps no log).
- W9 and W10, replicated: three ADS brokers on a ZooKeeper server of their own against three
  Kafka nodes in KRaft mode (`ads.bench.kafka.KafkaCluster`), started after the single
  brokers have stopped; a topic with a replica on every broker and min.insync.replicas=2,
  an idempotent acks=all producer of 100 B records: W9 produce on 1 partition, W10
  end-to-end latency at 10,000 records/s. The mock has no replication: it sits them out.
  Each side's CPU time and memory are its three brokers' sums (ADS's ZooKeeper aside).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from ads.bench import report
from ads.bench.consume import ConsumeOptions, run_consume
from ads.bench.e2e import E2EOptions, run_e2e
from ads.bench.kafka import BENCH_SETTINGS, KafkaCluster, KafkaPeer
from ads.bench.mock import MockBroker
from ads.bench.processes import (
    REPLICATED_TOPIC,
    AdsBrokerProcess,
    AdsCluster,
    Profiler,
    lifetime_usage,
    machine,
    measure_loopback,
)
from ads.bench.produce import CLIENT_LOG, BenchError, ProduceOptions, ensure_topic, run_produce
from ads.bench.saturate import SaturateOptions, run_saturate
from ads.bench.scale import run_scale
from ads.bench.stats import ResourceSampler, median

PEERS = ("mock", "kafka")


@dataclass(frozen=True, slots=True)
class Sizes:
    w1_records: int = 1_000_000
    w2_records: int = 500_000
    w3_records: int = 1_000_000
    w4_last: int = 40_000  # 100 B records: about 4.4 MB, inside the mock's 5 MiB
    w4_rounds: int = 25
    w5_partitions: int = 8
    w5_per_partition: int = 450  # 10,000 B records: about 4.5 MB per partition
    w5_rounds: int = 15
    e2e_records: int = 30_000
    w8_partitions: int = 1000
    w8_records: int = 200_000
    w9_records: int = 500_000
    w11_seconds: float = 10.0  # per request size
    w12_partitions: tuple[int, ...] = (1_000, 10_000)
    loopback_bytes: int = 1 << 30
    # produced and read back once per broker before the first workload, unmeasured: the
    # JVM's JIT compiles Kafka's hot paths on it instead of in the first repetition
    warmup_records: int = 500_000


QUICK = Sizes(w1_records=3000, w2_records=1000, w3_records=3000, w4_last=1000, w4_rounds=2,
              w5_partitions=2, w5_per_partition=20, w5_rounds=1, e2e_records=300,
              w8_partitions=20, w8_records=2000, w9_records=3000, w11_seconds=1.0,
              w12_partitions=(20,),
              loopback_bytes=16 << 20,
              warmup_records=1000)


@dataclass(frozen=True, slots=True)
class SuiteOptions:
    output_dir: Path = Path("bench-results")
    workloads: tuple[str, ...] = ("W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9",
                                  "W10", "W11", "W12")
    reps: int = 3
    sizes: Sizes = field(default_factory=Sizes)
    quick: bool = False
    profile: bool = False
    docs: Path | None = None  # update this file's results block
    keep_data: bool = False
    ads_sets: tuple[str, ...] = ()
    command: str = "ads bench suite"
    progress: bool = True
    peers: tuple[str, ...] = ("mock",)  # of PEERS, in the order they run after ADS
    kafka_jars: Path | None = None  # Kafka's jars, for the peer "kafka"

    @property
    def sides(self) -> tuple[str, ...]:
        return ("ads", *self.peers)


# -------------------------------------------------------------------------- brokers

# ------------------------------------------------------------------------ measuring

@dataclass(slots=True)
class _Target:
    side: str
    bootstrap: str
    pids: tuple[int, ...]  # the broker's process, or a cluster's brokers'
    create_topic: Callable[[str, int], None]
    delete_topic: Callable[[str], None]


@dataclass(slots=True)
class _Context:
    opts: SuiteOptions
    run_dir: Path
    loopback_mb_per_s: float | None = None
    profiles: dict[str, list[Path]] = field(default_factory=dict)
    topics: set[tuple[str, str]] = field(default_factory=set)

    def measure(self, target: _Target, workload: str, rep: int,
                fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        profiler = None
        if self.opts.profile and target.side == "ads":
            out = self.run_dir / "profiles" / f"{workload}-r{rep}.txt"
            out.parent.mkdir(exist_ok=True)
            profiler = Profiler(target.pids[0], out)
        load = os.getloadavg()[0]
        sampler = ResourceSampler(*target.pids).start()
        # The clients run in this process (librdkafka's threads included): their CPU time
        # shows when a workload is bound by the client rather than by the broker.
        client_cpu = time.process_time()
        try:
            result = fn()
        finally:
            client_cpu = time.process_time() - client_cpu
            usage = sampler.stop()
            if profiler is not None:
                profiler.stop()
                self.profiles.setdefault(workload, []).append(profiler.out)
        result["broker"] = usage.as_dict() if usage else None
        result["client_cpu_s"] = round(client_cpu, 3)
        result["load_average"] = round(max(load, os.getloadavg()[0]), 2)
        return result


# ------------------------------------------------------------------------ workloads

@dataclass(frozen=True, slots=True)
class Metric:
    label: str
    path: tuple[str, ...]  # keys into a run's report
    unit: str
    higher_is_better: bool


@dataclass(frozen=True, slots=True)
class Workload:
    id: str
    title: str
    run: Callable[[_Context, _Target, int], dict[str, Any]]
    metric: Metric
    extras: tuple[Metric, ...] = ()
    latency_path: tuple[str, ...] | None = None  # percentiles to plot
    latency_label: str = ""
    note: Callable[[Sizes], str] = lambda _s: ""
    replicated: bool = False  # runs on the three-broker clusters, not the single brokers
    sides: tuple[str, ...] = ()  # only these sides run it (none given: every side)


# What the replicated workloads' producers set: exactly what a user asks for durability.
IDEMPOTENT = {"enable.idempotence": "true"}


def _produce_opts(target: _Target, topic: str, n: int, size: int = 100, acks: str = "1",
                  **kw: Any) -> ProduceOptions:
    return ProduceOptions(bootstrap=target.bootstrap, topic=topic, num_records=n,
                          record_size=size, acks=acks, linger_ms=5.0, **kw)


def _produce_workload(wl: str, size: int, partitions: int, count: Callable[[Sizes], int],
                      acks: str = "1", config: dict[str, str] | None = None
                      ) -> Callable[[_Context, _Target, int], dict[str, Any]]:
    def run(ctx: _Context, target: _Target, rep: int) -> dict[str, Any]:
        topic = f"{wl.lower()}-r{rep}"
        target.create_topic(topic, partitions)
        opts = _produce_opts(target, topic, count(ctx.opts.sizes), size, acks,
                             config=dict(config or {}), warm_up=True)
        result = ctx.measure(target, wl, rep, lambda: run_produce(opts))
        if wl == "W1":  # W4 reads it
            ctx.topics.add((target.side, topic))
        else:
            target.delete_topic(topic)
        return result

    return run


def _check_complete(result: dict[str, Any], what: str) -> None:
    if result.get("failed"):
        raise BenchError(f"{what}: {result['failed']} records failed ({result['first_error']})")


def _w4(ctx: _Context, target: _Target, rep: int) -> dict[str, Any]:
    sizes = ctx.opts.sizes
    topic = f"w1-r{rep}"
    if (target.side, topic) not in ctx.topics:  # W1 not run: write its kind of data here
        topic = f"w4-r{rep}"
        target.create_topic(topic, 1)
        _check_complete(run_produce(_produce_opts(target, topic, sizes.w4_last)), "W4 preload")
    opts = ConsumeOptions(bootstrap=target.bootstrap, topic=topic, num_records=sizes.w4_last,
                          last=sizes.w4_last, rounds=sizes.w4_rounds)
    result = ctx.measure(target, "W4", rep, lambda: run_consume(opts))
    target.delete_topic(topic)
    return result


def _w5(ctx: _Context, target: _Target, rep: int) -> dict[str, Any]:
    sizes = ctx.opts.sizes
    topic = f"w5-r{rep}"
    target.create_topic(topic, sizes.w5_partitions)
    total = sizes.w5_partitions * sizes.w5_per_partition
    _check_complete(run_produce(_produce_opts(target, topic, total, 10_000, round_robin=True)),
                    "W5 preload")
    opts = ConsumeOptions(bootstrap=target.bootstrap, topic=topic, num_records=total,
                          rounds=sizes.w5_rounds)
    result = ctx.measure(target, "W5", rep, lambda: run_consume(opts))
    target.delete_topic(topic)
    if ctx.loopback_mb_per_s:
        result["loopback_pct"] = round(100.0 * result["mb_per_s"] / ctx.loopback_mb_per_s, 1)
    return result


def _e2e_workload(wl: str, linger_ms: float, producer_config: dict[str, str],
                  acks: str = "1") -> Callable[[_Context, _Target, int], dict[str, Any]]:
    def run(ctx: _Context, target: _Target, rep: int) -> dict[str, Any]:
        topic = f"{wl.lower()}-r{rep}"
        target.create_topic(topic, 1)
        opts = E2EOptions(bootstrap=target.bootstrap, topic=topic,
                          num_records=ctx.opts.sizes.e2e_records, rate=10_000.0,
                          linger_ms=linger_ms, producer_config=producer_config, acks=acks)
        return ctx.measure(target, wl, rep, lambda: run_e2e(opts))

    return run


def _w8(ctx: _Context, target: _Target, rep: int) -> dict[str, Any]:
    sizes = ctx.opts.sizes
    topic = f"w8-r{rep}"
    t0 = time.perf_counter()
    target.create_topic(topic, sizes.w8_partitions)
    create_s = time.perf_counter() - t0
    opts = _produce_opts(target, topic, sizes.w8_records, round_robin=True, warm_up=True)

    def run() -> dict[str, Any]:
        client = Producer({"bootstrap.servers": target.bootstrap, "logger": CLIENT_LOG})
        client.list_topics(topic, timeout=30)  # connect first: time requests, not setup
        times = []
        for _ in range(10):
            start = time.perf_counter()
            md = client.list_topics(topic, timeout=30)
            times.append(time.perf_counter() - start)
            if len(md.topics[topic].partitions) != sizes.w8_partitions:
                raise BenchError(f"W8: metadata lists {len(md.topics[topic].partitions)} "
                                 f"partitions, expected {sizes.w8_partitions}")
        result = run_produce(opts)
        result["metadata_ms"] = round(median(times) * 1000, 3)
        return result

    result = ctx.measure(target, "W8", rep, run)
    target.delete_topic(topic)
    result["create_topic_s"] = round(create_s, 3)
    return result


def _w11(ctx: _Context, target: _Target, rep: int) -> dict[str, Any]:
    """The side's broker, then the machine as a whole: for ADS one broker per core (a
    cluster of its own, the topic's partitions spread over them, one replica each); a
    Kafka broker or the mock already runs on every core."""
    result = _saturate(ctx, target, f"w11-r{rep}", rep, target.create_topic)
    if target.side != "ads":
        result["machine"] = {k: result[k] for k in ("one", "ten")}
        return result
    cores = os.cpu_count() or 1
    cluster = AdsCluster(ctx.run_dir / f"w11-per-core-r{rep}", cores, ctx.opts.ads_sets)
    cluster.start()
    try:
        own = _Target("ads", cluster.bootstrap, cluster.pids, cluster.create_topic,
                      cluster.delete_topic)
        result["machine"] = _saturate(ctx, own, f"w11-per-core-r{rep}", rep, lambda name, n:
                                      ensure_topic(cluster.bootstrap, name, n))
        result["machine"]["brokers"] = cores
    finally:
        cluster.stop()
        if not ctx.opts.keep_data:
            shutil.rmtree(ctx.run_dir / f"w11-per-core-r{rep}", ignore_errors=True)
    return result


def _saturate(ctx: _Context, target: _Target, topic: str, rep: int,
              create: Callable[[str, int], object]) -> dict[str, Any]:
    seconds = ctx.opts.sizes.w11_seconds
    create(topic, W11_PARTITIONS)

    def run() -> dict[str, Any]:
        return {name: run_saturate(SaturateOptions(
            bootstrap=target.bootstrap, topic=topic, records_per_request=records,
            duration_s=seconds, warm_up_s=min(0.5, seconds / 2), broker_pids=target.pids))
            for name, records in (("one", 1), ("ten", 10))}

    result = ctx.measure(target, "W11", rep, run)
    target.delete_topic(topic)
    return result


W11_PARTITIONS = 8


def _w12(ctx: _Context, target: _Target, rep: int) -> dict[str, Any]:
    """Each partition count on a broker of its own kind, started fresh for it."""
    by_count: dict[str, Any] = {}
    load = os.getloadavg()[0]
    for count in ctx.opts.sizes.w12_partitions:
        work = ctx.run_dir / f"w12-{target.side}-{count}-r{rep}"
        work.mkdir(parents=True)
        broker: AdsBrokerProcess | KafkaPeer
        if target.side == "ads":
            broker = AdsBrokerProcess(work / "data", work / "ads-broker.log", ctx.opts.ads_sets)
        elif target.side == "kafka" and ctx.opts.kafka_jars is not None:
            broker = KafkaPeer(ctx.opts.kafka_jars, work / "kafka", BENCH_SETTINGS)
        else:
            raise BenchError(f"W12 has no broker of its own for {target.side}")
        broker.start(120)
        client_cpu = time.process_time()
        try:
            by_count[str(count)] = run_scale(broker, count)
            by_count[str(count)]["client_cpu_s"] = round(time.process_time() - client_cpu, 3)
        finally:
            broker.stop(120)
            if not ctx.opts.keep_data:
                shutil.rmtree(work / "data", ignore_errors=True)
                shutil.rmtree(work / "kafka" / "data", ignore_errors=True)
    largest = by_count[str(max(ctx.opts.sizes.w12_partitions))]
    # The row's broker resources are those of the largest count's broker.
    return {"by_count": by_count, "largest": largest, "broker": largest["broker"],
            "client_cpu_s": largest["client_cpu_s"], "load_average": round(load, 2)}


def _produce_metrics() -> tuple[Metric, tuple[Metric, ...]]:
    return (Metric("records/s", ("records_per_s",), "records/s", True),
            (Metric("MB/s", ("mb_per_s",), "MB/s", True),
             Metric("ack latency p99 ms", ("latency_ms", "p99"), "ms", False),
             Metric("producer ready ms (set-up, not timed)", ("ready_ms",), "ms", False)))


_P_MAIN, _P_EXTRA = _produce_metrics()
_E2E_P99 = Metric("e2e p99 ms", ("latency_ms", "p99"), "ms", False)
_E2E_P50 = Metric("e2e p50 ms", ("latency_ms", "p50"), "ms", False)
# The clients' own view of the broker: what e2e latency is made of (docs/benchmarks.md).
_E2E_RTTS = (Metric("produce round trip p50 µs (client's statistics)", ("produce_rtt_p50_us",),
                    "µs", False),
             Metric("fetch round trip p50 µs (client's statistics)", ("fetch_rtt_p50_us",),
                    "µs", False),
             Metric("fetch requests/s", ("fetch_requests_per_s",), "requests/s", True))

WORKLOADS: dict[str, Workload] = {w.id: w for w in (
    Workload("W1", "produce 100 B, 1 partition", _produce_workload(
        "W1", 100, 1, lambda s: s.w1_records), _P_MAIN, _P_EXTRA,
        ("latency_ms",), "ack latency"),
    Workload("W2", "produce 1,000 B, 1 partition", _produce_workload(
        "W2", 1000, 1, lambda s: s.w2_records), _P_MAIN, _P_EXTRA),
    Workload("W3", "produce 100 B, 16 partitions", _produce_workload(
        "W3", 100, 16, lambda s: s.w3_records), _P_MAIN, _P_EXTRA),
    Workload("W4", "consume W1's records", _w4,
             Metric("records/s", ("records_per_s",), "records/s", True),
             (Metric("time to first record ms", ("time_to_first_record_ms",), "ms", False),),
             note=lambda s: f"last {s.w4_last:,} records read {s.w4_rounds}×: the mock keeps "
                            "only ~5 MiB per partition"),
    Workload("W5", "consume 10,000 B records", _w5,
             Metric("MB/s", ("mb_per_s",), "MB/s", True),
             (Metric("% of loopback", ("loopback_pct",), "%", True),),
             note=lambda s: f"{s.w5_partitions} partitions × {s.w5_per_partition} records "
                            f"read {s.w5_rounds}×; the mock returns one batch per partition "
                            "per fetch"),
    Workload("W6", "e2e at 10k records/s, linger 5 ms", _e2e_workload("W6", 5.0, {}),
             _E2E_P99, (_E2E_P50, *_E2E_RTTS), ("latency_ms",), "end-to-end"),
    Workload("W7", "e2e at 10k records/s, linger 0, 1 record/request",
             _e2e_workload("W7", 0.0, {"batch.num.messages": "1"}), _E2E_P99,
             (_E2E_P50, Metric("requests/s", ("requests_per_s",), "requests/s", True),
              *_E2E_RTTS), ("latency_ms",), "end-to-end"),
    Workload("W8", "1,000 partitions: metadata + produce", _w8,
             Metric("records/s", ("records_per_s",), "records/s", True),
             (Metric("Metadata ms", ("metadata_ms",), "ms", False),
              Metric("topic creation s (mock: C API; Kafka: until its partitions answer)",
                     ("create_topic_s",), "s", False)),
             note=lambda s: f"{s.w8_partitions:,} partitions, records spread round robin"),
    Workload("W9", "3 brokers, RF=3: produce 100 B acks=all, idempotent", _produce_workload(
        "W9", 100, 1, lambda s: s.w9_records, "all", IDEMPOTENT), _P_MAIN, _P_EXTRA,
        ("latency_ms",), "ack latency", replicated=True,
        note=lambda _s: "min.insync.replicas=2; the mock sits it out (no replication)"),
    Workload("W10", "3 brokers, RF=3: e2e at 10k records/s, acks=all",
             _e2e_workload("W10", 5.0, IDEMPOTENT, "all"), _E2E_P99, (_E2E_P50, *_E2E_RTTS),
             ("latency_ms",), "end-to-end", replicated=True,
             note=lambda _s: "idempotent, linger.ms=5, min.insync.replicas=2"),
    Workload("W11", "saturation: pipelined produce, 1 and 10 records per request", _w11,
             Metric("1-record requests/s", ("one", "requests_per_s"), "requests/s", True),
             (Metric("broker CPU µs per 1-record request", ("one", "broker_cpu_us_per_request"),
                     "µs", False),
              Metric("10-record requests/s", ("ten", "requests_per_s"), "requests/s", True),
              Metric("10-record records/s", ("ten", "records_per_s"), "records/s", True),
              Metric("broker CPU µs per 10-record request",
                     ("ten", "broker_cpu_us_per_request"), "µs", False),
              Metric("broker cores used (1-record)", ("one", "broker_cores"), "cores", False),
              Metric("the machine: 1-record requests/s (ADS: a broker per core)",
                     ("machine", "one", "requests_per_s"), "requests/s", True),
              Metric("the machine: 10-record requests/s (ADS: a broker per core)",
                     ("machine", "ten", "requests_per_s"), "requests/s", True),
              Metric("the machine: cores used (1-record)", ("machine", "one", "broker_cores"),
                     "cores", False)),
             note=lambda s: f"raw sockets, 4 connections × 8 requests in flight, acks=1, "
                            f"{W11_PARTITIONS} partitions, {s.w11_seconds:g} s per size"),
    Workload("W12", "partition scale: create, Metadata, memory, restarts", _w12,
             Metric("restart after clean shutdown s", ("largest", "restart_clean_s"), "s",
                    False),
             (Metric("restart after SIGKILL s", ("largest", "restart_after_kill_s"), "s", False),
              Metric("clean shutdown s", ("largest", "shutdown_s"), "s", False),
              Metric("resident MB", ("largest", "rss_mb"), "MB", False),
              Metric("open descriptors", ("largest", "open_files"), "files", False),
              Metric("Metadata ms", ("largest", "metadata_ms"), "ms", False),
              Metric("create s", ("largest", "create_s"), "s", False),
              Metric("one record to each s", ("largest", "produce_one_each_s"), "s", False)),
             note=lambda s: f"{max(s.w12_partitions):,} partitions (of "
                            f"{', '.join(f'{n:,}' for n in s.w12_partitions)}), topics of "
                            "1,000, one record each; restarts until every partition answers "
                            "ListOffsets; a fresh broker per count",
             sides=("ads", "kafka")),
)}


# ------------------------------------------------------------------------ the suite

def _value(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, (int, float)) else None


def _summarize(runs: dict[str, list[dict[str, Any]]], metric: Metric) -> dict[str, Any]:
    """Per side its median, min-max and resources; `ratios` ADS / each peer (and `ratio`
    ADS / the first peer)."""
    out: dict[str, Any] = {}
    for side in runs:
        ok = [r for r in runs[side] if "error" not in r]
        values = [v for v in (_value(r, metric.path) for r in ok) if v is not None]
        if not values:
            out[side] = None
            continue
        cpu = [r["broker"]["cpu_s"] for r in ok if r.get("broker")]
        rss = [r["broker"]["rss_max_mb"] for r in ok if r.get("broker")]
        client = [r["client_cpu_s"] for r in ok if r.get("client_cpu_s") is not None]
        out[side] = {"median": median(values), "min": min(values), "max": max(values),
                     "n": len(values), "cpu_s": median(cpu) if cpu else None,
                     "rss_max_mb": max(rss) if rss else None,
                     "client_cpu_s": median(client) if client else None}
    a = out.get("ads")
    out["ratios"] = {}
    for peer in (side for side in runs if side != "ads"):
        b = out.get(peer)
        out["ratios"][peer] = a["median"] / b["median"] if a and b and b["median"] else None
    out["ratio"] = next(iter(out["ratios"].values()), None)
    return out


def _median_run(runs: list[dict[str, Any]], metric: Metric) -> dict[str, Any] | None:
    scored = [(v, r) for r in runs if "error" not in r
              if (v := _value(r, metric.path)) is not None]
    if not scored:
        return None
    scored.sort(key=lambda vr: vr[0])
    return scored[len(scored) // 2][1]


@contextlib.contextmanager
def _brokers(opts: SuiteOptions, run_dir: Path,
             facts: dict[str, dict[str, Any]]) -> Iterator[dict[str, _Target]]:
    """Starts ADS and the peers one after the other (so none starts beside another's
    start-up work), yields them as targets, and fills `facts` per side: start-up time, and
    CPU time and peak memory over the run, read just before each is stopped."""
    ads = AdsBrokerProcess(run_dir / "ads-data", run_dir / "ads-broker.log", opts.ads_sets)
    mock = MockBroker() if "mock" in opts.peers else None
    kafka = (KafkaPeer(opts.kafka_jars, run_dir / "kafka", BENCH_SETTINGS)
             if "kafka" in opts.peers and opts.kafka_jars is not None else None)
    targets: dict[str, _Target] = {}
    try:
        ads.start()
        targets["ads"] = _Target("ads", ads.bootstrap, (ads.pid,), ads.create_topic,
                                 ads.delete_topic)
        facts["ads"] = {"start_to_answer_s": ads.start_to_answer_s}
        if mock is not None:
            mock.start()
            # The mock keeps 5 MiB per partition in memory: nothing to free.
            targets["mock"] = _Target("mock", mock.bootstrap, (mock.pid,), mock.create_topic,
                                      lambda _name: None)
            facts["mock"] = {"start_to_answer_s": mock.start_to_answer_s}
        if kafka is not None:
            _say(opts, "starting Kafka")
            kafka.start()
            targets["kafka"] = _Target("kafka", kafka.bootstrap, (kafka.pid,),
                                       kafka.create_topic, kafka.delete_topic)
            facts["kafka"] = {"start_to_answer_s": kafka.start_to_answer_s,
                              "format_s": kafka.format_s}
        _say(opts, "started: " + ", ".join(
            f"{side} answered after {f['start_to_answer_s']:.2f} s" for side, f in facts.items()))
        yield {side: targets[side] for side in opts.sides}
    finally:
        for side, target in targets.items():
            facts[side].update(lifetime_usage(*target.pids))
        if kafka is not None:
            kafka.stop()
        if mock is not None:
            mock.stop()
        ads.stop()
        if not opts.keep_data:
            shutil.rmtree(run_dir / "ads-data", ignore_errors=True)
            shutil.rmtree(run_dir / "kafka" / "data", ignore_errors=True)


CLUSTER_SIZE = 3


def cluster_sides(opts: SuiteOptions) -> tuple[str, ...]:
    """The sides of the replicated workloads: ADS, and Kafka if it is a peer."""
    return tuple(side for side in opts.sides if side in ("ads", "kafka"))


@contextlib.contextmanager
def _clusters(opts: SuiteOptions, run_dir: Path,
              facts: dict[str, dict[str, Any]]) -> Iterator[dict[str, _Target]]:
    """As `_brokers`, for the three-broker clusters: ADS on ZooKeeper, Kafka in KRaft mode.
    Their facts are kept under "ads-3" and "kafka-3"."""
    ads = AdsCluster(run_dir / "ads-cluster", CLUSTER_SIZE, opts.ads_sets)
    kafka = (KafkaCluster(opts.kafka_jars, run_dir / "kafka-cluster", CLUSTER_SIZE,
                          BENCH_SETTINGS, REPLICATED_TOPIC)
             if "kafka" in opts.peers and opts.kafka_jars is not None else None)
    targets: dict[str, _Target] = {}
    try:
        _say(opts, "starting the ADS cluster")
        ads.start()
        targets["ads"] = _Target("ads", ads.bootstrap, ads.pids, ads.create_topic,
                                 ads.delete_topic)
        facts["ads-3"] = {"start_to_answer_s": ads.start_to_answer_s}
        if kafka is not None:
            _say(opts, "starting the Kafka cluster")
            kafka.start()
            targets["kafka"] = _Target("kafka", kafka.bootstrap, kafka.pids, kafka.create_topic,
                                       kafka.delete_topic)
            facts["kafka-3"] = {"start_to_answer_s": kafka.start_to_answer_s,
                                "format_s": kafka.format_s}
        yield targets
    finally:
        for side, target in targets.items():
            facts[f"{side}-3"].update(lifetime_usage(*target.pids))
        if kafka is not None:
            kafka.stop()
        ads.stop()
        if not opts.keep_data:
            shutil.rmtree(run_dir / "ads-cluster", ignore_errors=True)
            for n in range(1, CLUSTER_SIZE + 1):
                shutil.rmtree(run_dir / "kafka-cluster" / f"node-{n}" / "data",
                              ignore_errors=True)


def _say(opts: SuiteOptions, text: str) -> None:
    if opts.progress:
        print(text, file=sys.stderr, flush=True)


def run_suite(opts: SuiteOptions) -> tuple[dict[str, Any], Path]:
    """Runs the suite; returns the results and the directory holding them."""
    unknown = [w for w in opts.workloads if w not in WORKLOADS]
    if unknown:
        raise BenchError(f"unknown workloads {', '.join(unknown)} (W1..W12)")
    if not opts.peers or any(p not in PEERS for p in opts.peers):
        raise BenchError(f"peers must be some of {', '.join(PEERS)}, not {opts.peers}")
    if "kafka" in opts.peers and opts.kafka_jars is None:
        raise BenchError("the peer kafka needs the directory of Kafka's jars (kafka_jars)")
    started = time.strftime("%Y-%m-%dT%H-%M-%S")
    run_dir = opts.output_dir / started
    run_dir.mkdir(parents=True, exist_ok=True)
    ctx = _Context(opts, run_dir)
    results: dict[str, Any] = {"started": started, "machine": machine(),
                               "command": opts.command, "reps": opts.reps,
                               "sides": list(opts.sides), "brokers": {},
                               "quick": opts.quick, "profile": opts.profile,
                               "sizes": {k: getattr(opts.sizes, k)
                                         for k in Sizes.__dataclass_fields__},
                               "workloads": []}
    if "W5" in opts.workloads:
        samples = [measure_loopback(opts.sizes.loopback_bytes) for _ in range(3)]
        ctx.loopback_mb_per_s = median(samples)
        results["loopback_mb_per_s"] = round(ctx.loopback_mb_per_s, 1)
        _say(opts, f"loopback: {ctx.loopback_mb_per_s:,.0f} MB/s")
    single = [WORKLOADS[w] for w in opts.workloads if not WORKLOADS[w].replicated]
    replicated = [WORKLOADS[w] for w in opts.workloads if WORKLOADS[w].replicated]
    if single:
        with _brokers(opts, run_dir, results["brokers"]) as targets:
            _run_workloads(ctx, single, targets, results)
    if replicated:
        with _clusters(opts, run_dir, results["brokers"]) as targets:
            _run_workloads(ctx, replicated, targets, results)
    # The replicated workloads ran last; the report keeps the order asked for.
    results["workloads"].sort(key=lambda w: opts.workloads.index(w["id"]))
    w1, w9 = (_ads_median(results, wid) for wid in ("W1", "W9"))
    if w1 and w9:
        results["w9_over_w1"] = round(w9 / w1, 3)
    results["finished"] = time.strftime("%Y-%m-%dT%H-%M-%S")
    loads = [r["load_average"] for w in results["workloads"] for side_runs in w["runs"].values()
             for r in side_runs if "load_average" in r]
    if loads:
        results["load_average"] = {"min": min(loads), "max": max(loads)}
    _write_outputs(ctx, results)
    return results, run_dir


def _run_workloads(ctx: _Context, workloads: list[Workload], targets: dict[str, _Target],
                   results: dict[str, Any]) -> None:
    """Warms every target up, then runs each workload alternating the targets."""
    opts = ctx.opts
    for target in targets.values():
        _warm_up(ctx, target)
    for wl in workloads:
        sides = {side: t for side, t in targets.items() if not wl.sides or side in wl.sides}
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        for rep in range(opts.reps):
            for side, target in sides.items():
                try:
                    result = wl.run(ctx, target, rep)
                except Exception as exc:  # noqa: BLE001 - one failed run is reported
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                runs[side].append(result)
                value = _value(result, wl.metric.path)
                _say(opts, f"{wl.id} rep {rep + 1} {side}: "
                           f"{result.get('error') or f'{value:,.2f} {wl.metric.unit}'}")
        results["workloads"].append(_workload_result(wl, runs, opts.sizes))


def _ads_median(results: dict[str, Any], wid: str) -> float | None:
    for wl in results["workloads"]:
        if wl["id"] == wid:
            ads = wl["summary"].get("ads")
            return ads["median"] if ads else None
    return None


def _warm_up(ctx: _Context, target: _Target) -> None:
    """Produces W1's kind of records and reads the last of them back, measuring nothing."""
    n = ctx.opts.sizes.warmup_records
    if n <= 0:
        return
    _say(ctx.opts, f"warming up {target.side}: {n:,} records produced and read")
    target.create_topic("warmup", 1)
    _check_complete(run_produce(_produce_opts(target, "warmup", n)), f"{target.side} warm-up")
    last = min(n, ctx.opts.sizes.w4_last)  # what the mock keeps, as in W4
    run_consume(ConsumeOptions(bootstrap=target.bootstrap, topic="warmup", num_records=last,
                               last=last))
    target.delete_topic("warmup")


def _workload_result(wl: Workload, runs: dict[str, list[dict[str, Any]]],
                     sizes: Sizes) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": wl.id, "title": wl.title, "metric_label": wl.metric.label,
        "unit": wl.metric.unit, "higher_is_better": wl.metric.higher_is_better,
        "note": wl.note(sizes), "summary": _summarize(runs, wl.metric),
        "extra_metrics": [{"label": m.label, "unit": m.unit,
                           "higher_is_better": m.higher_is_better,
                           "summary": _summarize(runs, m)} for m in wl.extras],
        "runs": runs,
    }
    if wl.latency_path is not None:
        entry["latency_label"] = wl.latency_label
        entry["latency"] = {}
        for side in runs:
            run = _median_run(runs[side], wl.metric)
            lat = run
            for key in wl.latency_path:
                lat = lat.get(key) if isinstance(lat, dict) else None
            entry["latency"][side] = lat
    return entry


def _write_outputs(ctx: _Context, results: dict[str, Any]) -> None:
    run_dir = ctx.run_dir
    if ctx.profiles:
        results["profiles"] = _write_profiles(ctx)
    (run_dir / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    block = report.results_markdown(results)
    (run_dir / "results.md").write_text(block)
    try:
        results["plots"] = [p.name for p in report.plot_results(results, run_dir)]
    except ImportError:
        _say(ctx.opts, "matplotlib is not installed: no plots (pip install 'ads[bench]')")
    update_docs(ctx.opts, block)
    (run_dir / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def update_docs(opts: SuiteOptions, block: str) -> None:
    """Writes the results block into `opts.docs`, saying what happened either way."""
    docs = opts.docs
    if docs is None:
        return
    if not docs.exists():
        _say(opts, f"{docs} does not exist: not updated")
    elif report.update_docs(docs, block):
        _say(opts, f"updated {docs}")
    else:
        _say(opts, f"{docs} has no {report.DOCS_BEGIN} block: not updated")


def _write_profiles(ctx: _Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lines = ["# Top frames of the ADS broker per workload (py-spy, self time)", ""]
    for wid, files in ctx.profiles.items():
        stacks: Counter[tuple[str, ...]] = Counter()
        for path in files:
            if path.exists():
                with path.open() as f:
                    stacks.update(report.read_collapsed(f))
        svg = ctx.run_dir / "profiles" / f"{wid}.svg"
        svg.write_text(report.flame_graph_svg(stacks, f"ADS broker, {wid}"))
        top = report.top_frames(stacks)
        out[wid] = {"flame_graph": str(svg.relative_to(ctx.run_dir)),
                    "samples": sum(stacks.values()),
                    "top": [{"frame": t.frame, "self_pct": round(t.self_pct, 1),
                             "total_pct": round(t.total_pct, 1)} for t in top]}
        lines += [f"## {wid} ({sum(stacks.values())} samples)", "",
                  "| self % | total % | frame |", "|---|---|---|"]
        lines += [f"| {t.self_pct:.1f} | {t.total_pct:.1f} | `{t.frame}` |" for t in top]
        lines.append("")
    (ctx.run_dir / "profiles" / "top-frames.md").write_text("\n".join(lines))
    return out


def quick_options(opts: SuiteOptions) -> SuiteOptions:
    return replace(opts, sizes=QUICK, quick=True, reps=1)
