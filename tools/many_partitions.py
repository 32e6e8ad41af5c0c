"""One broker with many partitions: what each step costs, ADS and (optionally) Apache Kafka.

    python tools/many_partitions.py [--topics 100] [--partitions 1000] [--nofile 4096]
        [--kafka-jars tests/kafka_reference/target/jars] [--kafka-nofile 1048576]

For each broker (one `ads broker` with embedded metadata; Kafka in KRaft mode, combined
roles, when `--kafka-jars` is given), with the open-file limit (soft and hard) set to
`--nofile` (Kafka: `--kafka-nofile`, default the hard limit, since it keeps a descriptor
per segment): creates
`--topics` topics of `--partitions` partitions one topic at a time (confluent-kafka's
AdminClient; for Kafka, until every partition answers ListOffsets), produces one record to
every partition (one confluent-kafka producer), reads every record back (one consumer
assigned everything), measures the idle broker's CPU (`--idle-s`, 30 s), its resident memory and
open descriptors, then restarts it twice, after SIGTERM (a clean shutdown) and after
SIGKILL, each time until a Metadata request lists every partition with a leader and every
record is read back again (the stop, from the signal until the process exits, and the
start are also given apart). Kafka with more than about 30,000 partitions needs
`vm.max_map_count` above its default of 65,530 (two mappings per partition).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from ads.bench.kafka import KafkaPeer
from ads.bench.processes import AdsBrokerProcess, await_metadata, free_port
from ads.bench.stats import cpu_seconds, peak_rss_mb, rss_mb


class Broker(Protocol):
    @property
    def bootstrap(self) -> str: ...
    @property
    def pid(self) -> int: ...
    def create_topic(self, name: str, partitions: int) -> None: ...


def _ads_metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:  # noqa: S310 - loopback
        body = answer.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(body) for s in f.samples
            if s.name.startswith("ads_log_")}


def _produce(bootstrap: str, topics: list[str], partitions: int) -> None:
    """One record to each partition, a producer per topic: one librdkafka producer for
    100,000 partitions delivered about 65 records a second here with the broker nearly idle
    (0.06 of a core), and what was left after its 5-minute message timeout failed."""
    failed: Counter[str] = Counter()

    def delivered(err: KafkaError | None, _msg: object) -> None:
        # A record that fails leaves the queue as a delivered one does: flush cannot tell.
        if err is not None:
            failed[err.name()] += 1

    for t in topics:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
        for p in range(partitions):
            producer.produce(t, value=b"%d" % p, partition=p, on_delivery=delivered)
        if producer.flush(300):
            raise SystemExit(f"records of {t} left undelivered")
    if failed:
        raise SystemExit(f"records not delivered: {dict(failed)}")


def _consume(bootstrap: str, topics: list[str], partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "many-partitions",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])
    wanted, got = len(topics) * partitions, 0
    deadline = time.monotonic() + 900
    try:
        while got < wanted and time.monotonic() < deadline:
            got += sum(m.error() is None for m in consumer.consume(10_000, 1.0))
    finally:
        consumer.close()
    return got


def _all_led(bootstrap: str, expected: int) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        md = admin.list_topics(timeout=60)
    except Exception:  # noqa: BLE001 - not serving yet
        return False
    led = sum(1 for t in md.topics.values() if not (t.topic or "").startswith("__")
              for p in t.partitions.values() if p.leader >= 0)
    return led >= expected


def _timed(steps: list[tuple[str, float]], name: str, step: Callable[[], object]) -> object:
    began = time.monotonic()
    result = step()
    steps.append((name, time.monotonic() - began))
    return result


def _idle_cpu_percent(pid: int, seconds: float) -> float:
    before = cpu_seconds(pid) or 0.0
    time.sleep(seconds)
    return 100.0 * ((cpu_seconds(pid) or 0.0) - before) / seconds


def _measure(name: str, broker: Broker, restart: Callable[[signal.Signals], float],
             topics: list[str], partitions: int, idle_s: float,
             extra: Callable[[], str] = str) -> list[str]:
    total = len(topics) * partitions
    steps: list[tuple[str, float]] = []
    def create() -> None:
        for t in topics:
            broker.create_topic(t, partitions)

    _timed(steps, "create", create)
    _timed(steps, "produce one record to each", lambda: _produce(broker.bootstrap, topics,
                                                                 partitions))
    got = _timed(steps, "read every record", lambda: _consume(broker.bootstrap, topics,
                                                              partitions))
    pid = broker.pid
    idle = _idle_cpu_percent(pid, idle_s)
    rss, peak = rss_mb(pid) or 0.0, peak_rss_mb(pid) or 0.0
    fds = sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
    facts = extra()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        began = time.monotonic()
        stopped = restart(sig)
        deadline = time.monotonic() + 1800
        while not _all_led(broker.bootstrap, total) and time.monotonic() < deadline:
            time.sleep(0.5)
        took = time.monotonic() - began
        steps.append((f"restart after {sig.name} until every partition is led", took))
        steps.append((f"  the stop (from {sig.name} until the process exits)", stopped))
        steps.append(("  the start (from launch until every partition is led)", took - stopped))
        again = _timed(steps, f"read every record after the {sig.name} restart",
                       lambda: _consume(broker.bootstrap, topics, partitions))
        if again != total:
            steps.append((f"  only {again} of {total} records read back", 0.0))
    lines = [f"{name}: {total:,} partitions ({len(topics)} topics of {partitions}), "
             f"ulimit -n {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}, {got} records read"]
    lines += [f"  {step}: {seconds:.1f} s" for step, seconds in steps]
    lines.append(f"  resident memory {rss:.0f} MB (peak {peak:.0f} MB), {fds} descriptors "
                 f"open, idle CPU {idle:.1f}% of a core over {idle_s:.0f} s")
    if facts:
        lines.append(f"  {facts}")
    return lines


def _run_ads(tmp: Path, topics: list[str], partitions: int, idle_s: float) -> list[str]:
    http = free_port()
    broker = AdsBrokerProcess(tmp / "ads-data", tmp / "ads.log",
                              (f"http.listener=127.0.0.1:{http}",))
    url = f"http://127.0.0.1:{http}"

    def restart(sig: signal.Signals) -> float:
        began = time.monotonic()
        if sig == signal.SIGKILL:
            os.kill(broker.pid, signal.SIGKILL)
        broker.stop()
        stopped = time.monotonic() - began
        broker.start(timeout_s=1800)
        return stopped

    def files() -> str:
        m = _ads_metrics(url)
        return (f"open segment files {m['ads_log_open_files']:.0f} of "
                f"{m['ads_log_open_files_limit']:.0f}, opened "
                f"{m['ads_log_file_opens_total']:.0f} times, "
                f"{m['ads_log_file_evictions_total']:.0f} evictions")

    broker.start()
    try:
        return _measure("ADS", broker, restart, topics, partitions, idle_s, files)
    finally:
        broker.stop()


def _run_kafka(tmp: Path, jars: Path, topics: list[str], partitions: int,
               idle_s: float) -> list[str]:
    kafka = KafkaPeer(jars, tmp / "kafka", {"num.partitions": "1"})

    def restart(sig: signal.Signals) -> float:
        assert kafka.proc is not None
        began = time.monotonic()
        if sig == signal.SIGKILL:
            kafka.proc.kill()
            kafka.proc.wait(30)
        kafka.stop(600)
        stopped = time.monotonic() - began
        kafka.launch()
        await_metadata(kafka.bootstrap, kafka.proc, time.monotonic() + 1800, "Kafka",
                       kafka.log_tail)
        return stopped

    kafka.start()
    try:
        return _measure("Kafka", kafka, restart, topics, partitions, idle_s)
    finally:
        kafka.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--nofile", type=int, default=4096)
    parser.add_argument("--kafka-jars", type=Path, default=None)
    parser.add_argument("--kafka-nofile", type=int,  # the most this process may set
                        default=resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    parser.add_argument("--idle-s", type=float, default=30.0,
                        help="how long the idle broker's CPU is measured")
    args = parser.parse_args()
    topics = [f"many-{n:03d}" for n in range(args.topics)]
    report: list[str] = []
    with tempfile.TemporaryDirectory(prefix="many-partitions-") as tmp:
        if args.kafka_jars is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (args.kafka_nofile, args.kafka_nofile))
            report += _run_kafka(Path(tmp), args.kafka_jars, topics, args.partitions,
                                 args.idle_s)
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
        report += _run_ads(Path(tmp), topics, args.partitions, args.idle_s)
    print("\n".join(report))


if __name__ == "__main__":
    main()
