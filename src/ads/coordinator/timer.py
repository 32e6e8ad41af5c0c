"""Deadlines of a coordinator partition (session, rebalance, join-delay and expiry timeouts).

A min-heap of deadlines read against the injected clock. The runtime keeps one `Timers`
per loaded partition and calls `run_due` from its `tick`; unit tests call `tick` after
advancing a `ManualClock`, so no timer ever sleeps or runs on another thread. The broker
does not poll: `on_schedule` tells it of each new deadline and `next_deadline_ms` of the
earliest one left, so it wakes its event loop exactly when the first timer is due (a
member whose session ends at T is removed at T, not at the next tick after T). A timer's
function may return the effects it wants performed (the runtime's writes); `run_due`
hands them back in the order the timers ran. Cancelled timers stay in the heap until they
reach its top and are then dropped; unloading a partition cancels all of its timers at
once.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from ads.common.clock import Clock

log = logging.getLogger("ads.coordinator")

R = TypeVar("R")


class TimerHandle:
    __slots__ = ("deadline_ms", "cancelled")

    def __init__(self, deadline_ms: int) -> None:
        self.deadline_ms = deadline_ms
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers(Generic[R]):
    """Not thread-safe: the broker's event loop only."""

    def __init__(self, clock: Clock, on_schedule: Callable[[int], None] | None = None) -> None:
        """`on_schedule(deadline_ms)` is called for every timer scheduled."""
        self.clock = clock
        self._heap: list[tuple[int, int, TimerHandle, Callable[[], Iterable[R] | None]]] = []
        self._seq = itertools.count()
        self._on_schedule = on_schedule

    def schedule(self, delay_ms: int, fn: Callable[[], Iterable[R] | None]) -> TimerHandle:
        handle = TimerHandle(self.clock.time_ms() + max(delay_ms, 0))
        heapq.heappush(self._heap, (handle.deadline_ms, next(self._seq), handle, fn))
        if self._on_schedule is not None:
            self._on_schedule(handle.deadline_ms)
        return handle

    def next_deadline_ms(self) -> int | None:
        """The deadline of the earliest live timer, None when there is none."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run_due(self) -> list[R]:
        """Runs every timer whose deadline has passed; returns what they asked for."""
        now = self.clock.time_ms()
        out: list[R] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, handle, fn = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            handle.cancelled = True
            try:
                effects = fn()
            except Exception:
                log.exception("coordinator timer failed")
                continue
            if effects is not None:
                out.extend(effects)
        return out

    def cancel_all(self) -> None:
        for _, _, handle, _ in self._heap:
            handle.cancel()
        self._heap.clear()

    def __len__(self) -> int:
        return sum(1 for _, _, h, _ in self._heap if not h.cancelled)
