"""The offset manager's cache: the last committed position of each group and partition.

OffsetFetch answers from here. The cache changes only once the record that carries the
change is committed to `__consumer_offsets` (see `records.py` for the layout), and is
rebuilt from that topic when a coordinator partition is loaded. A shard (`shard.py`) keeps
one store for the groups of its partition.

Expiry (`offsets.retention.minutes`, KIP-211): the offsets of a group that has members
never expire, except those of topics its members no longer subscribe to; once the group
is empty, its offsets expire `retention` after it became empty. A group that never had
members (a consumer that assigns partitions itself) expires each offset `retention` after
its commit. An explicit expire timestamp (OffsetCommit v2-v4 retention time) wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ads.common.partitions import TopicPartition
from ads.coordinator.group.api import CommittedOffset
from ads.coordinator.group.records import offset_key, offset_value


class OffsetStore:
    """Committed offsets by group. Not thread-safe: the broker's event loop only."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    def get(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return self._groups.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self._groups.get(group))

    def groups(self) -> Iterator[str]:
        return iter(list(self._groups))

    def put(self, group: str, tp: TopicPartition, committed: CommittedOffset) -> None:
        self._groups.setdefault(group, {})[tp] = committed

    def remove(self, group: str, tp: TopicPartition) -> None:
        offsets = self._groups.get(group)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self._groups[group]

    def expired(self, group: str, now_ms: int, retention_ms: int, empty_since_ms: int | None,
                subscribed: set[str] | None) -> list[TopicPartition]:
        """Partitions of `group` whose offsets have expired at `now_ms`.

        `empty_since_ms` is when the group became empty (None: it has members, or never
        had any); `subscribed` the topics its members subscribe to (None: unknown, or no
        members, so every offset is a candidate).
        """
        out = []
        for tp, c in self.get(group).items():
            if c.expire_timestamp >= 0:
                if now_ms >= c.expire_timestamp:
                    out.append(tp)
                continue
            if subscribed is not None and tp[0] in subscribed:
                continue
            base = c.commit_timestamp if empty_since_ms is None else max(
                empty_since_ms, c.commit_timestamp)
            if now_ms - base >= retention_ms:
                out.append(tp)
        return out


def commit_records(group: str, offsets: Iterable[tuple[TopicPartition, CommittedOffset]]
                   ) -> list[tuple[bytes, bytes | None]]:
    return [(offset_key(group, t, p), offset_value(c)) for (t, p), c in offsets]


def tombstones(group: str, partitions: Iterable[TopicPartition]
               ) -> list[tuple[bytes, bytes | None]]:
    return [(offset_key(group, t, p), None) for t, p in partitions]
