"""The share-partitions of one `__share_group_state` partition and their durable state.

A shard is what the coordinator runtime (`ads.coordinator.runtime`) keeps for each partition
of `__share_group_state` this broker leads: rebuilt from the partition's records when it is
loaded (`replay`), it answers the share-state APIs for the share-partitions whose key
("groupId:topicId:partition") hashes to the partition.

One way into the state: Initialize, Write and Delete check the request and return a `Write`
of one record (a ShareSnapshot, a ShareUpdate, or tombstones); the runtime appends it and,
once committed, replays it with `replay`, the method loading uses (`state.apply`). Only then
does the write's continuation answer. Read and ReadSummary answer from the state replayed.

Which record a write makes (as Kafka's share coordinator): a snapshot for a share-partition
without state, and again once `snapshot_update_records` updates followed the last one (the
new snapshot combines the state with the write, so a reload reads it alone); an update
otherwise. A snapshot is only made when no other write of the share-partition is in flight:
the state it combines with must hold every record before it.

Fencing: a write or read with a leader epoch below the one recorded for the share-partition
is FENCED_LEADER_EPOCH (a former leader of the partition), a write with a state epoch below
the recorded one FENCED_STATE_EPOCH. A read records its leader epoch in memory, as Kafka's
does, so that a new leader that has read the state fences the former one at once; after a
reload the fence is the epoch of the last record.

Not thread-safe: the broker's event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ads.coordinator.runtime import Record, Write
from ads.coordinator.share import records as rec
from ads.coordinator.share.records import ShareKey, ShareValue, StateBatch
from ads.coordinator.share.state import DELIVERY_STATES, ShareState, apply, combine
from ads.coordinator.timer import Timers
from ads.coordinator.topic import TopicMetadata
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.coordinator")


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    # share.coordinator.snapshot.update.records.per.snapshot
    snapshot_update_records: int = 500
    # share.coordinator.state.topic.prune.interval.ms
    prune_interval_ms: int = 300_000


# Told the offset below which the partition's records are no longer needed.
Prune = Callable[[int, int], None]


@dataclass(slots=True)
class Answer:
    """What a share-state request is told; a write's continuation fills in its error."""

    error: ErrorCode = ErrorCode.NONE
    state: ShareState | None = None


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """One share-partition of a WriteShareGroupState request."""

    key: ShareKey
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()


