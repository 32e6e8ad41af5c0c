"""Incremental fetch sessions (KIP-227): the broker remembers what a fetcher asks for.

A full fetch with session epoch 0 opens a session holding its partitions and their fetch
positions; the response carries the new session id. Later requests name the session and
the next epoch and carry only what changed (new fetch offsets, partitions added; removed
ones in `forgotten_topics_data`), and the response leaves out every partition with nothing
new: no records, and the same high watermark, last stable offset and log start offset as
last sent. Epoch -1 closes the session (a session id of 0 with epoch -1 is a plain
sessionless fetch). An unknown session gets FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
INVALID_FETCH_SESSION_EPOCH; the client then opens a new session.

At most `max.incremental.fetch.session.cache.slots` sessions are kept; when full, the
least recently used session idle for `min.incremental.fetch.session.eviction.ms` (Kafka's
two minutes) makes room, otherwise the fetch is answered without a session (id 0) and the
client keeps sending full fetches. Used from the event loop thread only.
"""

from __future__ import annotations

import itertools
import uuid
from collections import OrderedDict
from dataclasses import dataclass

INT32_MAX = 2**31 - 1
EVICTION_MS = 120_000

# A partition's key inside a session: the topic's id (Fetch v13+) or name, and the index.
TopicKey = uuid.UUID | str
PartitionKey = tuple[TopicKey, int]


@dataclass(slots=True)
class CachedPartition:
    topic: TopicKey
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int = -1  # a follower's (Fetch v12+), for divergence
    # What the last response carrying this partition said; -2: never sent.
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2


def next_epoch(epoch: int) -> int:
    """Kafka's rule: epochs count up from 1 and wrap from int32 max back to 1."""
    return 1 if epoch >= INT32_MAX else epoch + 1


class FetchSession:
    def __init__(self, session_id: int, now_ms: int) -> None:
        self.id = session_id
        self.epoch = 1  # the epoch the next request must carry
        self.partitions: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
        self.last_used_ms = now_ms

    def update(self, partition: CachedPartition) -> None:
        key = (partition.topic, partition.partition)
        known = self.partitions.get(key)
        if known is None:
            self.partitions[key] = partition
            return
        known.fetch_offset = partition.fetch_offset
        known.partition_max_bytes = partition.partition_max_bytes
        known.current_leader_epoch = partition.current_leader_epoch
        known.last_fetched_epoch = partition.last_fetched_epoch

    def forget(self, key: PartitionKey) -> None:
        self.partitions.pop(key, None)


class FetchSessionCache:
    def __init__(self, max_slots: int, eviction_ms: int = EVICTION_MS) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recent first
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int, now_ms: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_used_ms = now_ms
            self._sessions.move_to_end(session_id)
        return session

    def create(self, now_ms: int) -> FetchSession | None:
        """A new session, or None when every slot is taken by a recently used one."""
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now_ms - oldest.last_used_ms < self.eviction_ms:
                return None
            del self._sessions[oldest_id]
        session_id = next(self._ids)
        while session_id > INT32_MAX or session_id in self._sessions:
            if session_id > INT32_MAX:
                self._ids = itertools.count(1)
            session_id = next(self._ids)
        session = FetchSession(session_id, now_ms)
        self._sessions[session_id] = session
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)
