"""Numbers for the benchmarks: percentiles, rates, and a sampler of a process's CPU and memory.

The sampler reads `/proc/<pid>/stat` (user + system CPU time) and `/proc/<pid>/status`
(`VmRSS`) in a daemon thread, so it needs no dependency and costs the measured process
nothing. On a system without `/proc` it reports nothing rather than failing the run.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PERCENTILES = (50.0, 95.0, 99.0, 99.9)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values (NaN for none)."""
    if not sorted_values:
        return math.nan
    rank = math.ceil(pct / 100.0 * len(sorted_values))
    return float(sorted_values[min(max(rank, 1), len(sorted_values)) - 1])


def pct_key(pct: float) -> str:
    return f"p{pct:g}"


def latency_summary(values_s: Sequence[float]) -> dict[str, float | None]:
    """avg, p50, p95, p99, p99.9 and max of latencies given in seconds, reported in ms."""
    if not values_s:
        return {"avg": None, **{pct_key(p): None for p in PERCENTILES}, "max": None}
    ordered = sorted(values_s)
    out: dict[str, float | None] = {"avg": _ms(sum(ordered) / len(ordered))}
    for p in PERCENTILES:
        out[pct_key(p)] = _ms(percentile(ordered, p))
    out["max"] = _ms(ordered[-1])
    return out


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 4)


def rate(count: float, elapsed_s: float) -> float:
    return count / elapsed_s if elapsed_s > 0 else 0.0


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


class Progress:
    """A progress line on stderr at most every `interval_s` (the tools' running report)."""

    def __init__(self, label: str, enabled: bool, interval_s: float = 2.0) -> None:
        self._label = label
        self._enabled = enabled
        self._interval = interval_s
        self._start = self._last = time.monotonic()
        self._last_count = 0

    def update(self, count: int, extra: str = "") -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._last < self._interval:
            return
        window = rate(count - self._last_count, now - self._last)
        print(f"{self._label}: {count} records, {window:,.0f} records/s{extra}",
              file=sys.stderr, flush=True)
        self._last, self._last_count = now, count


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    cpu_s: float  # user + system CPU seconds used during the sampling
    rss_max_mb: float
    rss_end_mb: float
    wall_s: float

    @property
    def cpu_percent(self) -> float:
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"cpu_s": round(self.cpu_s, 3), "cpu_percent": round(self.cpu_percent, 1),
                "rss_max_mb": round(self.rss_max_mb, 1), "rss_end_mb": round(self.rss_end_mb, 1),
                "wall_s": round(self.wall_s, 3)}


def cpu_times(pid: int) -> tuple[float, float] | None:
    """The process's user and system CPU seconds so far; None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; fields resume after the last ')'.
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[11]) / _TICKS, int(fields[12]) / _TICKS


def cpu_seconds(pid: int) -> float | None:
    times = cpu_times(pid)
    return None if times is None else times[0] + times[1]


def _status_mb(pid: int, field: str) -> float | None:
    try:
        with Path(f"/proc/{pid}/status").open() as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def rss_mb(pid: int) -> float | None:
    """The process's resident memory now (the kernel's VmRSS)."""
    return _status_mb(pid, "VmRSS:")


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident memory since it started (the kernel's VmHWM)."""
    return _status_mb(pid, "VmHWM:")


def total(values: Iterable[float | None]) -> float | None:
    """The sum of per-process figures, or None if any process could not be read (gone,
    or not Linux)."""
    summed = 0.0
    for value in values:
        if value is None:
            return None
        summed += value
    return summed


class ResourceSampler:
    """Samples the CPU time and resident memory of a broker's processes while a workload
    runs: one process, or every process of a cluster (their sums)."""

    def __init__(self, *pids: int, interval_s: float = 0.1) -> None:
        self._pids = pids
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rss_max = 0.0
        self._cpu_start: float | None = None
        self._t_start = 0.0

    def start(self) -> ResourceSampler:
        self._cpu_start = self._cpu()
        self._t_start = time.monotonic()
        self._sample_rss()
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)
        self._thread.start()
        return self

    def _cpu(self) -> float | None:
        return total(cpu_seconds(pid) for pid in self._pids)

    def _sample_rss(self) -> float | None:
        rss = total(rss_mb(pid) for pid in self._pids)
        if rss is not None and rss > self._rss_max:
            self._rss_max = rss
        return rss

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample_rss()

    def stop(self) -> ResourceUsage | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        wall = time.monotonic() - self._t_start
        cpu_end = self._cpu()
        rss_end = self._sample_rss()
        if self._cpu_start is None or cpu_end is None or rss_end is None:
            return None
        return ResourceUsage(cpu_end - self._cpu_start, self._rss_max, rss_end, wall)
