"""A ZooKeeper server from Debian's `zookeeper` package, run as a child process.

For `ads cluster up` and the cluster tests: one standalone server on a loopback port with
its data in a given directory. A cluster on several machines uses a real ensemble instead
(docs/cluster.md).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF = Path("/etc/zookeeper/conf")


class ZooKeeperMissingError(RuntimeError):
    pass


def zookeeper_available() -> bool:
    return shutil.which("java") is not None and ZOOKEEPER_JAR.exists()


class ZooKeeperServer:
    def __init__(self, data_dir: Path, port: int, host: str = "127.0.0.1") -> None:
        self.data_dir = data_dir
        self.port = port
        self.host = host
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> ZooKeeperServer:
        java = shutil.which("java")
        if java is None or not ZOOKEEPER_JAR.exists():
            raise ZooKeeperMissingError(
                "ZooKeeper is not installed: install the Debian package 'zookeeper' "
                "(apt-get install zookeeper), which brings a Java runtime")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(f"dataDir={self.data_dir}\nclientPort={self.port}\n"
                          f"clientPortAddress={self.host}\ntickTime=500\n"
                          "minSessionTimeout=1000\nmaxSessionTimeout=60000\n"
                          "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n")
        with (self.data_dir / "zookeeper.log").open("ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed arguments
                [java, "-Xmx128m", "-cp", f"{ZOOKEEPER_CONF}:{ZOOKEEPER_JAR}",
                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)],
                stdout=log, stderr=subprocess.STDOUT,
                # Its own session: a terminal's Ctrl-C reaches the program that runs it,
                # which stops it after the brokers that need it.
                start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}; see "
                                   f"{self.data_dir / 'zookeeper.log'}")
            if self._serving():
                return self
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"ZooKeeper did not start on {self.connect} in {timeout_s:.0f} s")

    def _serving(self) -> bool:
        # `ruok` answers as soon as the port is open, before the server takes sessions;
        # `srvr` names the server's mode only once it serves requests, so a client
        # connecting right after does not wait out its own time-out on a busy machine.
        try:
            with socket.create_connection((self.host, self.port), timeout=2.0) as s:
                s.sendall(b"srvr")
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
        except OSError:
            return False
        return b"Mode:" in reply

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
