"""What a coordinator sees of the broker: its internal topic and the metadata of user topics.

A coordinator keeps its state in a compacted internal topic (`__consumer_offsets` for the
group coordinator, `__transaction_state` for the transaction coordinator) and never imports
the broker or its partitions. The broker hands it an `InternalTopic`, implemented today over
its local partitions (`ads.broker.internal_topics`) and later over the replica manager, and
a `TopicMetadata` view; tests implement both over in-memory lists.

Everything here is called on the broker's event loop thread only.

Keys are routed to partitions as Kafka does, so a client that computes the partition of a
group or transactional id finds the same one: `abs(String.hashCode(key)) % partitions`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import Protocol

from ads.protocol.errors import ErrorCode


class AppendError(Exception):
    """An append to an internal topic failed; `code` is the partition's Kafka error
    (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, MESSAGE_TOO_LARGE, ...), which the runtime
    maps to what the coordinator's client sees."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code


class InternalTopic(Protocol):
    """The internal topic a coordinator runtime keeps its partitions' state in."""

    @property
    def name(self) -> str:
        ...

    def partition_count(self) -> int:
        """Partitions of the topic (the configured count before it exists)."""
        ...

    def ready(self) -> bool:
        """Whether the topic exists and every partition of it is served."""
        ...

    async def create(self) -> None:
        """Creates the topic if it does not exist and returns once it is `ready`."""
        ...

    def append(self, partition: int, batch: bytes, guard: object | None = None
               ) -> Awaitable[int]:
        """Appends one record batch to the partition's log before returning, so batches land
        in the order of the calls; raises `AppendError` if it cannot. `guard`: the KIP-890
        verification a transactional batch was admitted under (opaque here), refused with
        INVALID_TXN_STATE if its transaction ended meanwhile.

        The awaitable completes with the batch's base offset once the batch is committed
        (one broker: at once; with replication, once the high watermark passes it), or
        raises `AppendError`. Return an already-completed `asyncio.Future` when the batch is
        committed at once: the runtime then goes on without waiting for the event loop.
        """
        ...

    def read_batches(self, partition: int) -> AsyncIterator[bytes]:
        """Every batch of the partition from its log start offset, in offset order (nothing
        for a partition that does not exist yet). May yield to the event loop between reads."""
        ...

    def delete_records(self, partition: int, offset: int) -> None:
        """Moves the partition's log start offset up to `offset` (Kafka's DeleteRecords on
        the leader): the records below it are no longer read. A failure (not the leader
        any more) is logged; the owner tries again at its next pruning."""
        ...


class TopicMetadata(Protocol):
    """The user topics a coordinator checks commits and subscriptions against."""

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

    def topics_matching(self, regex: str) -> tuple[str, ...]:
        """Sorted names of the topics of `topic_names` that the regular expression (Python's
        `re` syntax, known to compile) matches whole."""
        ...


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, wrapping at 32 bits."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """The internal-topic partition of a group or transactional id, as Kafka computes it."""
    h = java_string_hash(key)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0.
    return (0 if h == -(1 << 31) else abs(h)) % partitions
