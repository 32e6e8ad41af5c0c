"""How `make test` spreads the suite over pytest-xdist workers (docs/testing.md).

A test file runs whole on one worker, in order, so a module's fixtures (an embedded broker
shared by its tests, a Spark session, Kafka's reference broker) start once, as in a serial
run. Files are handed out longest first (their times from a serial run, in
tests/file_times.txt), so the long ones do not end up last on one worker while the others
are idle. Files of an exclusive directory (the Spark tests: each job is a JVM that takes
both cores and is bounded in time) never run on two workers at once: the worker that runs
one takes the next, the others take what else is left.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from xdist.scheduler import LoadScopeScheduling

if TYPE_CHECKING:
    import pytest
    from xdist.remote import Producer
    from xdist.workermanage import WorkerController

TIMES = Path(__file__).parent / "file_times.txt"
# A file not in the table is short: it fills the gaps at the end.
UNKNOWN_SECONDS = 1.0
EXCLUSIVE = ("tests/spark/",)


def read_times(path: Path = TIMES) -> dict[str, float]:
    times = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            seconds, name = line.split()
            times[name] = float(seconds)
    return times


def exclusive(scope: str) -> bool:
    return scope.startswith(EXCLUSIVE)


class FileLanes(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, with a file as the scope, the longest file first
    and at most one exclusive file running at a time."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self.times = read_times()

    def _split_scope(self, nodeid: str) -> str:
        return nodeid.split("::", 1)[0]

    def mark_test_complete(
        self, node: WorkerController, item_index: int, duration: float = 0
    ) -> None:
        super().mark_test_complete(node, item_index, duration)
        # Another worker may have been waiting for the exclusive file this one finished.
        for other in self.nodes:
            if other is not node:
                self._reschedule(other)

    def schedule(self) -> None:
        super().schedule()
        # The first round gave each worker one file; one of a single test would wait there.
        for node in self.nodes:
            self._reschedule(node)

    def _reschedule(self, node: WorkerController) -> None:
        # A worker holds back its last test until it is sent more or told to stop (the test
        # needs to know the next one for teardown), so more is sent while two remain.
        while not node.shutting_down and self._pending_of(self.assigned_work[node]) <= 2:
            if not self.workqueue:
                node.shutdown()
            elif not self._assign_work_unit(node):
                return

    def _assign_work_unit(self, node: WorkerController) -> bool:
        scope = self._next_scope(node)
        if scope is None:
            return False
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some(
            [collection.index(nodeid) for nodeid, done in work_unit.items() if not done])
        return True

    def _next_scope(self, node: WorkerController) -> str | None:
        """The longest file left that this worker may start now."""
        busy = self._exclusive_elsewhere(node)
        allowed = [s for s in self.workqueue if not (busy and exclusive(s))]
        if not allowed:
            return None
        return max(allowed, key=lambda s: self.times.get(s, UNKNOWN_SECONDS))

    def _exclusive_elsewhere(self, node: WorkerController) -> bool:
        """Whether another worker has an exclusive file with tests still to run."""
        return any(
            exclusive(scope) and not all(unit.values())
            for other, work in self.assigned_work.items() if other is not node
            for scope, unit in work.items())
