"""``log.cleaner.io.max.bytes.per.second``: a shared rate limit on cleaner reads and writes.

Like Kafka's ``Throttler``: bytes are counted over a period; whenever the period's rate
exceeds the limit the caller sleeps long enough to bring it back to the limit, and a period
that has kept to the limit for 300 ms starts over. An idle second ends a period, so idle
time never becomes credit for a burst. All cleaner threads share one throttler, so the limit
is for the whole cleaner.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Throttler"]

_CHECK_INTERVAL_S = 0.3
_MAX_PERIOD_S = 1.0


class Throttler:
    def __init__(
        self,
        bytes_per_second: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if bytes_per_second <= 0:
            raise ValueError(f"a throttle rate must be positive, not {bytes_per_second}")
        self.bytes_per_second = bytes_per_second
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = monotonic()
        self._observed = 0.0
        self.throttled_s = 0.0

    @property
    def unlimited(self) -> bool:
        return self.bytes_per_second >= 1e300  # noqa: PLR2004 - Kafka's Double.MAX_VALUE default

    def maybe_throttle(self, observed: int) -> None:
        """Count ``observed`` bytes; sleep until the rate since the period began is back
        under the limit."""
        if self.unlimited:
            return
        with self._lock:
            now = self._monotonic()
            if now - self._period_start > _MAX_PERIOD_S:
                # After an idle stretch a new period starts: idle time is not credit.
                self._period_start, self._observed = now, 0.0
            self._observed += observed
            elapsed = now - self._period_start
            pause = self._observed / self.bytes_per_second - elapsed
            if pause <= 0 and elapsed >= _CHECK_INTERVAL_S:
                self._period_start, self._observed = now, 0.0
        if pause > 0:
            self.throttled_s += pause
            self._sleep(pause)
