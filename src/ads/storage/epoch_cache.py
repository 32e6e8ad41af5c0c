"""Leader epoch cache: which leader epoch began at which offset (``leader-epoch-checkpoint``).

Entries ``(epoch, start_offset)`` strictly increase in both fields. The file format is the
Kafka checkpoint described in ``ads.storage.checkpoint``. It answers OffsetForLeaderEpoch
(``end_offset_for_epoch``) so a follower can find where its log diverges from the leader's.

Crash rule: the file is rewritten atomically on every change. It may run ahead of the log
after a crash (an epoch recorded whose batches were lost), so on open the log drops entries
at or past its end offset (``truncate_from_end``) and, after recovery, re-adds epochs found in
the recovered batches.

Not thread-safe: called from the partition's owner thread.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from ads.storage.checkpoint import read_epoch_checkpoint, write_epoch_checkpoint

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "LeaderEpochCache",
]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    # Slots: one of each per partition or segment, a hundred thousand of them in a broker.
    __slots__ = ("_epochs", "_starts", "path")

    def __init__(self, path: Path | str) -> None:
        # A string: one per partition (see LocalLog).
        self.path = str(path)
        entries = read_epoch_checkpoint(Path(path))
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries:
            self._add(epoch, start)

    def _add(self, epoch: int, start_offset: int) -> bool:
        """Append, first dropping entries that conflict (epoch or start not below the new)."""
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def _persist(self) -> None:
        write_epoch_checkpoint(Path(self.path), self.entries())

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if already known)."""
        if epoch < 0:
            return
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return
        before = (self._epochs[:], self._starts[:])
        if self._add(epoch, start_offset):
            try:
                self._persist()
            except OSError:
                self._epochs, self._starts = before  # memory matches the file, as before
                raise

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset``, ``UNDEFINED_EPOCH`` if before all."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: ``(largest epoch <= epoch, its end offset)``.

        The end offset is the start offset of the next higher epoch, or the log end offset
        for the latest epoch; ``(-1, -1)`` if ``epoch`` is undefined or above every entry.
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        keep = bisect.bisect_left(self._starts, end_offset)
        if keep < len(self._starts):
            del self._epochs[keep:]
            del self._starts[keep:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the one spanning it starts there."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[i]
        del self._epochs[:i]
        del self._starts[:i]
        self._epochs[0], self._starts[0] = epoch, start_offset
        self._persist()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._persist()

    def rename_dir(self, directory: Path) -> None:
        self.path = str(directory / Path(self.path).name)