@dataclass(slots=True)
class ShareShard:
    partition: int
    topics: TopicMetadata
    config: ShareCoordinatorConfig
    timers: Timers[Write] | None = None
    prune: Prune | None = None
    states: dict[ShareKey, ShareState] = field(default_factory=dict)
    # The offset of each share-partition's last snapshot, and the partition's next offset:
    # what pruning keeps (see `prune_offset`).
    snapshots: dict[ShareKey, int] = field(default_factory=dict)
    end_offset: int = 0
    # Leader epochs seen by reads, above those of the records (see the header).
    read_epochs: dict[ShareKey, int] = field(default_factory=dict)
    # Writes appended and not yet committed, per share-partition.
    in_flight: dict[ShareKey, int] = field(default_factory=dict)

    # -- the records -----------------------------------------------------------------
    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        try:
            kind, share_key = rec.decode_key(key)
            decoded = None if value is None else rec.decode_value(kind, value)
        except rec.ShareRecordError as exc:
            log.warning("skipping a bad record at offset %d of %s-%d: %s", offset,
                        rec.SHARE_GROUP_STATE_TOPIC, self.partition, exc)
            return
        self.end_offset = max(self.end_offset, offset + 1)
        if decoded is None:
            self.states.pop(share_key, None)
            self.read_epochs.pop(share_key, None)
            self.snapshots.pop(share_key, None)
            return
        state = apply(self.states.get(share_key), decoded)
        if state is not None:
            self.states[share_key] = state
            if decoded.state_epoch is not None:
                self.snapshots[share_key] = offset

    def replay_transactional(self, producer_id: int, offset: int, key: bytes,
                             value: bytes | None) -> None:
        """Nothing writes transactional batches to `__share_group_state`."""

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """Nothing writes markers to `__share_group_state`."""

    def on_loaded(self) -> list[Write]:
        if self.timers is not None and self.prune is not None:
            self.timers.schedule(self.config.prune_interval_ms, self._pruned)
        return []

    def on_unloaded(self) -> None:
        self.states.clear()
        self.read_epochs.clear()
        self.snapshots.clear()

    # -- pruning ---------------------------------------------------------------------
    def prune_offset(self) -> int:
        """Where the records still needed start: each share-partition's state is its last
        snapshot and the updates after it, so everything below the oldest of those
        snapshots can go (everything, without share-partitions). As Kafka's share
        coordinator, which is why the topic is not compacted."""
        return min(self.snapshots.values(), default=self.end_offset)

    def _pruned(self) -> list[Write]:
        """The pruning timer: deletes what is not needed, and comes back."""
        if self.prune is not None:
            self.prune(self.partition, self.prune_offset())
        if self.timers is not None:
            self.timers.schedule(self.config.prune_interval_ms, self._pruned)
        return []

    # -- checks ----------------------------------------------------------------------
    def _known(self, key: ShareKey) -> ErrorCode:
        """UNKNOWN_TOPIC_OR_PARTITION for a topic id or partition the metadata lacks."""
        name = self.topics.topic_name(key.topic_id)
        count = None if name is None else self.topics.topic_partitions(name)
        if count is None or not 0 <= key.partition < count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NONE

    def _leader_epoch(self, key: ShareKey) -> int:
        state = self.states.get(key)
        recorded = -1 if state is None else state.leader_epoch
        return max(recorded, self.read_epochs.get(key, -1))

    def _write(self, key: ShareKey, records: Sequence[Record], answer: Answer) -> Write:
        self.in_flight[key] = self.in_flight.get(key, 0) + 1

        def then(error: ErrorCode) -> Sequence[Write]:
            left = self.in_flight.get(key, 1) - 1
            if left:
                self.in_flight[key] = left
            else:
                self.in_flight.pop(key, None)
            answer.error = error
            answer.state = self.states.get(key)
            return ()

        return Write(records, then)

    # -- the APIs --------------------------------------------------------------------
    def write(self, req: WriteRequest) -> tuple[Write | None, Answer]:
        key = req.key
        error = self._known(key)
        if error is ErrorCode.NONE and req.leader_epoch < self._leader_epoch(key):
            error = ErrorCode.FENCED_LEADER_EPOCH
        state = self.states.get(key)
        if error is ErrorCode.NONE and state is not None and req.state_epoch < state.state_epoch:
            error = ErrorCode.FENCED_STATE_EPOCH
        if error is ErrorCode.NONE and any(
                b.state not in DELIVERY_STATES or b.last < b.first for b in req.batches):
            error = ErrorCode.INVALID_REQUEST
        if error is not ErrorCode.NONE:
            return None, Answer(error)
        if state is None or (state.updates >= self.config.snapshot_update_records
                             and not self.in_flight.get(key)):
            value = self._snapshot(state, req)
            kind = rec.SNAPSHOT
        else:
            value = ShareValue(state.snapshot_epoch, None, req.leader_epoch, req.start_offset,
                               combine((), req.batches, req.start_offset))
            kind = rec.UPDATE
        answer = Answer()
        return self._write(key, [(rec.encode_key(kind, key), rec.encode_value(value))],
                           answer), answer

    @staticmethod
    def _snapshot(state: ShareState | None, req: WriteRequest) -> ShareValue:
        if state is None:
            start = req.start_offset
            return ShareValue(0, max(req.state_epoch, 0), req.leader_epoch, start,
                              combine((), req.batches, start))
        start = max(state.start_offset, req.start_offset)
        return ShareValue(state.snapshot_epoch + 1, state.state_epoch,
                          max(state.leader_epoch, req.leader_epoch), start,
                          combine(state.batches, req.batches, start))

    def initialize(self, key: ShareKey, state_epoch: int, start_offset: int
                   ) -> tuple[Write | None, Answer]:
        """A new state (start offset, no batches) under a state epoch not below the
        recorded one: the share-partition starts over there."""
        error = self._known(key)
        state = self.states.get(key)
        if error is ErrorCode.NONE and state is not None and state_epoch < state.state_epoch:
            error = ErrorCode.FENCED_STATE_EPOCH
        if error is ErrorCode.NONE and start_offset < 0:
            error = ErrorCode.INVALID_REQUEST
        if error is not ErrorCode.NONE:
            return None, Answer(error)
        epoch = -1 if state is None else state.leader_epoch
        snapshot = 0 if state is None else state.snapshot_epoch + 1
        value = ShareValue(snapshot, state_epoch, epoch, start_offset, ())
        answer = Answer()
        return self._write(key, [(rec.encode_key(rec.SNAPSHOT, key),
                                  rec.encode_value(value))], answer), answer

    def delete(self, key: ShareKey) -> tuple[Write | None, Answer]:
        """Tombstones of the share-partition's snapshot and update keys (nothing to write
        for a share-partition without state)."""
        if key not in self.states:
            return None, Answer()
        answer = Answer()
        return self._write(key, [(rec.encode_key(rec.SNAPSHOT, key), None),
                                 (rec.encode_key(rec.UPDATE, key), None)], answer), answer

    def read(self, key: ShareKey, leader_epoch: int) -> Answer:
        """The state (None: none written); the reader's leader epoch fences older ones."""
        error = self._known(key)
        if error is ErrorCode.NONE and leader_epoch < self._leader_epoch(key):
            error = ErrorCode.FENCED_LEADER_EPOCH
        if error is not ErrorCode.NONE:
            return Answer(error)
        if leader_epoch >= 0:
            self.read_epochs[key] = leader_epoch
        return Answer(ErrorCode.NONE, self.states.get(key))

    def summary(self, key: ShareKey) -> Answer:
        error = self._known(key)
        return Answer(error, self.states.get(key) if error is ErrorCode.NONE else None)
