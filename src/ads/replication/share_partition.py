"""Share-partitions (KIP-932): one share group's in-flight records of one partition it reads.

Theory of operation
-------------------
The members of a share group read the same partitions; each record is handed to one member
at a time. The leader of the partition keeps, per group, an *in-flight window*: the share-
partition start offset (SPSO) and end offset (SPEO, exclusive). Every record below SPSO is
done (acknowledged or archived), every record from SPEO on is available and was never
delivered; the records in between have a state, kept as contiguous *spans* of offsets that
share one state, delivery count, owner and lock deadline. A span is one fetched batch until
acknowledgements or lock expiries split it, so the window costs per batch, not per record.

A record's states; `acquire`, `acknowledge`, `expire` and `release_member` are the
transitions::

                   acquire: delivery count + 1, locked for the lock duration
      AVAILABLE ─────────────────────────────────────────────────────────▶ ACQUIRED
          ▲                                                                 │ │ │
          │       RELEASE, lock expiry, member gone (count < limit)         │ │ │
          └─────────────────────────────────────────────────────────────────┘ │ │
                                                       ACCEPT                 │ │
                                       ACKNOWLEDGED ◀─────────────────────────┘ │
                    REJECT, GAP, or RELEASE / lock expiry at the count limit    │
                                           ARCHIVED ◀────────────────────────────┘

    Only the member that acquired a record may acknowledge it, and only while it is
    ACQUIRED: anything else is INVALID_RECORD_STATE and changes nothing of that batch of
    acknowledgements. Leading ACKNOWLEDGED and ARCHIVED spans leave the window (SPSO moves).
    RENEW (KIP-1222) is no transition: the records stay ACQUIRED by the member, with the
    same delivery count, and their lock runs for another lock duration from now; nothing
    is written for it.

Acquisition reads from the first AVAILABLE offset of the window (a released record), else
from SPEO, and takes whole batches: every available record of each batch read, until
`max_records` is reached at a batch's end, or the window holds `max_record_locks` records.
In the record-limit acquire mode (KIP-1206) `max_records` is a hard limit instead: the
batch it falls in is split, its records past the limit stay AVAILABLE (or, past SPEO, are
not in the window yet). Offsets between SPEO and a batch that starts after it (records
removed by compaction) are archived as a gap.

Lock expiry is applied lazily: every operation first expires the locks due (`expire`), and
a fetch waiting for records wakes at the next deadline (`next_deadline_ms`).

Durable state (the share coordinator, `ads.broker.share_partitions`): what is written of a
share-partition is its start offset and *state batches*, `(first, last, state, delivery
count)` with the states AVAILABLE, ACKNOWLEDGED and ARCHIVED; ACQUIRED is never written.
`from_state` rebuilds a window from them: offsets the batches do not cover (records
acquired and never acknowledged, or never delivered) are AVAILABLE with delivery count 0,
and the window ends after the last batch. An acknowledgement is applied in two steps:
`prepare_acknowledge` checks it, marks its spans *pending* and returns the state batches it
makes; once they are written, `complete_acknowledge` applies it (or, when the write failed,
leaves the records ACQUIRED). A pending span is not expired, released or acknowledged again
meanwhile. Records released by lock expiry or a departed member are queued in `unsaved`,
for the owner to write.

Counts for `/metrics` (`counts`): records acknowledged, archived and acquired again are
added up where a span changes state, by the span's length, never record by record; the
records in flight and acquired now are summed over the spans when asked. The counts belong
to this object: they start at 0 whenever the share-partition is loaded, as a new leader
does after a move of the leadership.

Not thread-safe: used from the broker's event loop only.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ads.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The acknowledge types of ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # ShareFetch and ShareAcknowledge v2 only


@dataclass(slots=True)
class Span:
    """Offsets `first`..`last` (inclusive), all in one state."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0
    # An acknowledgement of it is being written (`prepare_acknowledge`).
    pending: bool = False


@dataclass(frozen=True, slots=True)
class ShareConfig:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000


# (first offset, last offset, delivery state, delivery count): what the share coordinator
# keeps of a range of records (its StateBatch).
StateBatch = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class ShareCounts:
    """A share-partition's figures for `/metrics` and the console."""

    start_offset: int
    end_offset: int
    in_flight: int  # AVAILABLE or ACQUIRED records of the window (not yet done)
    acquired: int
    acknowledged: int  # since loaded here (ACCEPT)
    archived: int  # since loaded here (REJECT, GAP, over the delivery limit, aborted)
    redelivered: int  # since loaded here: acquisitions with a delivery count above 1


