"""A share-partition's durable state and how a write's state batches combine with it.

Theory of operation
-------------------
What `__share_group_state` keeps of a share-partition is its start offset (every record
below it is done), its state epoch (moved by InitializeShareGroupState, which starts the
share-partition over) and state batches: ranges of offsets from the start on, each in one
delivery state (AVAILABLE 0, ACKNOWLEDGED 2, ARCHIVED 4) with one delivery count. ACQUIRED
is never written: a record acquired when its leader is lost comes back AVAILABLE with the
delivery count last written for it (none: never delivered), as Kafka's leaders do.

A write names only the batches that changed; `combine` lays them over the batches known,
newest on top, so that the ranges stay disjoint and sorted, drops what lies below the start
offset and joins neighbours with the same state and count::

    known     [0-9 AVAILABLE 1][10-19 ACKNOWLEDGED 1]
    written        [5-12 ARCHIVED 2]                     start 0
    combined  [0-4 AVAILABLE 1][5-12 ARCHIVED 2][13-19 ACKNOWLEDGED 1]

Replay applies a snapshot as the state and an update with `combine` (its start offset moves
the start only forward: writes of one leader land in the order it sent them, and a start
never moves back but by a new state epoch). Pure functions: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ads.coordinator.share.records import ShareValue, StateBatch

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
DELIVERY_STATES = frozenset({AVAILABLE, ACKNOWLEDGED, ARCHIVED})


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's state as the records so far make it."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    # Updates written since the last snapshot (a new snapshot comes after enough of them).
    updates: int = 0


def combine(known: Iterable[StateBatch], written: Iterable[StateBatch], start_offset: int
            ) -> tuple[StateBatch, ...]:
    """`written` laid over `known`, cut at `start_offset`, neighbours joined."""
    batches = sorted(known)
    for new in sorted(written):
        kept: list[StateBatch] = []
        for b in batches:
            if b.last < new.first or b.first > new.last:
                kept.append(b)
                continue
            if b.first < new.first:
                kept.append(b._replace(last=new.first - 1))
            if b.last > new.last:
                kept.append(b._replace(first=new.last + 1))
        kept.append(new)
        batches = sorted(kept)
    out: list[StateBatch] = []
    for b in batches:
        if b.last < start_offset:
            continue
        if b.first < start_offset:
            b = b._replace(first=start_offset)
        prev = out[-1] if out else None
        if (prev is not None and prev.last + 1 == b.first and prev.state == b.state
                and prev.delivery_count == b.delivery_count):
            out[-1] = prev._replace(last=b.last)
        else:
            out.append(b)
    return tuple(out)


def apply(current: ShareState | None, value: ShareValue) -> ShareState | None:
    """The state after one record (a snapshot, or an update of `current`; an update without
    a snapshot before it has nothing to apply to and is ignored: None)."""
    if value.state_epoch is not None:
        return ShareState(value.snapshot_epoch, value.state_epoch, value.leader_epoch,
                          value.start_offset, combine((), value.batches, value.start_offset))
    if current is None:
        return None
    start = max(current.start_offset, value.start_offset)
    return replace(current, leader_epoch=max(current.leader_epoch, value.leader_epoch),
                   start_offset=start,
                   batches=combine(current.batches, value.batches, start),
                   updates=current.updates + 1)
