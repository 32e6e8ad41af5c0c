"""One `ads broker` with many partitions under a small open-file limit: what each step costs.

    python tools/many_partitions.py [--topics 100] [--partitions 1000] [--nofile 4096]

Sets this process's open-file limit (soft and hard) to `--nofile`, which the broker it
starts inherits, then: creates `--topics` topics of `--partitions` partitions (CreateTopics
of ten topics at a time, confluent-kafka's AdminClient), produces one record to every
partition (one confluent-kafka producer), reads every record back (one consumer assigned
everything), stops the broker with SIGTERM and starts it again (a clean shutdown: no
recovery) until a Metadata request lists every partition with a leader, and reads
everything back once more. Prints the time of each step, the broker's resident memory
(now and peak), its open descriptors and `/metrics`' open segment files and evictions.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from ads.bench.processes import AdsBrokerProcess, free_port
from ads.bench.stats import peak_rss_mb


def _rss_mb(pid: int) -> float:
    with Path(f"/proc/{pid}/status").open() as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def _metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:  # noqa: S310 - loopback
        body = answer.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(body) for s in f.samples
            if s.name.startswith("ads_log_")}


def _create(bootstrap: str, topics: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(topics), 10):
        futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics[i:i + 10]],
                                      operation_timeout=600)
        for future in futures.values():
            future.result(660)


def _produce(bootstrap: str, topics: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000})
    for t in topics:
        for p in range(partitions):
            producer.produce(t, value=b"%d" % p, partition=p)
        producer.poll(0)
    if producer.flush(600):
        raise SystemExit("records left undelivered")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--nofile", type=int, default=4096)
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
    topics = [f"many-{n:03d}" for n in range(args.topics)]
    total = args.topics * args.partitions
    http = free_port()
    with tempfile.TemporaryDirectory(prefix="many-partitions-") as tmp:
        broker = AdsBrokerProcess(Path(tmp) / "data", Path(tmp) / "broker.log",
                                  (f"http.listener=127.0.0.1:{http}",))
        broker.start()
        url = f"http://127.0.0.1:{http}"
        try:
            steps: list[tuple[str, float]] = []
            for name, step in (("create", lambda: _create(broker.bootstrap, topics,
                                                          args.partitions)),
                               ("produce one record to each", lambda: _produce(
                                   broker.bootstrap, topics, args.partitions)),
                               ("read every record", lambda: _consume(
                                   broker.bootstrap, topics, args.partitions))):
                began = time.monotonic()
                step()
                steps.append((name, time.monotonic() - began))
            pid = broker.pid
            rss, peak = _rss_mb(pid), peak_rss_mb(pid)
            fds = sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
            m = _metrics(url)
            broker.stop()
            began = time.monotonic()
            broker.start(timeout_s=900)
            while not _all_led(broker.bootstrap, total):
                time.sleep(0.5)
            steps.append(("restart after SIGTERM until every partition is led",
                          time.monotonic() - began))
            began = time.monotonic()
            again = _consume(broker.bootstrap, topics, args.partitions)
            steps.append((f"read every record after the restart ({again})",
                          time.monotonic() - began))
        finally:
            broker.stop()
    print(f"{total:,} partitions ({args.topics} topics of {args.partitions}), "
          f"ulimit -n {args.nofile}")
    for name, seconds in steps:
        print(f"  {name}: {seconds:.1f} s")
    print(f"  broker resident memory {rss:.0f} MB (peak {peak or 0:.0f} MB), "
          f"{fds} descriptors open")
    print(f"  open segment files {m['ads_log_open_files']:.0f} of "
          f"{m['ads_log_open_files_limit']:.0f}, opened {m['ads_log_file_opens_total']:.0f} "
          f"times, {m['ads_log_file_evictions_total']:.0f} evictions")


if __name__ == "__main__":
    main()
