"""A share consumer in its own process that acknowledges one poll and holds the next
(`tests/broker/share_worker.py`), for the tests that kill it or a broker under it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

WORKER = str(Path(__file__).parent / "broker" / "share_worker.py")


@dataclass
class WorkerRun:
    proc: subprocess.Popen[str]
    acked: set[tuple[int, int]] = field(default_factory=set)  # (partition, offset)
    held: set[tuple[int, int]] = field(default_factory=set)
    committed: bool = False  # its acknowledgements were answered without error

    def kill(self) -> None:
        """SIGKILL by pid: whatever it holds is not acknowledged."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@contextmanager
def share_worker(bootstrap: str, group: str, topic: str, *settings: str,
                 timeout_s: float = 30.0) -> Iterator[WorkerRun]:
    """Started (`settings`: KEY=VALUE consumer settings), and yielded once it holds its
    second poll's records; killed at the end (and at `timeout_s` if it never gets there)."""
    proc = subprocess.Popen([sys.executable, WORKER, bootstrap, group, topic,  # noqa: S603
                             *settings],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    run = WorkerRun(proc)
    guard = threading.Timer(timeout_s, run.kill)
    guard.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            word, *rest = line.split()
            if word in ("acked", "held"):
                (run.acked if word == "acked" else run.held).add((int(rest[0]), int(rest[1])))
            elif word == "committed":
                run.committed = True
            elif word == "holding":
                break
        guard.cancel()
        assert run.held, "the share worker did not get to hold records"
        yield run
    finally:
        guard.cancel()
        run.kill()
        if proc.stdout is not None:
            proc.stdout.close()
