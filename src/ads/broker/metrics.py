"""The counters the request path keeps for `/metrics`: plain integers, added to in place.

Only what cannot be read from the broker's state later is counted here: requests per API
and version, their latency in Kafka's phases (queue time: received until the dispatcher
starts on it; local and remote time: decoded until the response is encoded, purgatory
waits included; send time: handed to the transport until written), and per topic the
bytes and records produced, the bytes fetched and the failed produces and fetches.
Everything else (log sizes, offsets, ISR, groups, lag, purgatories, the cleaner) is read at
scrape time by `ads.broker.http.collector`, so it costs the hot path nothing.

Why not prometheus_client's Counter and Histogram here: each `labels(...).inc()` takes a
lock and looks the label tuple up, several times the cost of a dict add, on every request
and partition. These counters are owned by the event loop (not thread-safe, and need not
be: every writer and the scrape run on the loop) and turned into metric families when
scraped. Costs are per request and per partition of a request, never per record.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Upper bounds (seconds) of the request-latency buckets, Prometheus' defaults stretched
# down to 100 µs: most requests of a local broker take well under a millisecond.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0)

# Indices into a topic's counter list.
BYTES_IN, MESSAGES_IN, PRODUCE_REQUESTS, FAILED_PRODUCE = 0, 1, 2, 3
BYTES_OUT, FETCH_REQUESTS, FAILED_FETCH, REPLICATION_BYTES_OUT = 4, 5, 6, 7
_TOPIC_COUNTERS = 8
# What produces to topics that do not exist are counted under.
UNKNOWN_TOPIC = "(unknown)"


@dataclass(slots=True)
class LatencyHistogram:
    """Counts per bucket of `LATENCY_BUCKETS_S` (the last one: above every bound)."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    sum_s: float = 0.0

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus' buckets: (upper bound, count at or below it), ending with +Inf."""
        out, total = [], 0
        for bound, count in zip((*map(str, LATENCY_BUCKETS_S), "+Inf"), self.counts,
                                strict=True):
            total += count
            out.append((bound, total))
        return out


class BrokerMetrics:
    """Counters of one broker, written by the dispatcher and the produce/fetch handlers."""

    def __init__(self) -> None:
        # api_key << 16 | version -> requests answered (or failed) since start
        self.requests: dict[int, int] = {}
        # by api_key: decode to encoded response, received to decode, send
        self.latency: dict[int, LatencyHistogram] = {}
        self.queue_time: dict[int, LatencyHistogram] = {}
        self.send_time: dict[int, LatencyHistogram] = {}
        self.topics: dict[str, list[int]] = {}  # by topic: the counters indexed above

    def request_done(self, api_key: int, version: int, elapsed_s: float,
                     queued_s: float) -> None:
        key = api_key << 16 | version
        self.requests[key] = self.requests.get(key, 0) + 1
        _observe(self.latency, api_key, elapsed_s)
        _observe(self.queue_time, api_key, queued_s)

    def response_sent(self, api_key: int, elapsed_s: float) -> None:
        """The network layer's `on_sent`: a response of `api_key` took this to send."""
        _observe(self.send_time, api_key, elapsed_s)

    def topic(self, name: str) -> list[int]:
        """The topic's counters, made on first use; callers add to them in place."""
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = [0] * _TOPIC_COUNTERS
        return counters

    def forget_topic(self, name: str) -> None:
        self.topics.pop(name, None)


def _observe(histograms: dict[int, LatencyHistogram], api_key: int, seconds: float) -> None:
    hist = histograms.get(api_key)
    if hist is None:
        hist = histograms[api_key] = LatencyHistogram()
    hist.counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
    hist.sum_s += seconds
