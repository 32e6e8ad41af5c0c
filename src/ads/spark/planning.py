"""Driver-side planning: which partitions a query reads and the offset range of each.

Everything is resolved to concrete offsets on the driver (earliest, latest and timestamps
become numbers) before tasks are planned, so a task only fetches ``[start, end)`` and a
replayed task reads exactly the same records.

Spark's connector semantics kept here:

- Offset JSON (``startingOffsets`` and the by-timestamp forms) must name every partition
  the query reads; -2 means earliest and -1 latest.
- A timestamp resolves to the first offset whose timestamp is at or after it. When there is
  none, a starting timestamp follows ``startingOffsetsByTimestampStrategy`` (``error``
  fails, ``latest`` starts at the end) and an ending timestamp means latest.
- ``minPartitions`` splits the ranges in proportion to their sizes so that at least that
  many tasks run, never splitting a range into pieces smaller than needed.
- ``maxOffsetsPerTrigger`` is shared among partitions in proportion to their backlog,
  giving every partition with a backlog at least one record.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ads.protocol.errors import ErrorCode
from ads.spark.columns import decode_fetched
from ads.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptionError, SourceOptions
from ads.spark.wire import Cluster, TopicPartition

__all__ = [
    "DataLossError",
    "OffsetRange",
    "Planner",
    "from_json_offsets",
    "rate_limit",
    "split_ranges",
    "to_json_offsets",
]

log = logging.getLogger(__name__)

_TIMESTAMP_SCAN_FETCHES = 16

DATA_LOSS_ADVICE = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data "
    "in the topic was processed. If you don't want your query to fail on such cases, set "
    'the source option "failOnDataLoss" to "false".')


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deletion, truncation) and
    ``failOnDataLoss`` is true."""


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Offsets as Spark's Kafka source writes them in a checkpoint."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json_offsets(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(str(t), int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}


def report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise DataLossError(f"{message}. {DATA_LOSS_ADVICE}")
    log.warning("%s. Some data may have been lost; failOnDataLoss is false, continuing.",
                message)


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None
                 ) -> list[OffsetRange]:
    """One range per partition, or more when ``min_partitions`` asks for more tasks; empty
    ranges are dropped."""
    kept = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(kept) >= min_partitions:
        return kept
    ideal = sum(r.size for r in kept) / min_partitions
    out: list[OffsetRange] = []
    for r in kept:
        parts = max(round(r.size / ideal), 1)
        remaining = r.size
        start = r.start
        for part in range(parts):
            # Integer shares; the last piece absorbs the rounding.
            share = remaining // (parts - part)
            remaining -= share
            end = min(start + share, r.end)
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """End offsets admitting at most about ``limit`` records, shared by backlog."""
    backlog = {tp: end - start.get(tp, end) for tp, end in latest.items()}
    backlog = {tp: size for tp, size in backlog.items() if size > 0}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        size = backlog.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = limit * size / total
        # A small partition still advances, or it would starve behind large ones.
        admitted = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start[tp] + admitted)
    return out


