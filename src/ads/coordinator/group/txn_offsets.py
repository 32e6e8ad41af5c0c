"""Offsets committed inside a transaction (TxnOffsetCommit), pending until its marker.

A transactional producer commits its consumer's offsets with TxnOffsetCommit; the
coordinator writes them to `__consumer_offsets` as a transactional batch carrying the
producer's id and epoch (the records are ordinary offset commits, `records.py`), and keeps
them here, by producer id, invisible to OffsetFetch. When the transaction ends, the marker
written to this `__consumer_offsets` partition (WriteTxnMarkers) decides: COMMIT moves them
into the offset cache, ABORT drops them. Loading does the same from the log: the records of
a transactional batch are pending until the producer's next marker.

OffsetFetch with `require_stable` (v7+, what read_committed consumers send) answers
UNSTABLE_OFFSET_COMMIT for a partition with a pending offset, so a consumer does not start
from an offset its producer may still abort. Not thread-safe: the broker's event loop only.
"""

from __future__ import annotations

from ads.common.partitions import TopicPartition
from ads.coordinator.group.api import CommittedOffset

GroupPartition = tuple[str, TopicPartition]


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._by_producer: dict[int, dict[GroupPartition, CommittedOffset]] = {}

    def add(self, producer_id: int, group: str, tp: TopicPartition,
            committed: CommittedOffset) -> None:
        self._by_producer.setdefault(producer_id, {})[(group, tp)] = committed

    def end(self, producer_id: int) -> dict[GroupPartition, CommittedOffset]:
        """The transaction of `producer_id` ended: its offsets, forgotten here."""
        return self._by_producer.pop(producer_id, {})

    def pending(self, group: str, tp: TopicPartition) -> bool:
        return any((group, tp) in offsets for offsets in self._by_producer.values())

    def has_group(self, group: str) -> bool:
        return any(g == group for offsets in self._by_producer.values() for g, _ in offsets)

    def clear(self) -> None:
        self._by_producer.clear()
