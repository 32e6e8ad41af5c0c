"""Deadlines of the coordinators (session, rebalance and join-delay timeouts).

A min-heap of deadlines read against the injected clock. The broker calls `run_due` from
a periodic job on its event loop, and unit tests call it after advancing a `ManualClock`,
so no timer ever sleeps or runs on another thread. Cancelled timers stay in the heap
until they come due and are then dropped.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable

from ads.common.clock import Clock

log = logging.getLogger("ads.coordinator")


class TimerHandle:
    __slots__ = ("deadline_ms", "fn", "cancelled")

    def __init__(self, deadline_ms: int, fn: Callable[[], None]) -> None:
        self.deadline_ms = deadline_ms
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, TimerHandle]] = []
        self._seq = itertools.count()

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(self.clock.time_ms() + max(delay_ms, 0), fn)
        heapq.heappush(self._heap, (handle.deadline_ms, next(self._seq), handle))
        return handle

    def run_due(self) -> int:
        """Runs every timer whose deadline has passed; returns how many ran."""
        now = self.clock.time_ms()
        ran = 0
        while self._heap and self._heap[0][0] <= now:
            _, _, handle = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            handle.cancelled = True
            ran += 1
            try:
                handle.fn()
            except Exception:
                log.exception("coordinator timer failed")
        return ran

    def __len__(self) -> int:
        return sum(1 for _, _, h in self._heap if not h.cancelled)
