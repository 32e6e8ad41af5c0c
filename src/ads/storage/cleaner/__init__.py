"""Log compaction (Kafka's log cleaner) for topics with ``cleanup.policy=compact``.

Theory of operation. A compacted log keeps at least the last record of every key. Its
segments below the **first dirty offset** form the *clean tail* (already compacted); from
there to the **first uncleanable offset** lies the *dirty head*; the active segment, records
above the high watermark or inside open transactions, and segments holding records younger
than ``min.compaction.lag.ms`` are never touched. A pass:

1. maps each key of the dirty head to its last offset (``offset_map.OffsetMap``: a fixed-size
   open-addressing table of 20-byte slots, at most 24 bytes per entry);
2. rewrites the log from its start to the end of the mapped range, group by group, dropping
   every record whose key appears later, expired tombstones and keyless records
   (``filter.BatchFilter``), keeping offsets, order and batch boundaries;
3. swaps each rewritten group in crash-safely (``.cleaned`` -> ``.swap`` -> live, the old
   segments renamed ``.deleted``), so at any instant a crash recovers to the old or the new
   segments (``ads.storage.loader``);
4. moves the first dirty offset (``cleaner-offset-checkpoint``) to the end of the mapped range.

Tombstones survive ``delete.retention.ms`` after the pass that first cleaned them, which
writes the delete horizon into their batch (attribute bit 6, ``hasDeleteHorizonMs``).
Transaction markers survive while records of their transaction do, and then
``delete.retention.ms`` more the same way (``txn_markers``).

Modules: ``offset_map``, ``filter`` (per batch), ``txn_markers`` (which markers go),
``cleaner`` (one pass over one log), ``log_cleaner`` (threads, choice of log, checkpoint,
metrics), ``throttler`` (``log.cleaner.io.max.bytes.per.second``), ``bench`` (throughput).
"""

from ads.storage.cleaner.cleaner import (
    CleanerAbortedError,
    CleanerStats,
    LogToClean,
    clean_log,
    plan_cleaning,
)
from ads.storage.cleaner.log_cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanerConfig,
    CleanerMetrics,
    LogCleaner,
)
from ads.storage.cleaner.offset_map import OffsetMap

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanerAbortedError",
    "CleanerConfig",
    "CleanerMetrics",
    "CleanerStats",
    "LogCleaner",
    "LogToClean",
    "OffsetMap",
    "clean_log",
    "plan_cleaning",
]
