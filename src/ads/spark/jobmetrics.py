"""The ``/metrics`` endpoint of a pipeline job (``ads pipeline table --metrics-listener``):
Prometheus text served from the driver process by prometheus_client's HTTP server, in a
daemon thread of its own.

Gauges per partition, labelled ``topic`` and ``partition``:

- ``ads_pipeline_committed_offset``: the next offset after the last micro-batch in the
  table (the end of its range in Spark's offset log);
- ``ads_pipeline_lag_records``: the partition's last stable offset less that;
- ``ads_pipeline_lag_seconds``: now less the newest timestamp of the records written from
  the partition, 0 when caught up.

For the job: the counters ``ads_pipeline_rows_written_total`` (rows written to the table),
``ads_pipeline_dead_letter_rows_total`` (to the dead-letter table) and
``ads_pipeline_batches_committed_total`` (micro-batches this process wrote), and the gauge
``ads_pipeline_last_batch_duration_seconds`` (the last written micro-batch's collection
and table write, in ``foreachBatch``).

Counters count what this process wrote: a restarted job starts them at 0, as Prometheus
expects of a restarted process. Committed offsets outlive a restart: they are read from the
checkpoint when the job starts. The lag is asked of the cluster when scraped (ListOffsets,
``read_committed``), so micro-batches pay nothing for it; a scrape that cannot reach the
cluster leaves the lag out rather than failing. Partitions the job has not written yet
have no committed offset, hence no lag either.

Thread rule: micro-batches update the figures from the query's thread while scrapes read
them from the server's; one lock guards them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ads.common.servers import parse_servers
from ads.spark.wire import LATEST, Cluster, KafkaWireError, TopicPartition

__all__ = ["JobMetrics", "parse_listener", "serve_metrics", "topic_end_offsets"]

EndOffsets = Callable[[], Mapping[int, int]]


def parse_listener(listener: str) -> tuple[str, int]:
    """``HOST:PORT`` (port 0: any free port); ValueError otherwise."""
    addresses = parse_servers(listener)
    if len(addresses) != 1:
        raise ValueError(f"the metrics listener must be one HOST:PORT, got {listener!r}")
    return addresses[0]


def topic_end_offsets(bootstrap_servers: str, topic: str,
                      security: Mapping[str, str] | None = None) -> EndOffsets:
    """A function asking the cluster for each partition's last stable offset: the end a
    ``read_committed`` job can reach."""

    def ask() -> dict[int, int]:
        with Cluster(bootstrap_servers, timeout_s=5.0, security=security) as cluster:
            cluster.refresh([topic])
            wanted = {TopicPartition(topic, p): LATEST for p in cluster.partitions(topic)}
            answers = cluster.list_offsets(wanted, read_committed=True)
        return {tp.partition: offset for tp, (offset, _) in answers.items()}

    return ask


@dataclass(slots=True)
class _Figures:
    offsets: dict[int, int] = field(default_factory=dict)
    last_timestamps: dict[int, float] = field(default_factory=dict)  # epoch seconds
    rows: int = 0
    dead_letters: int = 0
    batches: int = 0
    last_batch_s: float = 0.0


class JobMetrics(Collector):
    """A job's figures, collected by prometheus_client at each scrape."""

    def __init__(self, topic: str, end_offsets: EndOffsets,
                 clock: Callable[[], float] = time.time) -> None:
        self.topic = topic
        self._end_offsets = end_offsets
        self._clock = clock
        self._lock = threading.Lock()
        self._figures = _Figures()

    def resume(self, offsets: Mapping[int, int]) -> None:
        """The offsets the checkpoint's last committed micro-batch reached."""
        with self._lock:
            self._figures.offsets.update(offsets)

    def batch(self, offsets: Mapping[int, int], *, last_timestamps: Mapping[int, float],
              rows: int, dead_letters: int, seconds: float, written: bool) -> None:
        """A micro-batch is in the table, up to ``offsets``; ``written`` is false for one
        replayed after a restart that the table held already (its rows are not counted
        again)."""
        with self._lock:
            f = self._figures
            f.offsets.update(offsets)
            f.last_timestamps.update(last_timestamps)
            f.rows += rows
            f.dead_letters += dead_letters
            if written:
                f.batches += 1
                f.last_batch_s = seconds

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            f = _Figures(dict(self._figures.offsets), dict(self._figures.last_timestamps),
                         self._figures.rows, self._figures.dead_letters,
                         self._figures.batches, self._figures.last_batch_s)
        labels = ["topic", "partition"]
        committed = GaugeMetricFamily(
            "ads_pipeline_committed_offset",
            "Next offset after the last micro-batch written to the table.", labels=labels)
        for partition, offset in sorted(f.offsets.items()):
            committed.add_metric([self.topic, str(partition)], offset)
        yield committed
        yield from self._lag(f)
        yield CounterMetricFamily("ads_pipeline_rows_written",
                                  "Rows written to the table.", value=f.rows)
        yield CounterMetricFamily("ads_pipeline_dead_letter_rows",
                                  "Rows written to the dead-letter table.",
                                  value=f.dead_letters)
        yield CounterMetricFamily("ads_pipeline_batches_committed",
                                  "Micro-batches written to the table by this process.",
                                  value=f.batches)
        yield GaugeMetricFamily("ads_pipeline_last_batch_duration_seconds",
                                "The last micro-batch's collection and table write.",
                                value=f.last_batch_s)

    def _lag(self, f: _Figures) -> Iterator[Metric]:
        if not f.offsets:
            return
        try:
            ends = self._end_offsets()
        except (KafkaWireError, OSError):
            return
        labels = ["topic", "partition"]
        records = GaugeMetricFamily(
            "ads_pipeline_lag_records",
            "The partition's last stable offset less the committed offset.", labels=labels)
        seconds = GaugeMetricFamily(
            "ads_pipeline_lag_seconds",
            "Now less the newest timestamp of the records written from the partition; 0 "
            "when caught up.", labels=labels)
        now = self._clock()
        for partition, offset in sorted(f.offsets.items()):
            end = ends.get(partition)
            if end is None:
                continue
            behind = max(end - offset, 0)
            records.add_metric([self.topic, str(partition)], behind)
            last = f.last_timestamps.get(partition)
            if behind == 0:
                seconds.add_metric([self.topic, str(partition)], 0.0)
            elif last is not None:
                seconds.add_metric([self.topic, str(partition)], max(now - last, 0.0))
        yield records
        yield seconds


@contextmanager
def serve_metrics(listener: str, metrics: JobMetrics,
                  report: Callable[[str], None]) -> Iterator[tuple[str, int]]:
    """Serves ``metrics`` on ``http://listener/metrics`` while the block runs; yields the
    bound address (the port chosen when ``listener`` asks for port 0)."""
    host, port = parse_listener(listener)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    server, thread = start_http_server(port, host, registry)
    bound = (host, int(server.server_address[1]))
    shown = f"[{host}]" if ":" in host else host
    report(f"metrics on http://{shown}:{bound[1]}/metrics")
    try:
        yield bound
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
