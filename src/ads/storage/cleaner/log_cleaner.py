"""The log cleaner: background threads that compact the logs of ``cleanup.policy=compact``.

Each thread loops: pick the filthiest log, clean it (``ads.storage.cleaner.cleaner``), record
its new first dirty offset, and sleep ``log.cleaner.backoff.ms`` when no log needs cleaning.
A log needs cleaning when its cleanable ratio exceeds ``min.cleanable.dirty.ratio``, when a
dirty record is older than ``max.compaction.lag.ms``, or when the delete horizon of a batch
holding tombstones has passed. Among those the highest ratio goes first; no two threads
clean the same log.

``cleaner-offset-checkpoint`` in each log directory holds, per partition, the first dirty
offset (everything below it has been cleaned)::

    0                      version
    <count>                number of entries
    <topic> <partition> <first dirty offset>

Crash rule: it is written atomically (``ads.storage.checkpoint``) after each pass; a stale
or missing entry only means cleaning more than needed, never less safely (an entry outside
[log start offset, log end offset] is ignored).

Threads never touch a log's in-memory structures directly: choosing a log (which reads
segments, producer state and the high watermark) and swapping segments run through
``run_on_owner`` on the thread that owns the logs (the broker's event loop); reading and
writing segment files runs on the cleaner thread with its own file descriptors. A failure
other than an abort marks the partition uncleanable until restart, as Kafka does.

Each pass logs one line (``CleanerStats.describe``) and updates ``CleanerMetrics``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ads.common.clock import Clock
from ads.common.partitions import TopicPartition
from ads.storage.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from ads.storage.cleaner.cleaner import (
    CleanerAbortedError,
    CleanerStats,
    LogToClean,
    clean_log,
    earliest_delete_horizon,
    plan_cleaning,
)
from ads.storage.cleaner.offset_map import OffsetMap
from ads.storage.cleaner.throttler import Throttler
from ads.storage.errors import CheckpointError
from ads.storage.log import Log
from ads.storage.manager import LogManager

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanerConfig",
    "CleanerMetrics",
    "LogCleaner",
    "OwnerThread",
]

logger = logging.getLogger("ads.storage.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DOUBLE_MAX = 1.7976931348623157e308
_RECENT_PASSES = 100
_OWNER_POLL_S = 0.2

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings, with Kafka's defaults."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134217728
    io_buffer_size: int = 524288
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = DOUBLE_MAX
    backoff_ms: int = 15000

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise ValueError("log.cleaner.threads must be at least 0")
        if not 0.0 < self.io_buffer_load_factor <= 1.0:
            raise ValueError("log.cleaner.io.buffer.load.factor must be in (0, 1]")
        if self.io_max_bytes_per_second <= 0:
            raise ValueError("log.cleaner.io.max.bytes.per.second must be positive")
        if self.backoff_ms < 0:
            raise ValueError("log.cleaner.backoff.ms must be at least 0")

    @property
    def map_memory_per_thread(self) -> int:
        return self.dedupe_buffer_size // max(self.threads, 1)


@dataclass(frozen=True, slots=True)
class CleanerMetrics:
    """Kafka's cleaner metrics (names in comments) plus running totals."""

    passes: int
    bytes_read: int
    bytes_written: int
    messages_read: int
    messages_written: int
    max_buffer_utilization_percent: float  # max-buffer-utilization-percent (last passes)
    cleaner_recopy_percent: float  # cleaner-recopy-percent (last pass)
    max_clean_time_secs: float  # max-clean-time-secs (last passes)
    max_compaction_delay_secs: float  # max-compaction-delay-secs
    dead_thread_count: int  # DeadThreadCount
    uncleanable_partitions_count: int  # uncleanable-partitions-count
    time_since_last_run_ms: int  # time-since-last-run-ms
    aborted_passes: int
    throttled_s: float
    last_pass: CleanerStats | None


