"""Which transaction markers a cleaning pass removes (Kafka's cleaned-transaction rule).

A pass reads the log from its start in offset order and follows each producer's
transaction, batch by batch:

- a data batch of an aborted transaction (an entry of the log's ``.txnindex`` files covers
  it) is removed, and its transaction is noted as *seen in this pass*;
- any other transactional batch notes its producer's (committed) transaction as seen;
- an ABORT marker whose transaction was seen is kept, and its ``.txnindex`` entry goes to
  the cleaned segment (consumers still need it to skip what is left of the transaction this
  pass did not remove, and the batch a producer's state keeps); an ABORT marker whose
  transaction was not seen has no data left: it is *removable* and its entry is dropped;
- a COMMIT marker whose transaction was not seen is removable;
- an empty control batch (its record removed by an earlier pass) is removable.

So the pass that removes a transaction's last data keeps its marker; the next pass finds
the marker removable. A removable marker is still kept until ``delete.retention.ms`` after
that: the pass that first finds it removable writes a delete horizon into it (attribute bit
6 with the horizon as base timestamp, as for tombstones, ``filter.BatchFilter``), and a pass
after the horizon drops it, so a consumer that had read the transaction's data has that long
to reach its marker. A marker that is the last batch of its producer is emptied instead of
dropped (its producer id and epoch fence an older instance after a rebuild of producer state
from the log), as is the last batch of a cleaned group.

Batches of open transactions never reach a pass (it stops at the last stable offset), so
every transaction seen has its marker after it.

Not thread-safe: one per pass, on the cleaner thread.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from ads.records.batch import BatchHeader, ControlRecordType
from ads.storage.txn_index import AbortedTxn

__all__ = ["CleanedTransactions"]


class CleanedTransactions:
    """The transaction state of one pass, fed every batch below the pass's map end in
    offset order."""

    __slots__ = ("_by_marker", "_committed", "_open_aborted", "_pending")

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        entries = list(aborted)
        # Aborted transactions not reached yet, by first offset.
        self._pending = [(a.first_offset, a.last_offset, a) for a in entries]
        heapq.heapify(self._pending)
        self._by_marker = {a.last_offset: a for a in entries}
        # Producer id -> (the aborted transaction reached, whether a batch of it was seen).
        self._open_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        # Producers with a batch seen of a transaction no aborted entry covers (committed).
        self._committed: set[int] = set()

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            aborted = heapq.heappop(pending)[2]
            self._open_aborted.setdefault(aborted.producer_id, (aborted, False))

    def on_data(self, header: BatchHeader) -> bool:
        """A data batch was read; whether it belongs to an aborted transaction."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        producer_id = header.producer_id
        found = self._open_aborted.get(producer_id)
        if found is not None:
            self._open_aborted[producer_id] = (found[0], True)
            return True
        self._committed.add(producer_id)
        return False

    def on_marker(self, header: BatchHeader, kind: int | None) -> tuple[bool, AbortedTxn | None]:
        """A control batch was read (``kind``: its record's type, None when it is empty);
        ``(removable, the .txnindex entry to keep for it)``."""
        self._reach(header.last_offset)
        producer_id = header.producer_id
        if kind is None:
            return True, None
        data_seen = producer_id in self._committed
        self._committed.discard(producer_id)
        if kind == ControlRecordType.ABORT:
            found = self._open_aborted.pop(producer_id, None)
            if found is not None and found[1]:
                return False, found[0]
            # Its data was seen but no index entry covers it (an index lost with its disk):
            # the marker stays while the data does, so replaying the log rebuilds the entry.
            return not data_seen, None
        if kind == ControlRecordType.COMMIT:
            return not data_seen, None
        return False, None  # a control record of a type this broker does not know

    def entry_at(self, marker_offset: int) -> AbortedTxn | None:
        """The ``.txnindex`` entry of the ABORT marker at ``marker_offset``, if any (for
        markers the pass copies without deciding, above its map end)."""
        return self._by_marker.get(marker_offset)
