"""The per-topic cache of derived metadata: valid until the store's version moves or the
topic's state object is replaced; entries of deleted topics do not pile up."""

from __future__ import annotations

import uuid

from ads.metadata.cache import TopicCache
from ads.metadata.model import PartitionState, TopicState


def _topic(name: str, partitions: int = 1) -> TopicState:
    return TopicState(name, uuid.uuid4(), [PartitionState(p, 1, 0, [1], [1])
                                           for p in range(partitions)], {})


def test_metadata_cache_hit_until_the_version_moves() -> None:
    version = [3]
    cache: TopicCache[str] = TopicCache(lambda: version[0])
    topic = _topic("t")
    assert cache.get(topic) is None
    cache.put(topic, "entry", live_topics=1)
    assert cache.get(topic) == "entry"
    version[0] += 1  # any change to the metadata
    assert cache.get(topic) is None


def test_metadata_cache_misses_for_a_replaced_topic_state() -> None:
    cache: TopicCache[str] = TopicCache(lambda: 0)
    old = _topic("t")
    cache.put(old, "old", live_topics=1)
    assert cache.get(_topic("t", 2)) is None  # same name, recreated or grown
    assert cache.get(old) == "old"


def test_metadata_cache_drops_entries_of_deleted_topics() -> None:
    cache: TopicCache[int] = TopicCache(lambda: 0)
    for i in range(40):
        cache.put(_topic(f"gone-{i}"), i, live_topics=1)
    assert len(cache) <= 4 * 1 + 16 + 1
