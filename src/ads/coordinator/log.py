"""The narrow view a coordinator has of its internal topic and of the topic metadata.

The broker implements `CoordinatorLog` over `__consumer_offsets`; tests implement it over
in-memory lists. Everything is called on the broker's event loop thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Protocol

from ads.protocol.errors import ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"


class AppendError(Exception):
    """An append to the internal topic failed; `code` is the partition's Kafka error."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code


class CoordinatorLog(Protocol):
    def partition_count(self) -> int:
        """Partitions of the internal topic (the configured count before it exists)."""
        ...

    def exists(self) -> bool:
        """Whether the internal topic has been created."""
        ...

    def ensure_created(self) -> None:
        """Creates the internal topic on first use; a no-op once it exists."""
        ...

    def append(self, partition: int, batch: bytes) -> int:
        """Appends one record batch; returns its base offset or raises `AppendError`."""
        ...

    def read_batches(self, partition: int) -> Iterator[bytes]:
        """Every batch of the partition from its log start offset, in offset order."""
        ...

    def topic_partitions(self, topic: str) -> int | None:
        """Partition count of a topic, None if it does not exist."""
        ...

    def topic_id(self, topic: str) -> uuid.UUID | None:
        ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        ...

    def topic_names(self) -> list[str]:
        """Names of all topics but the internal ones."""
        ...


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, wrapping at 32 bits."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of a group, as Kafka computes it."""
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0.
    return (0 if h == -(1 << 31) else abs(h)) % partitions
