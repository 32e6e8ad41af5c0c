"""The faults of the exactly-once chaos scenario, one at a time, each healed and the
cluster back to full strength (every broker registered, every ISR whole) before the next:
with replication factor 3 and min.insync.replicas 2 nothing acknowledged may be lost to
any one of them, so every loss the checks find is the broker's.

- kill-leader: SIGKILL the leader of a data partition, restart it once its session ended;
- kill-controller: the same for the broker holding /controller;
- kill-coordinator: the same for the leader of a transactional id's `__transaction_state`
  partition (its transaction coordinator);
- pause: SIGSTOP the leader of a group's `__consumer_offsets` partition (its group
  coordinator) until its ZooKeeper session has expired, then SIGCONT: a zombie that wakes
  up believing it still leads;
- isolate: cut a data partition's leader off the network (tests/netns_support.py) until
  its session expired, then heal; only with network namespaces (root and `ip`);
- zk-restart: SIGKILL ZooKeeper and start it again on the same data a few seconds later.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable

from chaos_clients import Timeline
from kazoo.client import KazooClient

from ads.coordinator.topic import partition_for
from cluster_support import SESSION_TIMEOUT_MS, Cluster
from netns_support import NetnsCluster

TXN_STATE = "__transaction_state"
OFFSETS = "__consumer_offsets"
RECOVERY_TIMEOUT_S = 150.0
SESSION_END_TIMEOUT_S = 60.0
BROKER_START_TIMEOUT_S = 90.0


def until(check: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    """Whether `check` held before the deadline; a check that raises (ZooKeeper or a broker
    restarting) counts as not yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return True
        except Exception:  # noqa: BLE001, S110 - not yet
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


class ClusterView:
    """The cluster as ZooKeeper holds it, through one client kept for the whole run (it
    reconnects by itself after ZooKeeper's restart)."""

    def __init__(self, cluster: Cluster, topics: list[str]) -> None:
        self.cluster = cluster
        self.topics = topics
        self.zk = KazooClient(hosts=cluster.zookeeper.connect, timeout=10,
                              connection_retry={"max_tries": -1, "delay": 0.2,
                                                "max_delay": 1.0})
        self.zk.start(timeout=30)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def registered(self) -> set[int]:
        return {int(n) for n in self.zk.get_children("/brokers/ids")}

    def state(self, topic: str, partition: int) -> dict:
        data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)

    def partitions(self, topic: str) -> int:
        return len(self.zk.get_children(f"/brokers/topics/{topic}/partitions"))

    def replicas(self, topic: str) -> dict[int, list[int]]:
        data, _ = self.zk.get(f"/brokers/topics/{topic}")
        return {int(p): r for p, r in json.loads(data)["partitions"].items()}

    def config(self, topic: str) -> dict[str, str]:
        path = f"/config/topics/{topic}"
        if not self.zk.exists(path):
            return {}
        return dict(json.loads(self.zk.get(path)[0]).get("config", {}))

    def leader(self, topic: str, partition: int) -> int:
        return int(self.state(topic, partition)["leader"])

    def controller(self) -> int:
        return int(json.loads(self.zk.get("/controller")[0])["brokerid"])

    def unhealthy(self) -> list[str]:
        """What keeps the cluster from full strength (empty: every broker registered, every
        partition of the topics led with all three replicas in its ISR)."""
        brokers = set(self.cluster.brokers)
        missing = brokers - self.registered()
        problems = [f"broker {n} not registered" for n in sorted(missing)]
        for topic in self.topics:
            for p in range(self.partitions(topic)):
                state = self.state(topic, p)
                if state["leader"] < 0 or sorted(state["isr"]) != sorted(brokers):
                    problems.append(f"{topic}-{p} leader {state['leader']} isr {state['isr']}")
        return problems


