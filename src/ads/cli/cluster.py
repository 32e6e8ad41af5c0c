"""`ads cluster up` and `ads cluster status`: a local cluster for development, and the state
of any ZooKeeper-mode cluster.

`up` runs a ZooKeeper server (Debian's `zookeeper` package) and N `ads broker` processes
in the foreground, each in its own process group so that Ctrl-C reaches this command
only: it then stops the brokers (SIGTERM to each pid, so each does its controlled
shutdown while ZooKeeper is still there), then ZooKeeper, and exits. A broker that does
not stop within `STOP_WAIT_S` is killed with SIGKILL.

`status` reads the cluster's state either with a Metadata request (`--bootstrap-server`,
any Kafka-protocol cluster) or straight from ZooKeeper's znodes (`--zookeeper`, which
works while no broker is up), and prints brokers, the controller, each partition's
leader, replicas and ISR, and the offline and under-replicated partitions.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ads.cli.common import (
    TIMEOUT_S,
    CommandError,
    add_client_arguments,
    client_config,
    connection_factory,
    describe_error,
    make_client,
    run_command,
)
from ads.cli.replica_offsets import format_ends, log_end_offsets
from ads.testing.zookeeper import ZooKeeperMissingError, ZooKeeperServer, zookeeper_available

DEFAULT_DATA_DIR = "/tmp/ads-cluster"  # noqa: S108 - a development cluster, as log.dir's default
START_WAIT_S = 30.0
STOP_WAIT_S = 60.0
# A development cluster is stopped whole: a broker whose partitions cannot move (no other
# live ISR member) asks the controller once instead of Kafka's 3 tries 5 s apart.
UP_DEFAULTS = ("controlled.shutdown.max.retries=1",)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    cluster = sub.add_parser("cluster", help=help_text)
    verbs = cluster.add_subparsers(dest="cluster_command", required=True, metavar="VERB")

    p = verbs.add_parser("up", help="run ZooKeeper and N brokers in the foreground until "
                                    "Ctrl-C or SIGTERM")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, metavar="DIR",
                   help=f"where ZooKeeper and the brokers keep their data and logs "
                        f"(default {DEFAULT_DATA_DIR})")
    p.add_argument("--base-port", type=int, default=9092,
                   help="broker N listens on BASE_PORT + N - 1 (default 9092)")
    p.add_argument("--zookeeper-port", type=int, default=2181, help="default 2181")
    p.add_argument("--host", default="127.0.0.1", help="listener host (default 127.0.0.1)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker config key given to every broker (repeatable)")
    p.set_defaults(func=up)

    p = verbs.add_parser("status", help="brokers, controller and partition leaders, "
                                        "offline and under-replicated partitions")
    add_client_arguments(p)
    p.add_argument("--replica-offsets", action="store_true",
                   help="also show every replica's log end offset, asked of its broker")
    p.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="read the cluster's znodes instead of asking a broker")
    p.set_defaults(func=run_command("cluster status", status))


# -- up -----------------------------------------------------------------------------------
class _Stop:
    """Set by SIGTERM or SIGINT; the command checks it between steps and while it waits."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self, signum: int, _: FrameType | None) -> None:
        self.event.set()


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _start_broker(args: argparse.Namespace, node: int, connect: str, root: Path
                  ) -> subprocess.Popen[bytes]:
    port = args.base_port + node - 1
    cmd = [sys.executable, "-m", "ads.cli.main", "broker", "--node-id", str(node),
           "--data-dir", str(root / f"broker-{node}"), "--host", args.host,
           "--port", str(port), "--zookeeper", connect]
    for assignment in (*UP_DEFAULTS, *args.set):
        cmd += ["--set", assignment]
    with (root / f"broker-{node}.log").open("ab") as out:
        # Its own session: the terminal's Ctrl-C reaches this command, which stops the
        # brokers in order, not every process at once.
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,  # noqa: S603
                                start_new_session=True)


