"""Controller work per partition: creation and failover of many replicated partitions.

    PYTHONPATH=src ADS_PURE_PYTHON=1 python tools/cluster_failover.py --partitions 10000 \
        [--per-topic 1000] [--session-timeout-ms 6000] [--kill leader|controller] \
        [--work-dir DIR] [--profile]

Starts a ZooKeeper server (Debian's `zookeeper`) and three `ads broker` processes on it
(`ads.bench.processes.AdsCluster`, the open-file limit raised to its hard limit), creates
`--partitions` partitions in topics of `--per-topic`, three replicas each with
`min.insync.replicas=2`, and produces one record to every partition with acks=all (one
confluent-kafka producer per topic). Then it SIGKILLs one broker: with `--kill leader` the
broker other than the controller that leads the most partitions, with `--kill controller`
the controller. It times:

- creation: from the first CreateTopics until a Metadata request lists a leader for every
  partition;
- failover: from the SIGKILL until a Metadata request to a surviving broker lists, for every
  partition, a leader that is a live broker; also from the moment ZooKeeper expired the dead
  broker's session (its `/brokers/ids/<id>` gone, polled every 50 ms) until then; the
  expiry itself comes `zookeeper.session.timeout.ms` (plus up to one ZooKeeper tick) after
  the kill;
- then reads every partition from offset 0 (one consumer assigned everything) and checks
  that each acknowledged record is there.

With `--profile`, py-spy (`PY_SPY`, default /tmp/pyspy/bin/py-spy, or on PATH) records
the controller that does the failover and one surviving broker, from the kill until every
partition is led, as collapsed stacks in the work directory.

Prints one JSON object with the figures. Every loop is bounded by `--deadline-s`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from ads.bench.processes import AdsCluster


def _admin(bootstrap: str) -> AdminClient:
    # A long socket time-out: CreateTopics answers once every broker sees the topic.
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})


def _leaders(admin: AdminClient, topics: list[str]) -> dict[tuple[str, int], int]:
    md = admin.list_topics(timeout=60)
    return {(t, p.id): p.leader for t in topics if t in md.topics
            for p in md.topics[t].partitions.values()}


def _create(cluster: AdsCluster, topics: list[str], per_topic: int, deadline: float) -> None:
    admin = _admin(cluster.bootstrap)
    for t in topics:  # one request each: a request for all of them outlived its timeout
        futures = admin.create_topics([NewTopic(t, per_topic, 3,
                                                config={"min.insync.replicas": "2"})],
                                      operation_timeout=300, request_timeout=300)
        futures[t].result(timeout=max(deadline - time.monotonic(), 1))
    wanted = len(topics) * per_topic
    while time.monotonic() < deadline:
        if sum(leader >= 0 for leader in _leaders(admin, topics).values()) == wanted:
            return
        time.sleep(0.2)
    raise SystemExit("not every partition had a leader in time")


def _produce(bootstrap: str, topics: list[str], per_topic: int) -> set[tuple[str, int, int]]:
    """One record to each partition with acks=all: the (topic, partition, offset) of each
    acknowledged one."""
    acked: set[tuple[str, int, int]] = set()
    failed: Counter[str] = Counter()

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            acked.add((msg.topic(), msg.partition(), msg.offset()))
        else:
            failed[err.name()] += 1

    # A producer per topic, all at once: one by one, each waited about ten seconds for
    # its first metadata and connections on a busy cluster.
    producers = [Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all"})
                 for _ in topics]
    for t, producer in zip(topics, producers, strict=True):
        for p in range(per_topic):
            producer.produce(t, value=b"%s/%d" % (t.encode(), p), partition=p,
                             on_delivery=delivered)
    for producer in producers:
        producer.flush(300)
    if failed:
        print(f"records not acknowledged: {dict(failed)}", file=sys.stderr)
    return acked


def _read_back(bootstrap: str, acked: set[tuple[str, int, int]], deadline: float
               ) -> set[tuple[str, int, int]]:
    """The acknowledged records a consumer could not read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(t, p, 0) for t, p, _ in acked])
    missing = set(acked)
    try:
        while missing and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None:
                    missing.discard((msg.topic(), msg.partition(), msg.offset()))
    finally:
        consumer.close()
    return missing


