"""The name of one partition of one topic, as every layer of the broker keys it.

A named tuple rather than a dataclass: one is built per partition of every produce and fetch
request, and a tuple is the cheapest immutable, hashable key Python has. It hashes and compares
as the plain ``(topic, partition)`` tuple, so a dict keyed by it answers lookups with plain
tuples too, and it unpacks as one (``topic, index = tp``). ``str(tp)`` is ``topic-partition``,
Kafka's spelling in logs and directory names.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