class OwnerThread:
    """Runs functions on the thread that owns the logs and waits for the result.

    ``submit`` hands a callable to that thread (``loop.call_soon_threadsafe`` for the broker's
    event loop). Without one, functions run on the calling thread: for callers that own the
    logs themselves (tests, tools). A call not yet started when ``stopping`` becomes true is
    cancelled, so a cleaner thread never waits on an event loop that is shutting down.
    """

    def __init__(
        self,
        submit: Callable[[Callable[[], None]], object] | None,
        stopping: threading.Event,
    ) -> None:
        self._submit = submit
        self._stopping = stopping

    def __call__(self, fn: Callable[[], T]) -> T:
        if self._submit is None:
            return fn()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                future.set_exception(exc)

        try:
            self._submit(run)
        except RuntimeError as exc:  # the loop is closed
            raise CleanerAbortedError("the owner thread is gone") from exc
        while True:
            try:
                return future.result(timeout=_OWNER_POLL_S)
            except concurrent.futures.TimeoutError:
                if self._stopping.is_set() and future.cancel():
                    raise CleanerAbortedError("shutting down") from None


class LogCleaner:
    """Cleaner threads over the logs of one ``LogManager``."""

    def __init__(
        self,
        log_manager: LogManager,
        config: CleanerConfig,
        *,
        clock: Clock,
        submit_to_owner: Callable[[Callable[[], None]], object] | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.config = config
        self.clock = clock
        self._stopping = threading.Event()
        self._wakeup = threading.Event()
        self.run_on_owner = OwnerThread(submit_to_owner, self._stopping)
        self.throttler = Throttler(config.io_max_bytes_per_second, sleep=self._stopping.wait)
        self._lock = threading.Lock()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._in_progress: set[TopicPartition] = set()
        self._uncleanable: set[TopicPartition] = set()
        self._horizons: dict[TopicPartition, int] = {}
        self._horizons_known: set[TopicPartition] = set()
        self._maps: list[OffsetMap] = []
        self._local = threading.local()
        self._threads: list[threading.Thread] = []
        self._dead_threads = 0
        self._recent: deque[CleanerStats] = deque(maxlen=_RECENT_PASSES)
        self._totals = [0, 0, 0, 0, 0]  # passes, bytes read, written, messages read, written
        self._aborted = 0
        self._last_run = time.monotonic()
        self._max_delay_ms = 0
        self._loaded = False

    # ---------------------------------------------------------------------------- lifecycle

    def startup(self) -> None:
        """Load the checkpoints and start ``log.cleaner.threads`` threads (if enabled)."""
        self._load_checkpoints()
        if not self.config.enable:
            return
        for n in range(self.config.threads):
            thread = threading.Thread(
                target=self._run, name=f"kafka-log-cleaner-thread-{n}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        logger.info("started %d log cleaner threads", len(self._threads))

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads; a pass in progress is abandoned between two steps."""
        self._stopping.set()
        self._wakeup.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        self._threads.clear()
        self._maps.clear()

    def wake(self) -> None:
        """Look for work now instead of after the backoff."""
        self._wakeup.set()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                stats = self.clean_once()
                if stats is None:
                    self._wakeup.wait(self.config.backoff_ms / 1000)
                    self._wakeup.clear()
        except Exception:
            with self._lock:
                self._dead_threads += 1
            logger.exception("log cleaner thread died")

    def _thread_map(self) -> OffsetMap:
        """This thread's offset map, allocated at its first pass and reused after."""
        offset_map: OffsetMap | None = getattr(self._local, "offset_map", None)
        if offset_map is None:
            offset_map = OffsetMap(
                self.config.map_memory_per_thread, self.config.io_buffer_load_factor
            )
            self._local.offset_map = offset_map
            with self._lock:
                self._maps.append(offset_map)
        return offset_map

    # ---------------------------------------------------------------------------- cleaning

    def clean_once(self) -> CleanerStats | None:
        """Clean the filthiest log, if one needs it; returns the pass's stats or ``None``.

        Safe from any thread; tests call it directly (with no owner thread, the caller must
        be the thread that owns the logs).
        """
        if not self._loaded:
            self._load_checkpoints()
        plan = self.run_on_owner(self._grab_filthiest_log)
        while plan is None and self._learn_one_horizon():
            plan = self.run_on_owner(self._grab_filthiest_log)
        self._last_run = time.monotonic()
        if plan is None:
            return None
        tp = TopicPartition(plan.log.topic, plan.log.partition)
        try:
            next_dirty, stats = clean_log(
                plan,
                self._thread_map(),
                clock=self.clock,
                run_on_owner=self.run_on_owner,
                throttler=None if self.throttler.unlimited else self.throttler,
                check_abort=self._check_abort,
                io_buffer_size=self.config.io_buffer_size,
            )
        except CleanerAbortedError as exc:
            logger.info("cleaning of %s-%d stopped: %s", tp[0], tp[1], exc)
            with self._lock:
                self._aborted += 1
            return None
        except Exception:
            logger.exception("cleaning %s-%d failed; it is uncleanable until restart", *tp)
            with self._lock:
                self._uncleanable.add(tp)
            return None
        finally:
            with self._lock:
                self._in_progress.discard(tp)
        self._record(plan, next_dirty, stats)
        logger.info("%s", stats.describe())
        return stats

    def _check_abort(self) -> None:
        if self._stopping.is_set():
            raise CleanerAbortedError("shutting down")

    def _grab_filthiest_log(self) -> LogToClean | None:
        """Owner thread: the plan of the log most in need of cleaning, marked in progress."""
        now = self.clock.time_ms()
        best: LogToClean | None = None
        max_delay = 0
        with self._lock:
            busy = self._in_progress | self._uncleanable
            horizons = dict(self._horizons)
        for log in self.log_manager.logs():
            tp = TopicPartition(log.topic, log.partition)
            if not log.config.compact or log.closed or tp in busy:
                continue
            plan = plan_cleaning(
                log, self._checkpoint_of(log), now, pending_horizon_ms=horizons.get(tp)
            )
            max_delay = max(max_delay, plan.max_compaction_delay_ms)
            if not plan.should_clean:
                continue
            if best is None or (plan.must_clean, plan.cleanable_ratio) > (
                best.must_clean,
                best.cleanable_ratio,
            ):
                best = plan
        with self._lock:
            self._max_delay_ms = max_delay
            if best is not None:
                self._in_progress.add(TopicPartition(best.log.topic, best.log.partition))
        return best

    def _learn_one_horizon(self) -> bool:
        """Find the pending delete horizon of one compacted log not cleaned since startup;
        False when every log's is known."""
        picked = self.run_on_owner(self._pick_unknown_horizon)
        if picked is None:
            return False
        tp, files = picked
        try:
            horizon = earliest_delete_horizon(files)
        except Exception:  # noqa: BLE001 - a damaged log is the next pass's business
            logger.warning("cannot read the delete horizons of %s-%d", *tp, exc_info=True)
            horizon = None
        with self._lock:
            self._in_progress.discard(tp)
            self._horizons_known.add(tp)
            if horizon is not None:
                self._horizons.setdefault(tp, horizon)
        return True

    def _pick_unknown_horizon(self) -> tuple[TopicPartition, list[tuple[Path, int]]] | None:
        """Owner thread: the sealed segment files of a log whose horizon is unknown."""
        with self._lock:
            skip = self._in_progress | self._uncleanable | self._horizons_known
        for log in self.log_manager.logs():
            tp = TopicPartition(log.topic, log.partition)
            if not log.config.compact or log.closed or tp in skip:
                continue
            with self._lock:
                self._in_progress.add(tp)
            return tp, [(s.log_path, s.size) for s in log.segments[:-1]]
        return None

    def plan(self, log: Log) -> LogToClean:
        """Owner thread: the current sections and cleanable ratio of ``log``."""
        if not self._loaded:
            self._load_checkpoints()
        with self._lock:
            horizon = self._horizons.get(TopicPartition(log.topic, log.partition))
        return plan_cleaning(log, self._checkpoint_of(log), self.clock.time_ms(),
                             pending_horizon_ms=horizon)

    def cleanable_ratios(self) -> dict[TopicPartition, float]:
        """Owner thread: the cleanable ratio of every compacted log."""
        return {
            TopicPartition(log.topic, log.partition): self.plan(log).cleanable_ratio
            for log in self.log_manager.logs()
            if log.config.compact and not log.closed
        }

    # ---------------------------------------------------------------------- bookkeeping

    def _record(self, plan: LogToClean, next_dirty: int, stats: CleanerStats) -> None:
        tp = TopicPartition(plan.log.topic, plan.log.partition)
        with self._lock:
            self._recent.append(stats)
            totals = self._totals
            totals[0] += 1
            totals[1] += stats.bytes_read
            totals[2] += stats.bytes_written
            totals[3] += stats.messages_read
            totals[4] += stats.messages_written
            self._horizons_known.add(tp)
            if stats.earliest_horizon_ms is None:
                self._horizons.pop(tp, None)
            else:
                self._horizons[tp] = stats.earliest_horizon_ms
            offsets = self._checkpoints.setdefault(plan.directory.parent, {})
            offsets[tp] = next_dirty
        self._write_checkpoint(plan.directory.parent)

    def _checkpoint_of(self, log: Log) -> int | None:
        with self._lock:
            offsets = self._checkpoints.get(log.dir.parent, {})
            return offsets.get(TopicPartition(log.topic, log.partition))

    def _load_checkpoints(self) -> None:
        with self._lock:
            if self._loaded:
                return
            for log_dir in self.log_manager.log_dirs:
                try:
                    self._checkpoints[log_dir] = read_offset_checkpoint(
                        log_dir / CLEANER_OFFSET_CHECKPOINT
                    )
                except CheckpointError as exc:
                    logger.warning("ignoring unreadable cleaner checkpoint: %s", exc)
                    self._checkpoints[log_dir] = {}
            self._loaded = True

    def _write_checkpoint(self, log_dir: Path) -> None:
        live = {TopicPartition(log.topic, log.partition) for log in self.log_manager.logs()}
        with self._lock:
            offsets = self._checkpoints.setdefault(log_dir, {})
            for tp in [tp for tp in offsets if tp not in live]:
                del offsets[tp]  # deleted topics: a new topic of that name starts dirty
            snapshot = dict(offsets)
        write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, snapshot)

    # ------------------------------------------------------------------------------ metrics

    @property
    def metrics(self) -> CleanerMetrics:
        with self._lock:
            recent = list(self._recent)
            last = recent[-1] if recent else None
            recopy = (
                100.0 * last.bytes_written / last.bytes_read if last and last.bytes_read else 0.0
            )
            return CleanerMetrics(
                passes=self._totals[0],
                bytes_read=self._totals[1],
                bytes_written=self._totals[2],
                messages_read=self._totals[3],
                messages_written=self._totals[4],
                max_buffer_utilization_percent=max(
                    (100.0 * s.map_utilization for s in recent), default=0.0
                ),
                cleaner_recopy_percent=recopy,
                max_clean_time_secs=max((s.duration_s for s in recent), default=0.0),
                max_compaction_delay_secs=self._max_delay_ms / 1000,
                dead_thread_count=self._dead_threads,
                uncleanable_partitions_count=len(self._uncleanable),
                time_since_last_run_ms=int((time.monotonic() - self._last_run) * 1000),
                aborted_passes=self._aborted,
                throttled_s=self.throttler.throttled_s,
                last_pass=last,
            )

    @property
    def in_progress(self) -> frozenset[TopicPartition]:
        """Partitions being cleaned right now."""
        with self._lock:
            return frozenset(self._in_progress)

    @property
    def offset_map_memory_bytes(self) -> int:
        """Bytes held by the offset maps allocated so far."""
        with self._lock:
            return sum(m.memory_bytes for m in self._maps)