def _stop_brokers(brokers: dict[int, subprocess.Popen[bytes]]) -> None:
    for proc in brokers.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    for node, proc in brokers.items():
        try:
            proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            print(f"broker {node} (pid {proc.pid}) did not stop in {STOP_WAIT_S:.0f} s: "
                  "killed", file=sys.stderr)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def up(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        print("ads cluster up: --brokers must be at least 1", file=sys.stderr)
        return 2
    if not zookeeper_available():
        print("ads cluster up: ZooKeeper is not installed: install the Debian package "
              "'zookeeper' (apt-get install zookeeper)", file=sys.stderr)
        return 2
    stop = _Stop()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    root = Path(args.data_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    zookeeper = ZooKeeperServer(root / "zookeeper", args.zookeeper_port, args.host)
    brokers: dict[int, subprocess.Popen[bytes]] = {}
    try:
        try:
            zookeeper.start()
        except (ZooKeeperMissingError, RuntimeError, TimeoutError) as exc:
            print(f"ads cluster up: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, ZooKeeperMissingError) else 1
        assert zookeeper.proc is not None
        print(f"zookeeper: {zookeeper.connect} (pid {zookeeper.proc.pid}, data in "
              f"{zookeeper.data_dir})", flush=True)
        for node in range(1, args.brokers + 1):
            if stop.event.is_set():
                return 0
            brokers[node] = _start_broker(args, node, zookeeper.connect, root)
        code = _wait_listening(args, brokers, root, stop)
        if code is not None:
            return code
        for node, proc in brokers.items():
            print(f"broker {node}: {args.host}:{args.base_port + node - 1} (pid {proc.pid}, "
                  f"log {root / f'broker-{node}.log'})")
        servers = ",".join(f"{args.host}:{args.base_port + n - 1}" for n in brokers)
        print(f"bootstrap servers: {servers}")
        print("Ctrl-C or SIGTERM stops the cluster.", flush=True)
        _watch(brokers, stop)
        print("stopping the cluster", flush=True)
        return 0
    finally:
        _stop_brokers(brokers)
        zookeeper.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if brokers:
            print("stopped", flush=True)


def _wait_listening(args: argparse.Namespace, brokers: dict[int, subprocess.Popen[bytes]],
                    root: Path, stop: _Stop) -> int | None:
    """None once every broker listens; an exit status when one failed or a signal came."""
    deadline = time.monotonic() + START_WAIT_S
    waiting = dict(brokers)
    while waiting:
        if stop.event.is_set():
            return 0
        for node, proc in list(waiting.items()):
            if proc.poll() is not None:
                print(f"ads cluster up: broker {node} exited with {proc.returncode}; see "
                      f"{root / f'broker-{node}.log'}", file=sys.stderr)
                return 1
            if _listening(args.host, args.base_port + node - 1):
                del waiting[node]
        if time.monotonic() > deadline:
            print(f"ads cluster up: brokers {sorted(waiting)} did not start within "
                  f"{START_WAIT_S:.0f} s", file=sys.stderr)
            return 1
        stop.event.wait(0.1)
    return None


def _watch(brokers: dict[int, subprocess.Popen[bytes]], stop: _Stop) -> None:
    """Waits for a signal, reporting each broker that exits meanwhile."""
    reported: set[int] = set()
    while not stop.event.wait(0.5):
        for node, proc in brokers.items():
            if node not in reported and proc.poll() is not None:
                reported.add(node)
                print(f"broker {node} (pid {proc.pid}) exited with {proc.returncode}",
                      file=sys.stderr, flush=True)


# -- status -------------------------------------------------------------------------------
@dataclass(slots=True)
class PartitionView:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass(slots=True)
class ClusterView:
    cluster_id: str
    controller: int
    brokers: dict[int, str]  # node id -> host:port of the live brokers
    partitions: list[PartitionView] = field(default_factory=list)
    # (node id, topic, partition) -> that replica's log end offset, when asked for.
    log_end_offsets: dict[tuple[int, str, int], int] | None = None


def _from_broker(args: argparse.Namespace) -> ClusterView:
    admin = make_client(AdminClient, client_config(args))
    try:
        md = admin.list_topics(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise CommandError(describe_error(exc.args[0], args.bootstrap_server)) from exc
    view = ClusterView(md.cluster_id or "", md.controller_id,
                       {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()})
    for name, topic in md.topics.items():
        for p in topic.partitions.values():
            view.partitions.append(PartitionView(name, p.id, p.leader, list(p.replicas),
                                                 list(p.isrs)))
    return view


def _from_zookeeper(connect: str) -> ClusterView:
    from kazoo.client import KazooClient  # noqa: PLC0415
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415
    from kazoo.handlers.threading import KazooTimeoutError  # noqa: PLC0415

    from ads.metadata import zk_layout as zl  # noqa: PLC0415

    zk = KazooClient(hosts=connect)
    try:
        zk.start(timeout=TIMEOUT_S)
    except KazooTimeoutError as exc:
        zk.close()
        raise CommandError(f"cannot connect to ZooKeeper at {connect}") from exc
    try:
        def get(path: str) -> bytes | None:
            try:
                data: bytes = zk.get(path)[0]
            except NoNodeError:
                return None
            return data

        def children(path: str) -> list[str]:
            try:
                return list(zk.get_children(path))
            except NoNodeError:
                return []

        cluster = get(zl.CLUSTER_ID)
        view = ClusterView(zl.decode_cluster_id(cluster) if cluster else "",
                           zl.decode_controller(get(zl.CONTROLLER)), {})
        for child in children(zl.BROKER_IDS):
            raw = get(zl.broker_path(int(child)))
            if raw is not None:
                b = zl.decode_broker(int(child), raw)
                view.brokers[b.node_id] = f"{b.host}:{b.port}"
        for topic in children(zl.TOPICS):
            raw = get(zl.topic_path(topic))
            if raw is None:
                continue
            for p, replicas in zl.decode_assignment(raw).replicas.items():
                state_raw = get(zl.state_path(topic, p))
                state = zl.decode_state(state_raw) if state_raw else None
                leader = state.leader if state is not None else -1
                if leader not in view.brokers:
                    leader = -1  # its broker is gone and the controller has not acted yet
                view.partitions.append(PartitionView(
                    topic, p, leader, replicas, state.isr if state is not None else []))
        return view
    finally:
        zk.stop()
        zk.close()


def status(args: argparse.Namespace) -> int:
    view = _from_zookeeper(args.zookeeper) if args.zookeeper else _from_broker(args)
    if args.replica_offsets:
        addresses = {n: a.rsplit(":", 1) for n, a in view.brokers.items()}
        view.log_end_offsets = log_end_offsets(
            connection_factory(args),
            [(r, addresses[r][0], int(addresses[r][1]), p.topic, p.partition)
             for p in view.partitions for r in p.replicas if r in addresses])
    print("\n".join(format_status(view)))
    return 0


def format_status(view: ClusterView) -> list[str]:
    lines = [f"Cluster: {view.cluster_id or '?'}",
             f"Controller: {view.controller if view.controller >= 0 else 'none'}",
             f"Brokers: {len(view.brokers)}"]
    lines += [f"\tBroker: {n}\t{address}" + ("\t(controller)" if n == view.controller else "")
              for n, address in sorted(view.brokers.items())]
    parts = sorted(view.partitions, key=lambda p: (p.topic, p.partition))
    offline = [p for p in parts if p.leader < 0]
    under = [p for p in parts if p.leader >= 0 and len(p.isr) < len(p.replicas)]
    lines.append(f"Partitions: {len(parts)}")
    ends = view.log_end_offsets
    lines += [_partition_line(p) + ("" if ends is None else "\tReplicaLogEndOffsets: "
                                    + format_ends(ends, p.replicas, p.topic, p.partition))
              for p in parts]
    lines.append(f"Offline partitions: {len(offline)}")
    lines += [_partition_line(p) for p in offline]
    lines.append(f"Under-replicated partitions: {len(under)}")
    lines += [_partition_line(p) for p in under]
    return lines


def _partition_line(p: PartitionView) -> str:
    leader = str(p.leader) if p.leader >= 0 else "none"
    return (f"\tTopic: {p.topic}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
