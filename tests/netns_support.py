"""A cluster whose brokers each live in a Linux network namespace this test makes, so a
test can cut one off from ZooKeeper, the other brokers and the clients, and heal it.

Layout: a bridge in this (the test's) namespace holds 10.231.S.1, where ZooKeeper listens
and from where the test's clients connect; broker N runs in namespace `ads<tag>b<N>` at
10.231.S.(10+N), joined to the bridge by a veth pair. S comes from the process id, as the
tag does, so test runs side by side on one machine have addresses and routes of their own.
`isolate(N)` takes the bridge's end of broker N's pair down: every packet to and from it is
lost, as in a switch failure. Only these namespaces and the bridge are touched, and all of
them are removed by `stop`.
Needs root and the `ip` command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from broker_process import BrokerProcess
from cluster_support import Cluster


def netns_available() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


class NetnsCluster(Cluster):
    def __init__(self, root: Path, size: int, *sets: str) -> None:
        tag = self.tag = str(os.getpid() % 100000)
        self.subnet = f"10.231.{1 + os.getpid() % 250}"
        self.hub = f"{self.subnet}.1"
        self.bridge = f"adsbr{tag}"
        self.namespaces = {n: f"ads{tag}b{n}" for n in range(1, size + 1)}
        self.links = {n: f"ads{tag}h{n}" for n in range(1, size + 1)}
        super().__init__(root, size, *sets, zk_host=self.hub)

    def _broker(self, node: int, *sets: str) -> BrokerProcess:
        return BrokerProcess(self.root / f"broker-{node}", None, *sets,
                             host=f"{self.subnet}.{10 + node}",
                             prefix=("ip", "netns", "exec", self.namespaces[node]))

    def start(self) -> NetnsCluster:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.hub}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for node, ns in self.namespaces.items():
            inner = f"ads{self.tag}i{node}"  # made out here first, so unique like the others
            _ip("netns", "add", ns)
            _ip("link", "add", self.links[node], "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", self.links[node], "master", self.bridge, "up")
            _ip("netns", "exec", ns, "ip", "addr", "add", f"{self.subnet}.{10 + node}/24",
                "dev", inner)
            _ip("netns", "exec", ns, "ip", "link", "set", inner, "up")
            _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        super().start()
        return self

    def isolate(self, node: int) -> None:
        _ip("link", "set", self.links[node], "down")

    def heal(self, node: int) -> None:
        _ip("link", "set", self.links[node], "up")

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            for ns in self.namespaces.values():
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=10)
