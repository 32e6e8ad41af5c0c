"""Injectable time: retention, segment.ms and flush.ms read a clock, so tests advance it."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def time_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...


class SystemClock:
    """Wall-clock time, as Kafka's ``Time.SYSTEM.milliseconds()``."""

    __slots__ = ()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to."""

    __slots__ = ("_now_ms",)

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms

    def time_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._now_ms += ms
        return self._now_ms

    def set(self, now_ms: int) -> None:
        self._now_ms = now_ms
