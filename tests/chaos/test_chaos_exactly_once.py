"""Exactly-once under failover, in the manner of Jepsen's Kafka analyses (docs/chaos.md).

Three `ads broker` processes on a real ZooKeeper (each in its own network namespace when
the test runs as root), every topic replicated 3 with min.insync.replicas 2, the internal
`__transaction_state` and `__consumer_offsets` too. While idempotent producers, two
transactional producers (each transaction over two topics, some aborted on purpose), a
consume-transform-produce copier and a read_committed consumer group run, faults are
injected one at a time (chaos_faults.py): leaders, the controller and a transaction
coordinator killed with SIGKILL and restarted, a group coordinator paused past its
ZooKeeper session, a leader cut off the network, ZooKeeper killed and restarted. Then the
checks (chaos_checks.py): no acknowledged idempotent write lost or duplicated, every
committed transaction whole in both topics, unconfirmed ones all or nothing, nothing of an
aborted transaction read by read_committed during the run or at the end, the copier's
output exactly its committed input, group offsets never going back, every transaction
closed, replicas identical. The report (checks, clients, fault timeline) is written to
chaos-report.txt and shown when a check fails.

ADS_CHAOS_DURATION_S sets how long faults are injected (120 s in the suite; `make chaos
DURATION=3600` for a soak), ADS_CHAOS_SEED the choice of targets, ADS_CHAOS_REPORT_DIR
where the report goes (the test's temporary directory otherwise).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_checks import (
    Check,
    check_aborted_at_end,
    check_aborted_during_run,
    check_committed,
    check_copier,
    check_group_offsets,
    check_idempotent,
    check_unknown,
    judge_transactions,
    open_transactions,
    read_to_end,
    report,
    write_report,
)
from chaos_clients import (
    Copier,
    GroupReader,
    IdempotentWriter,
    OffsetSampler,
    Timeline,
    TxnWriter,
    Worker,
)
from chaos_faults import OFFSETS, RECOVERY_TIMEOUT_S, TXN_STATE, ClusterView, Nemesis, until
from confluent_kafka import Consumer, TopicPartition

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster
from netns_support import NetnsCluster, netns_available
from replication_support import create, identical_logs

DURATION_S = float(os.environ.get("ADS_CHAOS_DURATION_S") or 120)
SEED = int(os.environ.get("ADS_CHAOS_SEED") or time.time_ns() % 1_000_000)

# Setting up and checking take a few minutes on a busy machine; the faults take DURATION_S.
pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(int(DURATION_S) + 900)]

PARTITIONS = 3
IDEM, TA, TB, COPY = "chaos-idem", "chaos-txn-a", "chaos-txn-b", "chaos-copy"
DATA_TOPICS = [IDEM, TA, TB, COPY]
TXN_IDS = ["chaos-txn-1", "chaos-txn-2"]
COPIER_ID = "chaos-copier"  # its transactional id and group
READERS = "chaos-readers"
SETTINGS = (
    # __consumer_offsets takes the broker default, the data topics set theirs too.
    "min.insync.replicas=2", "offsets.topic.replication.factor=3",
    "transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
    "transaction.state.log.num.partitions=3",
    "replica.lag.time.max.ms=5000", "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=200",
)
JOIN_S = 300.0  # a client's last transaction may wait out a few time-outs
DRAIN_S = 300.0


def _netns_works() -> bool:
    """Whether this process may make network namespaces (root with `ip`, and a kernel or
    container that allows it)."""
    if not netns_available():
        return False
    probe = f"adsprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, timeout=10)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return made.returncode == 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = (NetnsCluster if _netns_works() else Cluster)(tmp_path, 3, *SETTINGS)
    try:
        yield c.start()
    finally:
        for broker in c.brokers.values():  # a paused broker cannot be killed cleanly
            if broker.proc is not None and broker.proc.poll() is None:
                os.kill(broker.proc.pid, signal.SIGCONT)
        c.stop()


def _high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=60)[1]
                for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _no_open_transactions(bootstrap: str, topics: list[str], timeout_s: float) -> list[str]:
    """Waits for every partition's last stable offset to reach its high watermark; what
    is still open at the deadline."""
    left: list[str] = ["not asked yet"]

    def closed() -> bool:
        left[:] = open_transactions(bootstrap, dict.fromkeys(topics, PARTITIONS))
        return not left

    until(closed, timeout_s, 1.0)
    return left


class Scenario:
    """The clients and the faults of one run, and what the checks need of them."""

    def __init__(self, c: Cluster, timeline: Timeline) -> None:
        self.c, self.timeline = c, timeline
        b = c.bootstrap
        self.idem = [IdempotentWriter(f"idem-{i}", b, timeline, IDEM, PARTITIONS)
                     for i in (1, 2)]
        self.txn = [TxnWriter(f"txn-{i}", b, timeline, tid, (TA, TB), PARTITIONS, 0.3,
                              SEED + i) for i, tid in enumerate(TXN_IDS, 1)]
        self.copier = Copier("copier", b, timeline, COPIER_ID, COPIER_ID, TA, COPY, PARTITIONS)
        self.eof: dict[tuple[str, int], int] = {}
        self.readers = [GroupReader(f"reader-{i}", b, timeline, READERS, [TA, TB], self.eof)
                        for i in (1, 2)]
        self.sampler = OffsetSampler("offsets", b, timeline,
                                     {READERS: [TA, TB], COPIER_ID: [TA]}, PARTITIONS)
        self.drained = {"copier": False, "readers": False}

    @property
    def workers(self) -> list[Worker]:
        return [*self.idem, *self.txn, self.copier, *self.readers, self.sampler]

    def start(self) -> None:
        for w in self.workers:
            w.start()
        self.timeline.add("test", "clients started")

    def stop_writers(self) -> None:
        writers: list[Worker] = [*self.idem, *self.txn]
        for w in writers:
            w.stopping.set()
        for w in writers:
            w.join(JOIN_S)
        self.timeline.add("test", "writers stopped")

    def drain(self) -> None:
        """The copier copies, and the group reads, up to the ends the writers left."""
        self.copier.ends = _high_watermarks(self.c.bootstrap, TA)
        self.timeline.add("test", f"copier to copy up to {self.copier.ends}")
        self.copier.join(DRAIN_S)
        self.drained["copier"] = self.copier.finished and not self.copier.stopping.is_set()
        ends = {(t, p): end for t in (TA, TB) for p, end in _high_watermarks(
            self.c.bootstrap, t).items()}
        self.drained["readers"] = until(
            lambda: all(self.eof.get(tp, -1) >= end for tp, end in ends.items()), DRAIN_S, 1.0)
        self.timeline.add("test", f"group read to the ends: {self.drained['readers']}")
        for w in [*self.readers, self.sampler]:
            w.stopping.set()
        for w in [*self.readers, self.sampler]:
            w.join(120)

    def abandon(self) -> None:
        for w in self.workers:
            w.stopping.set()
            w.abandoned.set()
        for w in self.workers:
            w.join(5)

    def check_clients(self) -> Check:
        problems = []
        for w in self.workers:
            if w.crash:
                problems.append(f"{w.name}: {w.crash}")
            elif w.is_alive():
                problems.append(f"{w.name}: still running when asked to stop")
            elif not w.finished:
                problems.append(f"{w.name}: did not finish")
        problems += [f"{what}: did not reach the ends the writers left"
                     for what, ok in self.drained.items() if not ok]
        return Check("clients_finished", not problems,
                     f"{len(self.workers)} clients: {len(problems)} problems", problems)

    def summaries(self) -> list[str]:
        out = [f"{w.name}: {len(w.sent)} sent, {len(w.acked)} acknowledged, "
               f"{len(w.failed)} failed" for w in self.idem]
        for w in self.txn:
            by = {k: sum(1 for t in w.txns if t.outcome == k)
                  for k in ("committed", "aborted", "unknown")}
            planned = sum(1 for t in w.txns if t.planned == "abort")
            out.append(f"{w.name} ({w.txn_id}): {len(w.txns)} transactions, {by['committed']} "
                       f"committed, {by['aborted']} aborted ({planned} planned), "
                       f"{by['unknown']} unknown; {len(w.errors)} client errors, "
                       f"{w.instances} producer instances; {w.longest_wait()}")
        cp = self.copier
        out.append(f"copier: {cp.committed_txns} transactions committed, {cp.failed_txns} "
                   f"failed, {cp.rewinds} rewinds, {len(cp.read)} records read, "
                   f"{cp.instances} producer instances; {cp.longest_wait()}")
        out += [f"{r.name}: {len(r.read)} records read, {r.commits} commits, "
                f"{r.commit_errors} failed" for r in self.readers]
        out.append(f"offsets: {self.sampler.samples} samples, {self.sampler.errors} failed")
        return out


def _check_recovery(nemesis: Nemesis, healthy_at_end: bool) -> list[Check]:
    kinds: dict[str, int] = {}
    for kind, _ in nemesis.done:
        kinds[kind] = kinds.get(kind, 0) + 1
    slow = [f"after {kind}: not recovered within {RECOVERY_TIMEOUT_S:.0f} s"
            for kind, took in nemesis.recoveries if took is None]
    if not healthy_at_end:
        slow.append("not at full strength at the end")
    took = [t for _, t in nemesis.recoveries if t is not None]
    recovered = Check(
        "cluster_recovered", not slow and not nemesis.fault_errors and bool(nemesis.done),
        f"{len(nemesis.done)} faults {kinds}; recovered after each in at most "
        f"{max(took, default=0):.1f} s", slow + nemesis.fault_errors)
    up = Check("brokers_stayed_up", not nemesis.crashed,
               f"{len(nemesis.crashed)} brokers exited without being killed", nemesis.crashed)
    return [recovered, up, _check_exercised(nemesis, kinds)]


def _check_exercised(nemesis: Nemesis, done: dict[str, int]) -> Check:
    """Every fault kind the run names happened, and a pause or cut outlived the broker's
    session (a zombie was there to be fenced): a run that claims more fails."""
    missing = [f"{kind}: never injected" for kind in nemesis.kinds if not done.get(kind)]
    zombie_kinds = {"pause", "isolate"} & set(nemesis.kinds)
    if zombie_kinds and not nemesis.outlived:
        missing.append(f"no {' or '.join(sorted(zombie_kinds))} outlived the broker's session")
    return Check("every_fault_exercised", not missing,
                 f"{len(done)} of {len(nemesis.kinds)} fault kinds injected; outlived the "
                 f"session: {', '.join(nemesis.outlived) or 'none'}", missing)


def test_chaos_exactly_once_under_failover(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    timeline = Timeline()
    rng = random.Random(SEED)
    report_dir = Path(os.environ.get("ADS_CHAOS_REPORT_DIR") or tmp_path)
    netns = isinstance(c, NetnsCluster)
    timeline.add("test", f"cluster up ({'network namespaces' if netns else 'loopback'})")
    for topic in DATA_TOPICS:
        create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    view = ClusterView(c, list(DATA_TOPICS))
    scenario = Scenario(c, timeline)
    nemesis = Nemesis(c, view, timeline, rng, DATA_TOPICS, [*TXN_IDS, COPIER_ID],
                      [READERS, COPIER_ID])
    started = time.monotonic()
    try:
        scenario.start()
        # The clients make the internal topics; once they exist they count for health.
        assert until(lambda: all(view.zk.exists(f"/brokers/topics/{t}")
                                 for t in (TXN_STATE, OFFSETS)), 120), "internal topics made"
        view.topics += [TXN_STATE, OFFSETS]
        assert until(lambda: not view.unhealthy(), RECOVERY_TIMEOUT_S), view.unhealthy()
        for topic in (TXN_STATE, OFFSETS):
            assert all(len(r) == 3 for r in view.replicas(topic).values()), topic
            assert view.config(topic).get("min.insync.replicas", "2") == "2", topic
        assert until(lambda: all(any(t.commit_ok for t in w.txns) for w in scenario.txn)
                     and scenario.copier.committed_txns > 0, 120), "clients under way"
        timeline.add("test", f"faults for {DURATION_S:.0f} s (seed {SEED})")

        fault_start = time.monotonic()
        nemesis.run(DURATION_S)
        fault_time = time.monotonic() - fault_start
        healthy = until(lambda: not view.unhealthy(), RECOVERY_TIMEOUT_S)
        timeline.add("test", "faults over")

        scenario.stop_writers()
        # Every writer's transaction has ended: ta and tb close without waiting for a
        # transaction time-out.
        left_open = _no_open_transactions(c.bootstrap, [TA, TB], 90)
        scenario.drain()
        left_open += _no_open_transactions(c.bootstrap, [COPY], 90)
        nemesis.check_alive()
        timeline.add("test", "clients done; reading everything back")

        idem, idem_complete = read_to_end(c.bootstrap, IDEM, PARTITIONS, "read_uncommitted")
        final = {}
        complete = True
        for topic in (TA, TB):
            final[topic], done = read_to_end(c.bootstrap, topic, PARTITIONS, "read_committed")
            complete = complete and done
        copied, copied_complete = read_to_end(c.bootstrap, COPY, PARTITIONS, "read_committed")
        verdicts = judge_transactions([t for w in scenario.txn for t in w.txns], final,
                                      complete)
        hidden = verdicts.hidden_values
        in_logs = 0
        for topic in (TA, TB):
            raw, _ = read_to_end(c.bootstrap, topic, PARTITIONS, "read_uncommitted")
            in_logs += sum(1 for rs in raw.values() for _, v in rs if (topic, v) in hidden)
        identical = until(lambda: all(identical_logs(c, t, PARTITIONS, [1, 2, 3])
                                      for t in DATA_TOPICS), 120, 1.0)
        timeline.add("test", "checks")

        checks = [
            *_check_recovery(nemesis, healthy),
            scenario.check_clients(),
            check_idempotent(scenario.idem, idem, idem_complete),
            check_committed(verdicts),
            check_unknown(verdicts),
            check_aborted_during_run(verdicts, scenario.readers, scenario.copier, TA),
            check_aborted_at_end(verdicts, in_logs),
            check_copier(final[TA], complete, copied, copied_complete),
            check_group_offsets(scenario.sampler),
            Check("transactions_all_closed", not left_open,
                  f"{len(left_open)} partitions with a transaction left open "
                  "(last stable offset below the high watermark)", left_open),
            Check("replicas_identical", identical,
                  "every replica of the data topics holds the same batches" if identical
                  else "replicas still differ after 120 s"),
        ]
        header = [
            f"seed {SEED}; faults asked for {DURATION_S:.0f} s, injected for {fault_time:.0f} s; "
            f"whole run {time.monotonic() - started:.0f} s",
            "timeline second 0 is " + time.strftime(
                "%Y-%m-%d %H:%M:%S", time.localtime(timeline.wall_start))
            + f",{int(timeline.wall_start * 1000) % 1000:03d} local time, as the broker logs "
            "write it",
            f"3 brokers on {'network namespaces' if netns else 'loopback (no network cut)'}; "
            f"{PARTITIONS} partitions per topic, replication factor 3, min.insync.replicas 2",
            f"faults: {', '.join(nemesis.kinds)}"
            + ("" if netns else "; isolate skipped (needs root and network namespaces)"),
        ]
        logs = [f"broker {n}: {b.log_path}" for n, b in c.brokers.items()]
        logs.append(f"zookeeper: {c.zookeeper.data_dir / 'zookeeper.log'}")
        text = report(header, checks, timeline.lines(), scenario.summaries(), logs)
        path = write_report(report_dir, text, checks, {
            "seed": SEED, "duration_s": DURATION_S, "netns": netns,
            "timeline": timeline.lines(), "clients": scenario.summaries()})
        print(text)  # shown with -s (`make chaos`), passing or not
        failed = [ch.name for ch in checks if not ch.passed]
        assert not failed, f"chaos checks failed: {failed} (report: {path})\n{text}"
    finally:
        scenario.abandon()
        nemesis.stop()
        view.close()
