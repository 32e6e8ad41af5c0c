"""The streaming reader of the ``ads`` source (``spark.readStream.format("ads")``).

Offsets are Spark's Kafka-source JSON, ``{"topic": {"partition": next_offset}}``, which is
what the checkpoint's offset log holds; a query restarted from its checkpoint resumes at the
logged offsets and replays a logged batch over exactly the logged range, so there are no
duplicates and no gaps.

Rules (after Spark's ``KafkaMicroBatchStream``):

- The starting point of a fresh query is resolved on the first ``initialOffset`` call and
  kept: PySpark may call it more than once, and a moving ``latest`` must not move the start
  of batch 0 between calls. A Python source cannot write to the checkpoint, so a query
  restarted before batch 0 committed resolves its start again; if that start is past
  batch 0's logged end, batch 0 is replayed empty instead of failing as data loss.
- Partitions that appear later start at their earliest offset; partitions that disappear,
  and offsets that move backwards, are data loss (``failOnDataLoss``).
- Admission control: ``maxOffsetsPerTrigger`` is the default read limit, shared among
  partitions by backlog; ``minOffsetsPerTrigger`` holds a trigger back until that many
  records wait or ``maxTriggerDelay`` has passed since the last batch. An engine request to
  read everything (``ReadAllAvailable``) overrides both, as Spark requires.
- ``Trigger.AvailableNow`` fixes the end offsets when the query starts; later data waits
  for the next run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ads.spark.options import SourceOptions
from ads.spark.planning import (
    OffsetRange,
    Planner,
    from_json_offsets,
    rate_limit,
    report_data_loss,
    split_ranges,
    to_json_offsets,
)
from ads.spark.reader import FetchSettings, RangePartition, read_partition
from ads.spark.wire import Cluster, KafkaWireError, TopicPartition

__all__ = ["AdsStreamReader"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Offsets = dict[TopicPartition, int]


class AdsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._initial: dict[str, dict[str, int]] | None = None
        self._target: Offsets | None = None
        self._last_trigger = time.monotonic()
        self._cluster: Cluster | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cluster"] = None  # sockets stay in the process that opened them
        return state

    def _plan(self, fn: Callable[[Planner], T]) -> T:
        """Runs ``fn`` with a planner on a kept connection, reconnecting once if the
        connection went stale between triggers."""
        for attempt in (0, 1):
            if self._cluster is None:
                self._cluster = Cluster(self.options.bootstrap_servers,
                                        client_id=self.options.client_id,
                                        timeout_s=self.options.request_timeout_ms / 1000,
                                        security=dict(self.options.security))
            try:
                return fn(Planner(self.options, self._cluster))
            except KafkaWireError:
                self._cluster.close()
                self._cluster = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def initialOffset(self) -> dict[str, dict[str, int]]:  # noqa: N802 - PySpark's name
        if self._initial is None:
            def resolve(planner: Planner) -> Offsets:
                tps = planner.partitions()
                return planner.resolve(self.options.starting, tps, starting=True)
            self._initial = to_json_offsets(self._plan(resolve))
        return self._initial

    def _moving_start(self) -> bool:
        """Whether the starting point depends on when it is resolved."""
        spec = self.options.starting
        return spec.kind != "earliest" and not (
            spec.kind == "offsets" and all(o >= 0 for *_, o in spec.offsets))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - PySpark's name
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - PySpark's name
        self._target = self._plan(lambda p: p.latest(p.partitions()))

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:  # noqa: N802
        return to_json_offsets(self._plan(lambda p: p.latest(p.partitions())))

    def latestOffset(self, start: dict[str, dict[str, int]],  # noqa: N802 - PySpark's name
                     limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = from_json_offsets(start)
        latest = self._plan(lambda p: p.latest(p.partitions()))
        new = [tp for tp in latest if tp not in begin]
        if new:
            begin.update(self._plan(lambda p: p.earliest(new)))
        if self._target is not None:
            # Partitions created after the AvailableNow run began have nothing to read in it.
            latest = {tp: min(end, self._target.get(tp, begin[tp]))
                      for tp, end in latest.items()}
        if isinstance(limit, ReadAllAvailable):
            self._last_trigger = time.monotonic()
            return to_json_offsets(latest)
        if self.options.min_offsets_per_trigger is not None and self._delay(begin, latest):
            return start
        self._last_trigger = time.monotonic()
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else \
            self.options.max_offsets_per_trigger
        if cap is None:
            return to_json_offsets(latest)
        return to_json_offsets(rate_limit(begin, latest, cap))

    def _delay(self, begin: Offsets, latest: Offsets) -> bool:
        assert self.options.min_offsets_per_trigger is not None
        waiting = sum(max(end - begin.get(tp, end), 0) for tp, end in latest.items())
        if waiting >= self.options.min_offsets_per_trigger:
            return False
        elapsed_ms = (time.monotonic() - self._last_trigger) * 1000
        return elapsed_ms < self.options.max_trigger_delay_ms

    def partitions(self, start: dict[str, dict[str, int]],
                   end: dict[str, dict[str, int]]) -> list[InputPartition]:
        begin, until = from_json_offsets(start), from_json_offsets(end)
        fail = self.options.fail_on_data_loss
        for tp in sorted(set(begin) - set(until)):
            report_data_loss(fail, f"{tp} is gone")
        new = [tp for tp in until if tp not in begin]
        if new:
            earliest = self._plan(lambda p: p.earliest(new))
            for tp in new:
                if earliest[tp] > 0:
                    report_data_loss(fail, f"Added partition {tp} starts from "
                                           f"{earliest[tp]} instead of 0")
            begin.update(earliest)
        replaying_first_batch = start == self._initial and self._moving_start()
        ranges = []
        for tp, stop in sorted(until.items()):
            first = begin[tp]
            if stop < first and replaying_first_batch:
                # Batch 0 logged by an earlier run of this query, whose start ("latest", a
                # timestamp) was resolved then and has moved since: read nothing more of
                # it rather than fail, as nothing in the checkpoint says where it began.
                log.warning("%s: batch 0 ends at %d, before the re-resolved start %d",
                            tp, stop, first)
                first = stop
            if stop < first:
                report_data_loss(fail, f"Partition {tp}'s offset was changed from {first} to "
                                       f"{stop}")
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, first, stop))
        settings = FetchSettings.from_options(self.options)
        return [RangePartition(r, settings)
                for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to do: positions live in Spark's checkpoint, not on the broker."""

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