class Nemesis:
    """Injects the faults in turn until `duration_s` ends; `stop` may be called from a
    `finally` at any point and leaves no broker paused and no link down."""

    def __init__(self, cluster: Cluster, view: ClusterView, timeline: Timeline,
                 rng: random.Random, data_topics: list[str], txn_ids: list[str],
                 groups: list[str]) -> None:
        self.c, self.view, self.timeline, self.rng = cluster, view, timeline, rng
        self.data_topics, self.txn_ids, self.groups = data_topics, txn_ids, groups
        self.netns = isinstance(cluster, NetnsCluster)
        self.kinds = ["kill-leader", "pause", "kill-controller", "zk-restart",
                      "kill-coordinator"]
        if self.netns:
            self.kinds.insert(3, "isolate")
        self.done: list[tuple[str, str]] = []  # (kind, what) of each fault injected
        # The pauses and network cuts that outlived the broker's session: a zombie leader
        # or coordinator really was there, replaced while it still believed in itself.
        self.outlived: list[str] = []
        self.recoveries: list[tuple[str, float | None]] = []  # (kind, seconds or None)
        self.crashed: list[str] = []  # brokers that exited without being killed
        self.fault_errors: list[str] = []  # faults that could not be injected or healed
        self._killed: set[int] = set()
        self._paused: set[int] = set()
        self._isolated: set[int] = set()

    def note(self, what: str) -> None:
        self.timeline.add("nemesis", what)

    def run(self, duration_s: float) -> None:
        end = time.monotonic() + duration_s
        max_faults = max(len(self.kinds), int(duration_s // 8))
        i = 0
        # Every kind once even when that takes longer than asked (bounded in count).
        while i < max_faults and (time.monotonic() < end or i < len(self.kinds)):
            kind = self.kinds[i % len(self.kinds)]
            i += 1
            self.check_alive()
            try:
                getattr(self, "_" + kind.replace("-", "_"))()
            except Exception as exc:  # noqa: BLE001 - reported; the recovery wait decides
                self.fault_errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                self.note(f"{kind} failed: {type(exc).__name__}: {exc}")
            started = time.monotonic()
            recovered = until(lambda: not self.view.unhealthy(), RECOVERY_TIMEOUT_S, 0.5)
            self.check_alive()
            if not recovered:
                self.recoveries.append((kind, None))
                self.note(f"NOT recovered after {RECOVERY_TIMEOUT_S:.0f} s: "
                          f"{self._problems()}; no more faults")
                return
            took = time.monotonic() - started
            self.recoveries.append((kind, took))
            self.note(f"recovered in {took:.1f} s (every broker registered, every ISR full)")
            # Quiet time for the clients to make progress between faults.
            time.sleep(self.rng.uniform(2.0, 5.0))

    def _problems(self) -> str:
        try:
            problems = self.view.unhealthy()
        except Exception as exc:  # noqa: BLE001 - ZooKeeper itself may be the problem
            return f"ZooKeeper not answering: {exc}"
        return "; ".join(problems[:6]) + (f" (+{len(problems) - 6})" if len(problems) > 6
                                          else "")

    def check_alive(self) -> None:
        """Notes (and restarts) a broker that exited without being killed."""
        for node, broker in self.c.brokers.items():
            if node in self._killed or broker.proc is None:
                continue
            code = broker.proc.poll()
            if code is not None:
                self.crashed.append(f"broker {node} exited with {code} at "
                                    f"{self.timeline.now():.1f} s")
                self.note(f"broker {node} EXITED by itself with {code}; restarting it")
                self._restart(node)

    def roles(self, node: int) -> str:
        """What the broker is to the scenario, for the timeline."""
        found = []
        try:
            if self.view.controller() == node:
                found.append("controller")
            for tid in self.txn_ids:
                if self.view.leader(TXN_STATE, partition_for(tid, self.view.partitions(
                        TXN_STATE))) == node:
                    found.append(f"txn coordinator of {tid}")
            for group in self.groups:
                if self.view.leader(OFFSETS, partition_for(group, self.view.partitions(
                        OFFSETS))) == node:
                    found.append(f"group coordinator of {group}")
            led = sum(1 for t in self.data_topics for p in range(self.view.partitions(t))
                      if self.view.leader(t, p) == node)
            found.append(f"leader of {led} data partitions")
        except Exception as exc:  # noqa: BLE001 - only for the timeline
            found.append(f"roles unknown: {type(exc).__name__} {exc}")
        return ", ".join(found)

    def _session_ended(self, node: int) -> bool:
        return until(lambda: node not in self.view.registered(), SESSION_END_TIMEOUT_S)

    def _restart(self, node: int) -> None:
        broker = self.c.brokers[node]
        for attempt in range(3):
            try:
                broker.start(timeout=BROKER_START_TIMEOUT_S)
                self._killed.discard(node)
                pid = broker.proc.pid if broker.proc else "?"
                self.note(f"broker {node} restarted (pid {pid})")
                return
            except (RuntimeError, TimeoutError) as exc:
                self.note(f"broker {node} restart {attempt + 1} failed: {str(exc)[-300:]}")
                if broker.proc is not None and broker.proc.poll() is None:
                    broker.kill9()
                time.sleep(SESSION_TIMEOUT_MS / 1000)
        raise RuntimeError(f"broker {node} could not be restarted")

    def _kill(self, kind: str, node: int, why: str) -> None:
        broker = self.c.brokers[node]
        assert broker.proc is not None
        roles = self.roles(node)
        self._killed.add(node)
        broker.kill9()
        self.done.append((kind, f"broker {node} ({why})"))
        self.note(f"SIGKILL broker {node}, {why} [{roles}]")
        if self._session_ended(node):
            self.note(f"broker {node}'s session ended")
        else:
            self.note(f"broker {node} still registered after {SESSION_END_TIMEOUT_S:.0f} s")
        self._restart(node)

    def _data_partition(self) -> tuple[str, int]:
        topic = self.rng.choice(self.data_topics)
        return topic, self.rng.randrange(self.view.partitions(topic))

    def _kill_leader(self) -> None:
        topic, p = self._data_partition()
        self._kill("kill-leader", self.view.leader(topic, p), f"leader of {topic}-{p}")

    def _kill_controller(self) -> None:
        self._kill("kill-controller", self.view.controller(), "the controller")

    def _kill_coordinator(self) -> None:
        tid = self.rng.choice(self.txn_ids)
        p = partition_for(tid, self.view.partitions(TXN_STATE))
        self._kill("kill-coordinator", self.view.leader(TXN_STATE, p),
                   f"transaction coordinator of {tid} ({TXN_STATE}-{p})")

    def _pause(self) -> None:
        group = self.rng.choice(self.groups)
        p = partition_for(group, self.view.partitions(OFFSETS))
        node = self.view.leader(OFFSETS, p)
        broker = self.c.brokers[node]
        assert broker.proc is not None
        roles = self.roles(node)
        os.kill(broker.proc.pid, signal.SIGSTOP)
        self._paused.add(node)
        self.done.append(("pause", f"broker {node} (group coordinator of {group})"))
        self.note(f"SIGSTOP broker {node}, group coordinator of {group} ({OFFSETS}-{p}) "
                  f"[{roles}]")
        try:
            if self._session_ended(node):
                self.note(f"broker {node}'s session expired while paused")
                self.outlived.append(f"pause of broker {node}")
                time.sleep(1.0)
            else:
                self.note(f"broker {node} still registered after {SESSION_END_TIMEOUT_S:.0f} s")
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
            self._paused.discard(node)
            self.note(f"SIGCONT broker {node}")

    def _isolate(self) -> None:
        assert isinstance(self.c, NetnsCluster)
        topic, p = self._data_partition()
        node = self.view.leader(topic, p)
        roles = self.roles(node)
        self.c.isolate(node)
        self._isolated.add(node)
        self.done.append(("isolate", f"broker {node} (leader of {topic}-{p})"))
        self.note(f"network cut: broker {node}, leader of {topic}-{p} [{roles}]")
        try:
            if self._session_ended(node):
                self.note(f"broker {node}'s session expired while cut off")
                self.outlived.append(f"network cut of broker {node}")
                time.sleep(2.0)
            else:
                self.note(f"broker {node} still registered after {SESSION_END_TIMEOUT_S:.0f} s")
        finally:
            self.c.heal(node)
            self._isolated.discard(node)
            self.note(f"network healed: broker {node}")

    def _zk_restart(self) -> None:
        zk = self.c.zookeeper
        assert zk.proc is not None
        zk.proc.kill()
        zk.proc.wait(30)
        self.done.append(("zk-restart", "ZooKeeper"))
        self.note("SIGKILL ZooKeeper")
        time.sleep(self.rng.uniform(1.0, 3.0))
        zk.start(timeout_s=60)
        self.note("ZooKeeper started again")
        # The server restores every session with a fresh time-out and keeps its ephemeral
        # registrations meanwhile: a broker whose client did not reconnect in time still
        # looks registered until then. Recovery is judged once that time has passed.
        settle_s = SESSION_TIMEOUT_MS / 1000 + 2.0
        time.sleep(settle_s)
        self.note(f"{settle_s:.0f} s later, registered: {self._registered()}")

    def _registered(self) -> str:
        try:
            return str(sorted(self.view.registered()))
        except Exception as exc:  # noqa: BLE001 - only for the timeline
            return type(exc).__name__

    def stop(self) -> None:
        """Heals whatever a fault left (a paused broker, a cut link, ZooKeeper down)."""
        for node in list(self._paused):
            proc = self.c.brokers[node].proc
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
            self._paused.discard(node)
        if isinstance(self.c, NetnsCluster):
            for node in list(self._isolated):
                self.c.heal(node)
                self._isolated.discard(node)
        zk = self.c.zookeeper
        if zk.proc is not None and zk.proc.poll() is not None:
            zk.start(timeout_s=60)
