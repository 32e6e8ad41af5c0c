"""Values derived from one topic's metadata, kept until the metadata changes.

The Metadata handler keeps each topic's built response entry here (building a
1,000-partition entry took a third of a Metadata request). An entry is valid while the
store's `version` (bumped by every change) and the topic's state object are the ones it was
built from; the values are opaque to this layer. Used from the event loop only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ads.metadata.model import TopicState

T = TypeVar("T")


class TopicCache(Generic[T]):
    __slots__ = ("_version", "_entries")

    def __init__(self, version: Callable[[], int]) -> None:
        self._version = version
        self._entries: dict[str, tuple[int, TopicState, T]] = {}

    def get(self, topic: TopicState) -> T | None:
        hit = self._entries.get(topic.name)
        if hit is not None and hit[0] == self._version() and hit[1] is topic:
            return hit[2]
        return None

    def put(self, topic: TopicState, value: T, live_topics: int) -> None:
        """Keeps `value` for `topic`; entries of deleted topics go once they outnumber the
        `live_topics` several times over."""
        if len(self._entries) > 4 * live_topics + 16:
            self._entries.clear()
        self._entries[topic.name] = (self._version(), topic, value)

    def __len__(self) -> int:
        return len(self._entries)
