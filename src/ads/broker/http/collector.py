"""`/metrics`: the broker's figures as Prometheus metric families, computed when scraped.

Names live in one `ads_` namespace; docs/operations.md maps each to the Kafka MBean it
stands for. Counters kept on the request path come from `ads.broker.metrics`, the share-
partitions' from their state machines (added to per span as spans change state); every gauge
(logs, offsets, ISR, groups and lag, share-partitions, purgatories, connections, the
cleaner) is read from the broker's state at scrape time, so the produce and fetch paths pay
nothing for them.
The scrape runs on the broker's event loop (`ads.net.http` says why).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ads.broker import metrics as bm
from ads.broker.http import observed
from ads.broker.http.observed import ObservedBroker, PartitionView
from ads.common import gc_policy
from ads.coordinator.transaction.state import TxnState
from ads.protocol.messages import ApiKey

_TOPIC_COUNTERS = (
    ("topic_bytes_in", "Bytes of record batches appended by producers.", bm.BYTES_IN),
    ("topic_messages_in", "Records appended by producers.", bm.MESSAGES_IN),
    ("topic_produce_requests", "Partition appends asked for by Produce requests.",
     bm.PRODUCE_REQUESTS),
    ("topic_failed_produce_requests", "Partition appends that failed.", bm.FAILED_PRODUCE),
    ("topic_bytes_out", "Bytes of record batches sent to consumers.", bm.BYTES_OUT),
    ("topic_replication_bytes_out", "Bytes of record batches sent to follower replicas.",
     bm.REPLICATION_BYTES_OUT),
    ("topic_fetch_requests", "Partition reads asked for by Fetch requests.", bm.FETCH_REQUESTS),
    ("topic_failed_fetch_requests", "Partition reads that failed.", bm.FAILED_FETCH),
)


def api_name(api_key: int) -> str:
    """Kafka's request name (`Produce`, `OffsetCommit`), as RequestMetrics tags it."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