def _controller(connect: str) -> int:
    zk = KazooClient(hosts=connect)
    zk.start(timeout=30)
    try:
        return int(json.loads(zk.get("/controller")[0])["brokerid"])
    finally:
        zk.stop()
        zk.close()


def _profile(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    py_spy = os.environ.get("PY_SPY", "/tmp/pyspy/bin/py-spy")  # noqa: S108 - a tool's path
    if not Path(py_spy).exists():
        py_spy = shutil.which("py-spy") or ""
    if not py_spy:
        return None
    return subprocess.Popen([py_spy, "record", "-p", str(pid), "-f", "raw", "-r", "50",  # noqa: S603
                             "-o", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _failover(cluster: AdsCluster, topics: list[str], victim: int, args: argparse.Namespace,
              deadline: float) -> dict[str, Any]:
    survivors = [b for b in cluster.brokers if b.node_id != victim]
    admin = _admin(",".join(b.bootstrap for b in survivors))
    profilers = []
    if args.profile:
        controller = _controller(cluster.zookeeper.connect)
        watched = {controller if controller != victim else survivors[0].node_id,
                   survivors[-1].node_id}
        profilers = [p for b in survivors if b.node_id in watched
                     if (p := _profile(b.pid, args.work_dir / f"failover-{b.node_id}.txt"))]
        time.sleep(1.0)  # py-spy attached before the kill
    zk = KazooClient(hosts=cluster.zookeeper.connect)
    zk.start(timeout=30)
    try:
        killed = time.monotonic()
        next(b for b in cluster.brokers if b.node_id == victim).kill()
        expired = None
        while expired is None and time.monotonic() < deadline:
            if zk.exists(f"/brokers/ids/{victim}") is None:
                expired = time.monotonic()
            time.sleep(0.05)
    finally:
        zk.stop()
        zk.close()
    live = {b.node_id for b in survivors}
    all_led = None
    while all_led is None and time.monotonic() < deadline:
        try:
            leaders = _leaders(admin, topics)
        except Exception:  # noqa: BLE001, S112 - a broker busy past the request's timeout
            continue
        if len(leaders) == len(topics) * args.per_topic and set(leaders.values()) <= live:
            all_led = time.monotonic()
        else:
            time.sleep(0.1)
    for p in profilers:
        p.send_signal(signal.SIGINT)
        p.wait(60)
    return {"kill_to_session_expiry_s": _seconds(killed, expired),
            "kill_to_all_led_s": _seconds(killed, all_led),
            "session_expiry_to_all_led_s": _seconds(expired, all_led)}


def _seconds(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round(end - start, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--kill", choices=("leader", "controller"), default="leader")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--deadline-s", type=float, default=1800.0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by the brokers
    args.work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="ads-failover-"))
    topics = [f"failover-{i}" for i in range(args.partitions // args.per_topic)]
    deadline = time.monotonic() + args.deadline_s
    cluster = AdsCluster(args.work_dir, 3, (
        f"zookeeper.session.timeout.ms={args.session_timeout_ms}",
        "auto.leader.rebalance.enable=false")).start()
    result: dict[str, Any] = {"partitions": len(topics) * args.per_topic,
                              "per_topic": args.per_topic,
                              "session_timeout_ms": args.session_timeout_ms,
                              "kill": args.kill, "work_dir": str(args.work_dir)}
    try:
        began = time.monotonic()
        _create(cluster, topics, args.per_topic, deadline)
        result["create_until_all_led_s"] = _seconds(began, time.monotonic())
        began = time.monotonic()
        acked = _produce(cluster.bootstrap, topics, args.per_topic)
        result["produce_s"] = _seconds(began, time.monotonic())
        result["acknowledged"] = len(acked)
        controller = _controller(cluster.zookeeper.connect)
        led = Counter(_leaders(_admin(cluster.bootstrap), topics).values())
        if args.kill == "controller":
            victim = controller
        else:
            victim = max((n for n in led if n != controller), key=lambda n: led[n])
        result.update(controller=controller, victim=victim, victim_led=led[victim])
        result.update(_failover(cluster, topics, victim, args, deadline))
        began = time.monotonic()
        survivors = ",".join(b.bootstrap for b in cluster.brokers if b.node_id != victim)
        missing = _read_back(survivors, acked, deadline)
        result["read_back_s"] = _seconds(began, time.monotonic())
        result["acknowledged_missing"] = len(missing)
    finally:
        cluster.stop()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