class Planner:
    """Resolves a source's subscription and offset specifications against a cluster."""

    def __init__(self, options: SourceOptions, cluster: Cluster) -> None:
        self.options = options
        self.cluster = cluster

    def partitions(self) -> list[TopicPartition]:
        o = self.options
        if o.strategy == "subscribePattern":
            self.cluster.refresh(None)
            pattern = re.compile(o.pattern)
            return sorted(
                TopicPartition(t, p.partition)
                for t, ps in self.cluster.topics.items()
                if not t.startswith("__") and pattern.fullmatch(t) for p in ps)
        if o.strategy == "subscribe":
            self.cluster.refresh(o.topics)
            out: list[TopicPartition] = []
            for topic in o.topics:
                parts = self.cluster.partitions(topic)
                if not parts:
                    self._missing(topic)
                out.extend(TopicPartition(topic, p) for p in parts)
            return sorted(out)
        topics = sorted({t for t, _ in o.assign})
        self.cluster.refresh(topics)
        out = []
        for topic, partition in o.assign:
            if partition not in self.cluster.partitions(topic):
                self._missing(topic, partition)
                continue
            out.append(TopicPartition(topic, partition))
        return sorted(out)

    def _missing(self, topic: str, partition: int | None = None) -> None:
        error = self.cluster.topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        what = f"topic {topic}" if partition is None else f"{topic}-{partition}"
        report_data_loss(self.options.fail_on_data_loss,
                         f"Cannot read {what}: {error.name}")

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: EARLIEST for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: LATEST for tp in tps})

    def _list(self, wanted: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not wanted:
            return {}
        answers = self.cluster.list_offsets(wanted, read_committed=self.options.read_committed)
        return {tp: offset for tp, (offset, _) in answers.items()}

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], *, starting: bool
                ) -> dict[TopicPartition, int]:
        """Concrete offsets for one end of the range."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        name = self._option_name(spec, starting)
        if spec.kind in ("offsets", "timestamps"):
            given = {TopicPartition(t, p): v for t, p, v in spec.offsets}
            if set(given) != set(tps):
                raise SourceOptionError(
                    f"If {name} contains specific offsets, you must specify all "
                    f"TopicPartitions. Use -1 for latest, -2 for earliest. Specified: "
                    f"{_names(given)} Assigned: {_names(tps)}")
        else:
            given = {tp: spec.timestamp for tp in tps}
        if spec.kind == "offsets":
            symbolic = {tp: v for tp, v in given.items() if v in (EARLIEST, LATEST)}
            resolved = self._list(symbolic)
            return {tp: resolved.get(tp, v) for tp, v in given.items()}
        answers = self.cluster.list_offsets(given, read_committed=self.options.read_committed)
        answers = {tp: (self._first_at_or_after(tp, offset, given[tp]), ts)
                   for tp, (offset, ts) in answers.items()}
        out = {}
        unmatched = [tp for tp, (offset, _) in answers.items() if offset < 0]
        if unmatched and starting and self.options.by_timestamp_strategy == "error":
            tp = unmatched[0]
            raise SourceOptionError(
                f"No offset matched from request of topic-partition {tp} and timestamp "
                f"{given[tp]} (option {name}). Set startingOffsetsByTimestampStrategy to "
                "'latest' to start such partitions at their end instead.")
        latest = self.latest(unmatched)
        for tp, (offset, _) in answers.items():
            out[tp] = offset if offset >= 0 else latest[tp]
        return out

    def _first_at_or_after(self, tp: TopicPartition, offset: int, timestamp: int) -> int:
        """The first offset at or after ``offset`` whose record timestamp is at least
        ``timestamp``, or -1. Kafka's ListOffsets answers exactly that; a broker that
        answers at batch granularity (the batch's base offset) is refined here by reading
        from the offset it gave."""
        if offset < 0:
            return offset
        pos = offset
        for _ in range(_TIMESTAMP_SCAN_FETCHES):
            conn = self.cluster.send_fetch(tp, pos, max_bytes=1 << 20, max_wait_ms=0,
                                           read_committed=self.options.read_committed)
            fetched = self.cluster.receive_fetch(conn)
            if fetched.error != ErrorCode.NONE:
                return offset
            chunk = decode_fetched(fetched.records, topic=tp.topic, partition=tp.partition,
                                   start=pos, end=1 << 62, include_headers=False)
            if chunk.batch is not None:
                stamps = chunk.batch.column("timestamp").cast(pa.int64()).to_numpy()
                hits = np.flatnonzero(stamps >= timestamp * 1000)
                if hits.size:
                    return int(chunk.batch.column("offset")[int(hits[0])].as_py())
            if chunk.next_offset <= pos:
                return -1
            pos = chunk.next_offset
        return pos

    @staticmethod
    def _option_name(spec: OffsetSpec, starting: bool) -> str:
        end = "starting" if starting else "ending"
        return {"offsets": f"{end}Offsets", "timestamps": f"{end}OffsetsByTimestamp",
                "timestamp": f"{end}Timestamp"}.get(spec.kind, f"{end}Offsets")

    def batch_ranges(self) -> list[OffsetRange]:
        """The ranges of a batch query, split for ``minPartitions``."""
        tps = self.partitions()
        if not tps:
            return []
        starts = self.resolve(self.options.starting, tps, starting=True)
        ends = self.resolve(self.options.ending, tps, starting=False)
        ranges = []
        for tp in tps:
            start, end = starts[tp], ends[tp]
            if start > end:
                raise SourceOptionError(
                    f"Beginning offset {start} is after the ending offset {end} for topic "
                    f"{tp.topic} partition {tp.partition}. You either provided an invalid "
                    "fromOffset, or the Kafka topic has been damaged")
            ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
        return split_ranges(ranges, self.options.min_partitions)


def _names(tps: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(tps)) + "]"