class AcquiredRecords(tuple[int, int, int]):
    """(first offset, last offset, delivery count) of records handed to a member."""

    __slots__ = ()


class SharePartition:
    def __init__(self, start_offset: int, config: ShareConfig) -> None:
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.spans: list[Span] = []  # contiguous from start_offset to end_offset - 1
        # The state epoch read from the share coordinator, and the partition's leader epoch
        # the state was read under (both go with every write).
        self.state_epoch = 0
        self.leader_epoch = -1
        # Releases not yet written (lock expiry, a member gone), oldest first.
        self.unsaved: list[StateBatch] = []
        # Records since this object was made (see "Counts" in the module header).
        self.acknowledged_total = 0
        self.archived_total = 0
        self.redelivered_total = 0

    @classmethod
    def from_state(cls, start_offset: int, batches: Iterable[StateBatch], config: ShareConfig
                   ) -> SharePartition:
        """The window the share coordinator's state describes (see the module header)."""
        sp = cls(start_offset, config)
        for first, last, state, count in sorted(batches):
            if last < sp.end_offset:
                continue
            first = max(first, sp.end_offset)
            if first > sp.end_offset:
                sp.spans.append(Span(sp.end_offset, first - 1, RecordState.AVAILABLE))
            kind = RecordState(state) if state in _WRITTEN_STATES else RecordState.AVAILABLE
            sp.spans.append(Span(first, last, kind, count))
            sp.end_offset = last + 1
        sp._compact()
        return sp

    # -- reading ---------------------------------------------------------------------
    def next_fetch_offset(self) -> int | None:
        """Where to read for the next acquisition; None while the window is full and holds
        nothing available."""
        for span in self.spans:
            if span.state is RecordState.AVAILABLE:
                return span.first
        if self.end_offset - self.start_offset >= self.config.max_record_locks:
            return None
        return self.end_offset

    def next_deadline_ms(self) -> int | None:
        deadlines = [s.deadline_ms for s in self.spans if s.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def counts(self) -> ShareCounts:
        """The figures of `/metrics`: one pass over the spans, when scraped."""
        acquired = available = 0
        for span in self.spans:
            if span.state is RecordState.ACQUIRED:
                acquired += span.last - span.first + 1
            elif span.state is RecordState.AVAILABLE:
                available += span.last - span.first + 1
        return ShareCounts(self.start_offset, self.end_offset, acquired + available, acquired,
                           self.acknowledged_total, self.archived_total,
                           self.redelivered_total)

    # -- transitions -----------------------------------------------------------------
    def acquire(self, member_id: str, batches: Iterable[tuple[int, int]], max_records: int,
                now_ms: int, record_limit: bool = False
                ) -> tuple[list[AcquiredRecords], int, int]:
        """Acquires the available records of whole batches `(base offset, last offset)`,
        read from `next_fetch_offset` on, for `member_id`; with `record_limit`, never more
        than `max_records` of them. Returns the acquired ranges and the slice of the
        batches (start, stop) that holds them."""
        acquired: list[AcquiredRecords] = []
        count = 0
        used_from, used = -1, 0
        deadline = now_ms + self.config.record_lock_duration_ms
        for index, (base, last) in enumerate(batches):
            if count >= max_records:
                break
            limit = max_records - count if record_limit else last - base + 1
            got = self._acquire_batch(member_id, base, last, deadline, limit)
            if got:
                acquired.extend(got)
                count += sum(a[1] - a[0] + 1 for a in got)
                used = index + 1
                if used_from < 0:
                    used_from = index
        return _merged(acquired), max(used_from, 0), used

    def _acquire_batch(self, member_id: str, base: int, last: int, deadline: int,
                       limit: int) -> list[AcquiredRecords]:
        """At most `limit` available records of the batch, from its start."""
        out: list[AcquiredRecords] = []
        if base < self.end_offset:
            for span in self._carve(max(base, self.start_offset), min(last, self.end_offset - 1)):
                if limit <= 0:
                    break
                if span.state is RecordState.AVAILABLE:
                    if span.last - span.first + 1 > limit:
                        self._split(span.first + limit)  # the rest stays AVAILABLE
                    self._lock(span, member_id, deadline)
                    limit -= span.last - span.first + 1
                    out.append(AcquiredRecords((span.first, span.last, span.delivery_count)))
        if (last >= self.end_offset and limit > 0
                and self.in_flight() < self.config.max_record_locks):
            if base > self.end_offset:  # offsets without records before the batch
                self.spans.append(Span(self.end_offset, base - 1, RecordState.ARCHIVED))
            first = max(base, self.end_offset)
            span = Span(first, min(last, first + limit - 1), RecordState.ACQUIRED)
            self._lock(span, member_id, deadline)
            self.spans.append(span)
            self.end_offset = span.last + 1
            out.append(AcquiredRecords((span.first, span.last, span.delivery_count)))
        return _merged(out)

    def _lock(self, span: Span, member_id: str, deadline: int) -> None:
        span.state = RecordState.ACQUIRED
        span.delivery_count += 1
        span.member_id = member_id
        span.deadline_ms = deadline
        if span.delivery_count > 1:
            self.redelivered_total += span.last - span.first + 1

    def acknowledge(self, member_id: str, first: int, last: int, types: Sequence[int],
                    now_ms: int) -> ErrorCode:
        """One acknowledgement batch applied at once (nothing to write first)."""
        prepared = self.prepare_acknowledge(member_id, first, last, types, now_ms)
        if isinstance(prepared, ErrorCode):
            return prepared
        self.complete_acknowledge(member_id, first, last, types, True)
        return ErrorCode.NONE

    def prepare_acknowledge(self, member_id: str, first: int, last: int, types: Sequence[int],
                            now_ms: int) -> list[StateBatch] | ErrorCode:
        """Checks one acknowledgement batch (one type for all of `first`..`last`, or one per
        offset): INVALID_RECORD_STATE (nothing changed) unless every offset is ACQUIRED by
        `member_id` and not pending. Marks its spans pending; returns the state batches
        it makes. Its RENEW offsets are renewed at once, as they write nothing."""
        self.expire(now_ms)
        if last < first or len(types) not in (1, last - first + 1) or any(
                t not in AcknowledgeType._value2member_map_ for t in types):
            return ErrorCode.INVALID_REQUEST
        if first < self.start_offset or last >= self.end_offset:
            return ErrorCode.INVALID_RECORD_STATE
        spans = self._carve(first, last)
        if any(s.state is not RecordState.ACQUIRED or s.member_id != member_id or s.pending
               for s in spans):
            return ErrorCode.INVALID_RECORD_STATE
        written: list[StateBatch] = []
        for run_first, run_last, ack in _runs(first, last, types):
            if ack == AcknowledgeType.RENEW:
                for span in self._carve(run_first, run_last):
                    span.deadline_ms = now_ms + self.config.record_lock_duration_ms
                continue
            for span in self._carve(run_first, run_last):
                span.pending = True
                written.append((span.first, span.last,
                                int(self._settled_state(span, AcknowledgeType(ack))),
                                span.delivery_count))
        return written

    def start_after(self, written: Iterable[StateBatch]) -> int:
        """The start offset once the `written` state batches (of a prepared
        acknowledgement) are applied: past the leading records that are then done."""
        done = {int(RecordState.ACKNOWLEDGED), int(RecordState.ARCHIVED)}
        settled = {first: state for first, _, state, _ in written}
        start = self.start_offset
        for span in self.spans:
            state = settled.get(span.first, int(span.state)) if span.pending else int(span.state)
            if state not in done:
                break
            start = span.last + 1
        return start

    def complete_acknowledge(self, member_id: str, first: int, last: int,
                             types: Sequence[int], written: bool) -> None:
        """Applies a prepared acknowledgement once its state is written; `written` False:
        the records stay ACQUIRED (their lock releases them later)."""
        for run_first, run_last, ack in _runs(first, last, types):
            for span in self._carve(max(run_first, self.start_offset),
                                    min(run_last, self.end_offset - 1)):
                if not span.pending:
                    continue
                span.pending = False
                if written and span.state is RecordState.ACQUIRED and span.member_id == member_id:
                    self._settle(span, AcknowledgeType(ack))
        self._compact()

    def _settled_state(self, span: Span, ack: AcknowledgeType) -> RecordState:
        if ack is AcknowledgeType.ACCEPT:
            return RecordState.ACKNOWLEDGED
        if ack is AcknowledgeType.RELEASE:
            return (RecordState.ARCHIVED
                    if span.delivery_count >= self.config.delivery_count_limit
                    else RecordState.AVAILABLE)
        return RecordState.ARCHIVED

    def _settle(self, span: Span, ack: AcknowledgeType) -> None:
        span.state = self._settled_state(span, ack)
        span.member_id = None
        if span.state is RecordState.ACKNOWLEDGED:
            self.acknowledged_total += span.last - span.first + 1
        elif span.state is RecordState.ARCHIVED:
            self.archived_total += span.last - span.first + 1

    def _release(self, span: Span) -> None:
        """Lock expiry or a member gone: AVAILABLE again (ARCHIVED at the limit), and
        queued for writing."""
        self._settle(span, AcknowledgeType.RELEASE)
        self.unsaved.append((span.first, span.last, int(span.state), span.delivery_count))

    def expire(self, now_ms: int) -> bool:
        """Releases the records whose lock is past its deadline; True if any was."""
        changed = False
        for span in self.spans:
            if (span.state is RecordState.ACQUIRED and span.deadline_ms <= now_ms
                    and not span.pending):
                self._release(span)
                changed = True
        if changed:
            self._compact()
        return changed

    def release_member(self, member_id: str) -> bool:
        """Releases everything `member_id` holds (its share session closed)."""
        changed = False
        for span in self.spans:
            if (span.state is RecordState.ACQUIRED and span.member_id == member_id
                    and not span.pending):
                self._release(span)
                changed = True
        if changed:
            self._compact()
        return changed

    def move_start(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords)."""
        if log_start_offset <= self.start_offset:
            return
        if log_start_offset >= self.end_offset:
            self.spans.clear()
            self.start_offset = self.end_offset = log_start_offset
            return
        self._carve(self.start_offset, log_start_offset - 1)
        self.spans = [s for s in self.spans if s.first >= log_start_offset]
        self.start_offset = log_start_offset

    # -- spans -----------------------------------------------------------------------
    def _carve(self, first: int, last: int) -> list[Span]:
        """The spans covering exactly `first`..`last` (inside the window), split at both
        ends if needed."""
        if last < first:
            return []
        self._split(first)
        self._split(last + 1)
        lo = bisect_right(self.spans, first, key=lambda s: s.first) - 1
        hi = bisect_right(self.spans, last, key=lambda s: s.first)
        return self.spans[max(lo, 0):hi]

    def _split(self, offset: int) -> None:
        index = bisect_right(self.spans, offset, key=lambda s: s.first) - 1
        if index < 0:
            return
        span = self.spans[index]
        if span.first == offset or span.last < offset:
            return
        tail = Span(offset, span.last, span.state, span.delivery_count, span.member_id,
                    span.deadline_ms, span.pending)
        span.last = offset - 1
        self.spans.insert(index + 1, tail)

    def _compact(self) -> None:
        """Moves the start past finished spans and joins neighbours in the same state."""
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        drop = 0
        while drop < len(self.spans) and self.spans[drop].state in done:
            drop += 1
        if drop:
            self.start_offset = self.spans[drop - 1].last + 1
            del self.spans[:drop]
        joined: list[Span] = []
        for span in self.spans:
            prev = joined[-1] if joined else None
            if prev is not None and prev.state is span.state and span.state in (
                    RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                prev.last = span.last
            else:
                joined.append(span)
        self.spans = joined


_WRITTEN_STATES = frozenset({RecordState.AVAILABLE, RecordState.ACKNOWLEDGED,
                             RecordState.ARCHIVED})


def _runs(first: int, last: int, types: Sequence[int]) -> list[tuple[int, int, int]]:
    """(first, last, type) runs of an acknowledgement batch."""
    if len(types) == 1:
        return [(first, last, types[0])]
    runs: list[tuple[int, int, int]] = []
    start = first
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[i - 1]:
            runs.append((start, first + i - 1, types[i - 1]))
            start = first + i
    return runs


def _merged(ranges: list[AcquiredRecords]) -> list[AcquiredRecords]:
    """Adjacent ranges with one delivery count as one."""
    out: list[AcquiredRecords] = []
    for r in ranges:
        if out and out[-1][1] + 1 == r[0] and out[-1][2] == r[2]:
            out[-1] = AcquiredRecords((out[-1][0], r[1], r[2]))
        else:
            out.append(r)
    return out