class BrokerCollector(Collector):
    def __init__(self, broker: ObservedBroker, http_connections: Callable[[], int]) -> None:
        self._broker = broker
        self._http_connections = http_connections

    def collect(self) -> Iterable[Metric]:
        yield from self._requests()
        yield from self._topics()
        yield from self._network()
        parts = observed.partitions(self._broker)
        yield from self._logs(parts)
        yield from self._replicas(parts)
        yield from self._groups()
        yield from self._share_partitions()
        yield from self._cleaner()
        yield from self._open_files()
        yield from self._transactions()
        yield from _garbage_collector()

    def _requests(self) -> Iterator[Metric]:
        m = self._broker.metrics
        requests = CounterMetricFamily(
            "ads_requests", "Requests answered, per API and version.",
            labels=["request", "version"])
        for key, count in sorted(m.requests.items()):
            requests.add_metric([api_name(key >> 16), str(key & 0xFFFF)], count)
        yield requests
        for name, doc, label, histograms in (
                ("ads_request_duration_seconds", "Time from a decoded request to its encoded "
                 "response (local and purgatory time).", "request", m.latency),
                ("ads_request_queue_time_seconds", "Time from a request fully received to "
                 "the start of its handling (waiting behind its connection's earlier "
                 "requests).", "api", m.queue_time),
                ("ads_request_send_time_seconds", "Time from a response handed to the "
                 "transport to it written (sendfile of record data included).", "api",
                 m.send_time)):
            family = HistogramMetricFamily(name, doc, labels=[label])
            for api_key, hist in sorted(histograms.items()):
                family.add_metric([api_name(api_key)], hist.cumulative(), hist.sum_s)
            yield family

    def _topics(self) -> Iterator[Metric]:
        topics = sorted(self._broker.metrics.topics.items())
        for name, doc, index in _TOPIC_COUNTERS:
            family = CounterMetricFamily(f"ads_{name}", doc, labels=["topic"])
            for topic, counters in topics:
                family.add_metric([topic], counters[index])
            yield family

    def _network(self) -> Iterator[Metric]:
        b = self._broker
        yield GaugeMetricFamily("ads_connections", "Open Kafka client connections.",
                                value=sum(lst.connection_count for lst in b.listeners))
        yield GaugeMetricFamily("ads_http_connections", "Open HTTP connections.",
                                value=self._http_connections())
        purgatory = GaugeMetricFamily(
            "ads_purgatory_size", "Delayed operations waiting, counted once per partition "
            "they watch.", labels=["operation"])
        purgatory.add_metric(["Fetch"], b.replica_manager.fetch_purgatory.watched())
        purgatory.add_metric(["Produce"], b.replica_manager.produce_purgatory.watched())
        yield purgatory
        yield GaugeMetricFamily("ads_broker_ready", "1 once the broker serves requests.",
                                value=1 if b.started else 0)
        limits = b.connection_limits
        yield CounterMetricFamily(
            "ads_connections_refused", "New connections closed at once: max.connections or "
            "max.connections.per.ip reached.", value=limits.refused)
        yield CounterMetricFamily(
            "ads_connections_idle_closed", "Connections closed after "
            "connections.max.idle.ms without a request.", value=limits.idle_closed)
        throttled = CounterMetricFamily(
            "ads_quota_throttled_requests", "Responses throttled for a client over its "
            "quota, per quota.", labels=["quota"])
        throttle_time = CounterMetricFamily(
            "ads_quota_throttle_time_seconds", "Throttle time given to clients over their "
            "quota, per quota.", labels=["quota"])
        for manager in b.quotas.managers:
            throttled.add_metric([manager.key], manager.throttled)
            throttle_time.add_metric([manager.key], manager.throttle_ms_total / 1000.0)
        yield throttled
        yield throttle_time

    def _logs(self, parts: list[PartitionView]) -> Iterator[Metric]:
        local = [p for p in parts if p.size_bytes or p.log_end_offset >= 0]
        for name, doc, attr in (
                ("ads_log_size_bytes", "Bytes of the partition's log on this broker.",
                 "size_bytes"),
                ("ads_log_segments", "Segments of the partition's log.", "segments"),
                ("ads_log_start_offset", "First offset of the partition's log.",
                 "log_start_offset"),
                ("ads_log_end_offset", "Offset the next appended record gets.",
                 "log_end_offset"),
                ("ads_partition_high_watermark", "Offset up to which records are committed.",
                 "high_watermark")):
            family = GaugeMetricFamily(name, doc, labels=["topic", "partition"])
            for p in local:
                family.add_metric([p.topic, str(p.partition)], getattr(p, attr))
            yield family

    def _replicas(self, parts: list[PartitionView]) -> Iterator[Metric]:
        b = self._broker
        node = b.node_id
        rm = b.replica_manager
        led = [p for p in parts if p.leads]
        under_replicated = under_min_isr = 0
        for p in led:
            part = rm.get(p.topic, p.partition)
            isr = part.isr if part is not None and part.isr else list(p.isr)
            if len(isr) < len(p.replicas):
                under_replicated += 1
            if part is not None and len(isr) < part.effective_min_isr:
                under_min_isr += 1
        yield GaugeMetricFamily("ads_partitions", "Partitions with a replica on this broker.",
                                value=sum(1 for p in parts if p.local))
        yield GaugeMetricFamily("ads_leader_partitions", "Partitions this broker leads.",
                                value=len(led))
        yield GaugeMetricFamily("ads_under_replicated_partitions",
                                "Partitions led here whose ISR is smaller than their replicas.",
                                value=under_replicated)
        yield GaugeMetricFamily("ads_under_min_isr_partitions",
                                "Partitions led here whose ISR is below min.insync.replicas.",
                                value=under_min_isr)
        controller = b.metadata.controller_id == node
        yield GaugeMetricFamily("ads_active_controller", "1 on the active controller.",
                                value=1 if controller else 0)
        # As in Kafka, only the active controller reports the cluster's offline partitions,
        # so a sum over brokers counts each once.
        offline = sum(1 for p in parts if p.leader < 0) if controller else 0
        yield GaugeMetricFamily("ads_offline_partitions",
                                "Partitions without a leader (reported by the controller).",
                                value=offline)
        yield GaugeMetricFamily("ads_brokers", "Live brokers in the metadata.",
                                value=len(b.metadata.brokers))
        # Counted by this broker's controller while it was the active one (read across
        # threads: two integers the controller's thread only adds to).
        ctl = b.controller
        yield CounterMetricFamily(
            "ads_leader_elections", "Partition leaders changed by this broker's controller.",
            value=ctl.leader_elections if ctl else 0)
        yield CounterMetricFamily(
            "ads_unclean_leader_elections",
            "Leaders this broker's controller elected from outside the ISR.",
            value=ctl.unclean_leader_elections if ctl else 0)
        yield CounterMetricFamily("ads_isr_shrinks", "ISR shrinks recorded by this leader.",
                                  value=rm.isr_shrinks)
        yield CounterMetricFamily("ads_isr_expands", "ISR expansions recorded by this leader.",
                                  value=rm.isr_expands)
        yield GaugeMetricFamily(
            "ads_replica_fetcher_failed_partitions",
            "Followed partitions no longer fetched after an error of their own log.",
            value=rm.fetchers.failed_partitions() if rm.fetchers is not None else 0)

    def _groups(self) -> Iterator[Metric]:
        views = observed.groups(self._broker)
        states: dict[str, int] = {}
        for g in views:
            states[g.state] = states.get(g.state, 0) + 1
        count = GaugeMetricFamily("ads_groups", "Groups coordinated here, per state.",
                                  labels=["state"])
        for state in ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable",
                      "Assigning", "Reconciling"):
            states.setdefault(state, 0)
        for state, n in sorted(states.items()):
            count.add_metric([state], n)
        yield count
        # One series per group, its state a label (the "info" pattern), for `ads top`.
        group_state = GaugeMetricFamily("ads_group_state", "1 for each group coordinated "
                                        "here, with its state.", labels=["group", "state"])
        for g in views:
            group_state.add_metric([g.group_id, g.state], 1)
        yield group_state
        committed = GaugeMetricFamily(
            "ads_group_committed_offset", "The group's committed offset of the partition.",
            labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily(
            "ads_group_lag", "High watermark minus the committed offset (partitions led here).",
            labels=["group", "topic", "partition"])
        for g in views:
            for o in g.offsets:
                labels = [g.group_id, o.topic, str(o.partition)]
                committed.add_metric(labels, o.committed)
                if o.lag is not None:
                    lag.add_metric(labels, o.lag)
        yield committed
        yield lag

    def _share_partitions(self) -> Iterator[Metric]:
        """Per share group and partition led here; the counters start at 0 each time the
        share-partition is loaded (a new leadership), as Kafka's per-broker counts do."""
        views = observed.share_partitions(self._broker)
        labels = ["group", "topic", "partition"]
        for kind, name, doc, attr in (
                (GaugeMetricFamily, "start_offset", "The share-partition start offset: "
                 "every record below it is acknowledged or archived.", "start_offset"),
                (GaugeMetricFamily, "in_flight_records", "Records between the start and end "
                 "offsets not yet acknowledged or archived (available or acquired).",
                 "in_flight"),
                (GaugeMetricFamily, "acquired_records", "Records acquired by members now.",
                 "acquired"),
                (CounterMetricFamily, "acknowledged_records", "Records accepted, since the "
                 "share-partition was loaded here.", "acknowledged"),
                (CounterMetricFamily, "archived_records", "Records archived (rejected, "
                 "released at the delivery count limit, or of aborted transactions), since "
                 "the share-partition was loaded here.", "archived"),
                (CounterMetricFamily, "redelivered_records", "Records acquired with a "
                 "delivery count above 1, since the share-partition was loaded here.",
                 "redelivered")):
            family = kind(f"ads_share_partition_{name}", doc, labels=labels)
            for v in views:
                family.add_metric([v.group_id, v.topic, str(v.partition)],
                                  getattr(v.counts, attr))
            yield family

    def _open_files(self) -> Iterator[Metric]:
        files = self._broker.log_manager.open_files
        yield GaugeMetricFamily("ads_log_open_files", "Segment files open now, at most "
                                "log.open.files.max (ads.storage.open_files).", value=len(files))
        yield GaugeMetricFamily("ads_log_open_files_limit", "log.open.files.max in force.",
                                value=files.limit)
        yield CounterMetricFamily("ads_log_file_opens", "Segment files opened: first opens "
                                  "and reopens of files closed to make room.", value=files.opens)
        yield CounterMetricFamily("ads_log_file_evictions", "Segment files closed to make "
                                  "room for others.", value=files.evictions)

    def _cleaner(self) -> Iterator[Metric]:
        cleaner = self._broker.log_cleaner
        if cleaner is None:
            return
        m = cleaner.metrics
        for name, doc, value in (
                ("passes", "Cleaning passes finished.", m.passes),
                ("bytes_read", "Bytes read by cleaning passes.", m.bytes_read),
                ("bytes_written", "Bytes written by cleaning passes.", m.bytes_written),
                ("messages_read", "Records read by cleaning passes.", m.messages_read),
                ("messages_written", "Records written by cleaning passes.",
                 m.messages_written),
                ("aborted_passes", "Cleaning passes aborted.", m.aborted_passes)):
            yield CounterMetricFamily(f"ads_log_cleaner_{name}", doc, value=value)
        last = m.last_pass
        for name, doc, gauge in (
                ("max_buffer_utilization_ratio", "Largest offset-map use of recent passes.",
                 m.max_buffer_utilization_percent / 100),
                ("recopy_ratio", "Bytes written over bytes read in the last pass.",
                 m.cleaner_recopy_percent / 100),
                ("max_clean_time_seconds", "Longest pass of recent passes.",
                 m.max_clean_time_secs),
                ("max_compaction_delay_seconds", "Longest wait of a dirty log past its lag.",
                 m.max_compaction_delay_secs),
                ("dead_threads", "Cleaner threads that died.", m.dead_thread_count),
                ("uncleanable_partitions", "Partitions the cleaner gave up on.",
                 m.uncleanable_partitions_count),
                ("time_since_last_run_seconds", "Time since a cleaner thread last looked.",
                 m.time_since_last_run_ms / 1000),
                ("last_dirty_ratio_before", "Dirty ratio of the last cleaned log, before.",
                 last.dirty_ratio_before if last else 0.0),
                ("last_dirty_ratio_after", "Dirty ratio of the last cleaned log, after.",
                 last.dirty_ratio_after if last else 0.0)):
            yield GaugeMetricFamily(f"ads_log_cleaner_{name}", doc, value=gauge)

    def _transactions(self) -> Iterator[Metric]:
        coordinator = self._broker.transaction_coordinator
        states = dict.fromkeys((s.kafka_name for s in TxnState), 0)
        for _, shard in coordinator.runtime.shards():
            for meta in shard.txns.values():
                states[meta.state.kafka_name] += 1
        family = GaugeMetricFamily(
            "ads_transactions", "Transactional ids coordinated here, per state.",
            labels=["state"])
        for state, n in states.items():
            family.add_metric([state], n)
        yield family
        counts = coordinator.counts
        yield CounterMetricFamily("ads_transactions_committed",
                                  "Transactions this coordinator completed as committed.",
                                  value=counts.committed)
        yield CounterMetricFamily("ads_transactions_aborted",
                                  "Transactions this coordinator completed as aborted (ended "
                                  "by the producer, timed out or fenced).",
                                  value=counts.aborted)


def _garbage_collector() -> Iterator[Metric]:
    """The process's collector; pause times where `ads broker` installed its policy."""
    collections = CounterMetricFamily(
        "ads_gc_collections", "Garbage collections of each generation (2: full).",
        labels=["generation"])
    for generation, stats in enumerate(gc.get_stats()):
        collections.add_metric([str(generation)], stats["collections"])
    yield collections
    yield GaugeMetricFamily("ads_gc_frozen_objects", "Objects frozen out of collections.",
                            value=gc.get_freeze_count())
    policy = gc_policy.installed()
    if policy is None:
        return
    pause = CounterMetricFamily("ads_gc_pause_seconds", "Time spent in each generation's "
                                "collections (the event loop waits).", labels=["generation"])
    longest = GaugeMetricFamily("ads_gc_longest_pause_seconds", "The longest collection of "
                                "each generation.", labels=["generation"])
    for generation, (total, most) in enumerate(zip(policy.pause_s, policy.longest_s,
                                                   strict=True)):
        pause.add_metric([str(generation)], total)
        longest.add_metric([str(generation)], most)
    yield pause
    yield longest
