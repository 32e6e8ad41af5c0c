"""The console's plot data: a ring buffer of samples taken on the broker's loop.

Every `console.sample.interval.ms` the sampler records the running totals of records and
bytes produced, bytes fetched by consumers, and each group's total lag. Rates are the
differences of consecutive samples over their time apart, computed when the console asks,
so a sample costs a sum over topics and groups, never a look at the request path. The
buffer holds an hour of samples (at least 60), then drops the oldest.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

from ads.broker import metrics as bm
from ads.broker.http import observed
from ads.broker.http.observed import ObservedBroker

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Sample:
    time_ms: int
    messages_in: int
    bytes_in: int
    bytes_out: int
    lag: dict[str, int]  # group -> total lag over the partitions led here


class Sampler:
    def __init__(self, broker: ObservedBroker, interval_ms: int) -> None:
        self._broker = broker
        self.interval_ms = interval_ms
        self.samples: collections.deque[Sample] = collections.deque(
            maxlen=max(HOUR_MS // max(interval_ms, 1), 60))

    def sample(self) -> None:
        b = self._broker
        messages_in = bytes_in = bytes_out = 0
        for counters in b.metrics.topics.values():
            messages_in += counters[bm.MESSAGES_IN]
            bytes_in += counters[bm.BYTES_IN]
            bytes_out += counters[bm.BYTES_OUT]
        lag = {g.group_id: g.total_lag for g in observed.groups(b)}
        self.samples.append(Sample(b.clock.time_ms(), messages_in, bytes_in, bytes_out, lag))

    def series(self) -> dict[str, Any]:
        """Rates between consecutive samples and each group's lag, for the plots: times in
        seconds since the epoch, as uPlot takes them."""
        samples = list(self.samples)
        times: list[float] = []
        rates: dict[str, list[float]] = {"messages_in": [], "bytes_in": [], "bytes_out": []}
        for before, after in zip(samples, samples[1:], strict=False):
            span_s = max(after.time_ms - before.time_ms, 1) / 1000
            times.append(after.time_ms / 1000)
            rates["messages_in"].append(max(after.messages_in - before.messages_in, 0) / span_s)
            rates["bytes_in"].append(max(after.bytes_in - before.bytes_in, 0) / span_s)
            rates["bytes_out"].append(max(after.bytes_out - before.bytes_out, 0) / span_s)
        groups = sorted({g for s in samples[1:] for g in s.lag})
        lag = {g: [s.lag.get(g) for s in samples[1:]] for g in groups}
        return {"interval_ms": self.interval_ms, "time": times, **rates, "lag": lag}
