"""log.cleaner.io.max.bytes.per.second: the cleaner's shared rate limit."""

from __future__ import annotations

from ads.storage.cleaner.throttler import Throttler


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_cleaner_throttler_holds_the_rate() -> None:
    t = FakeTime()
    throttler = Throttler(1_000_000, monotonic=t.monotonic, sleep=t.sleep)
    start = t.now
    for _ in range(50):
        throttler.maybe_throttle(100_000)  # 5 MB in all, read instantly
    assert 4.9 <= t.now - start <= 5.1
    assert abs(throttler.throttled_s - (t.now - start)) < 1e-9


def test_cleaner_throttler_gives_no_credit_for_idle_time() -> None:
    t = FakeTime()
    throttler = Throttler(1_000_000, monotonic=t.monotonic, sleep=t.sleep)
    t.now += 3600  # an hour without cleaning
    start = t.now
    for _ in range(10):
        throttler.maybe_throttle(100_000)
    assert t.now - start >= 0.99


def test_cleaner_throttler_unlimited_by_default() -> None:
    t = FakeTime()
    throttler = Throttler(1.7976931348623157e308, monotonic=t.monotonic, sleep=t.sleep)
    for _ in range(100):
        throttler.maybe_throttle(1 << 30)
    assert throttler.unlimited and t.slept == []
