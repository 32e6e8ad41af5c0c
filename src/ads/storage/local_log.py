"""The segment list of one partition directory: ``LocalLog`` (Kafka's LocalLog).

``LocalLog`` knows segments and files, not producers, epochs or watermarks: it opens and
creates segments, rolls to a new active segment, reads whole batches across segments,
truncates the tail, removes the oldest segments, picks the segments a flush must fsync,
swaps the cleaner's segments in, and renames, closes and deletes the directory. Every file it
writes goes through the log's file layer (``ads.storage.fileio``). Decisions (when to roll,
what retention removes, where the log starts, what is acknowledged) belong to
``ads.storage.log.Log``, which owns one ``LocalLog``.

Threading: not thread-safe. ``Log`` calls it under its own lock, except ``read``, which the
owner thread runs without the lock (only the owner thread changes the list).

Log cleaner: a cleaner thread writes a compacted copy of some segments as ``.cleaned`` files,
then swaps it in with ``replace`` (owner thread, since reads walk the list without a lock) and
``finish_replace`` (any thread, under the log's lock). The crash states of a swap and how
loading resolves them are in ``ads.storage.loader``.

Crash rule: ``load`` recovers the segments from the one holding the recovery point on after
an unclean stop (``ads.storage.loader.recover_segments``). A roll creates the new segment's
files before the list changes, and removes them again if any cannot be made, so a failed
roll leaves the previous active segment in place. Removed segments are renamed ``.deleted``
first (``ads.storage.segment``).
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ads.common.clock import Clock
from ads.records.batch import BatchHeader
from ads.storage.config import LogConfig
from ads.storage.epoch_cache import LeaderEpochCache
from ads.storage.files import CLEANED_SUFFIX, SWAP_SUFFIX, FileRegion, Scheduler
from ads.storage.loader import base_offsets, recover_segments
from ads.storage.open_files import OpenFiles
from ads.storage.segment import LogSegment

__all__ = ["LocalLog", "ReadResult"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReadResult:
    regions: list[FileRegion]
    first_offset: int | None  # base offset of the first batch returned

    @property
    def size(self) -> int:
        return sum(r.length for r in self.regions)

    def read_bytes(self) -> bytes:
        return b"".join(r.read_bytes() for r in self.regions)


class LocalLog:
    """The ordered segments of a partition directory; the last one is active."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Clock,
        scheduler: Scheduler | None,
        files: OpenFiles,
    ) -> None:
        # A string, not a Path: a broker keeps one per partition, and a Path holds each part
        # of itself as a string besides (about half a kilobyte each).
        self._dir = str(directory)
        self.config = config
        self.files = files
        self._clock = clock
        self._scheduler = scheduler
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []  # the segments' base offsets, for bisection

    def load(
        self,
        names: Sequence[str],
        recovery_point: int,
        clean_shutdown: bool,
        start_offset: int,
        epoch_cache: LeaderEpochCache,
        durable: bool = True,
    ) -> bool:
        """Open every ``.log`` file among ``names`` (the directory's listing), oldest first;
        after an unclean stop, recover those past ``recovery_point`` (epochs found go to
        ``epoch_cache``), fsyncing them unless not ``durable``. An empty directory gets an
        empty segment at ``start_offset``. Returns whether it recovered."""
        for base in base_offsets(names):
            self._add(LogSegment.open(self._dir, base, self.config, self._clock,
                                      files=self.files))
        recovered = not clean_shutdown and bool(self.segments)
        if recovered:
            max_batch = max(self.config.max_message_bytes, self.config.segment_bytes)
            kept = recover_segments(self.segments, recovery_point, max_batch, epoch_cache,
                                    durable=durable)
            del self.segments[len(kept) :], self.bases[len(kept) :]
        if not self.segments:
            self._add(self._create(start_offset))
        return recovered

    def _add(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self.bases.append(segment.base_offset)

    def _create(self, base_offset: int) -> LogSegment:
        return LogSegment.create(self.dir, base_offset, self.config, self._clock,
                                 files=self.files)

    @property
    def dir(self) -> Path:
        return Path(self._dir)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def index_of(self, offset: int) -> int:
        """Position in the list of the segment holding ``offset`` (0 below the first)."""
        return max(bisect.bisect_right(self.bases, offset) - 1, 0)

    def iter_headers(self, start_offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets >= ``start_offset``, across segments."""
        for segment in self.segments[self.index_of(start_offset) :]:
            yield from segment.iter_headers(start_offset)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.config = config

    # ---------------------------------------------------------------------------- rolling

    def roll(self, new_base: int) -> LogSegment:
        """A new empty active segment at ``new_base``, sealing the previous one.

        An empty active segment is reused if it already starts there, and replaced if it
        does not (truncation left it behind). Raises ``OSError`` with the list unchanged if
        the new segment's files cannot be made.
        """
        active = self.segments[-1]
        if active.size == 0 and active.base_offset == new_base:
            return active
        segment = self._create(new_base)
        if active.size == 0:
            self.segments.pop()
            self.bases.pop()
            active.delete(None)
        else:
            active.on_become_inactive()
        self._add(segment)
        logger.debug("%s: rolled new segment at offset %d", self.dir, new_base)
        return segment

    # ------------------------------------------------------------------------------- read

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        limit: int,
        log_end_offset: int,
        min_one_batch: bool,
    ) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, only those wholly below
        ``limit``, at most ``max_bytes`` (but one whole first batch with ``min_one_batch``),
        possibly spanning segments. The caller checks the offset range."""
        regions: list[FileRegion] = []
        first_offset: int | None = None
        remaining, offset = max_bytes, fetch_offset
        segments, bases = self.segments, self.bases
        i = max(bisect.bisect_right(bases, fetch_offset) - 1, 0)
        while offset < limit and i < len(segments):
            segment = segments[i]
            next_base = bases[i + 1] if i + 1 < len(bases) else log_end_offset
            max_position = None
            if limit < next_base:
                found = segment.locate(limit)
                max_position = segment.size if found is None else found[0]
            result = segment.read_with_base(
                offset, remaining, max_position, min_one_batch and not regions
            )
            if result is not None:
                region, base = result
                if region.length == 0:
                    break
                regions.append(region)
                if first_offset is None:
                    first_offset = base
                remaining -= region.length
                stop = segment.size if max_position is None else max_position
                if remaining <= 0 or region.offset + region.length < stop:
                    break
            offset, i = next_base, i + 1
        return ReadResult(regions, first_offset)

    # ------------------------------------------------------------------ deletion, truncation

    def deletable(self, predicate: Callable[[LogSegment, int], bool], limit: int) -> int:
        """How many of the oldest segments to delete: while ``predicate(segment, next base
        offset)`` holds, never the active one, never one reaching ``limit`` (the high
        watermark)."""
        segments, bases = self.segments, self.bases
        count = 0
        while count + 1 < len(segments):
            if bases[count + 1] > limit or not predicate(segments[count], bases[count + 1]):
                break
            count += 1
        return count

    def delete_oldest(self, count: int) -> list[LogSegment]:
        """Remove the ``count`` oldest segments (never the active one) and delete their
        files (after ``file.delete.delay.ms``); returns them."""
        count = min(count, len(self.segments) - 1)
        removed = self.segments[:count]
        del self.segments[:count], self.bases[:count]
        for segment in removed:
            segment.delete(self._scheduler)
        return removed

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after ``offset``, which must be >= the first base
        offset; returns the new end offset (the first removed batch's base offset)."""
        keep = bisect.bisect_right(self.bases, offset)
        doomed = self.segments[keep:]
        del self.segments[keep:], self.bases[keep:]
        for segment in doomed:
            segment.delete(self._scheduler)
        cut = self.segments[-1].truncate_to(offset)
        return offset if cut is None else min(offset, cut[1])

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start again with one empty segment at ``offset``."""
        doomed = self.segments
        self.segments, self.bases = [], []
        for segment in doomed:
            segment.delete(self._scheduler)
        self._add(self._create(offset))

    def segments_to_flush(self, start: int, end: int) -> list[LogSegment]:
        """The segments holding offsets in [start, end): what a flush must fsync."""
        first = self.index_of(start)
        last = bisect.bisect_left(self.bases, end)
        return self.segments[first : max(last, first + 1)]

    # -------------------------------------------------------------------------- log cleaner

    def replace(
        self, new: LogSegment, old: Sequence[LogSegment], old_sizes: Sequence[int]
    ) -> bool:
        """Put the cleaner's ``new`` segment (files ``.cleaned``, fsynced) in place of ``old``.

        ``old`` must still be a run of consecutive segments of this log, none of them active,
        with the sizes ``old_sizes`` the cleaner read (retention, truncation or a topic
        deletion may have got there first); otherwise ``new`` is deleted and the result is
        False. On success ``new``'s files are renamed ``.swap`` and it replaces ``old`` in the
        list, so reads see it at once; ``finish_replace`` completes the swap on disk.
        """
        segments = self.segments
        first = next((i for i, s in enumerate(segments) if old and s is old[0]), -1)
        current = segments[first : first + len(old)] if first >= 0 else []
        unchanged = len(current) == len(old) == len(old_sizes) and all(
            a is b and a.size == size for a, b, size in zip(current, old, old_sizes, strict=True)
        )
        if (
            not unchanged
            or first + len(old) >= len(segments)
            or new.base_offset != old[0].base_offset
            or new.log_path.parent != self.dir
        ):
            new.delete(None)
            return False
        new.change_file_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        kept = segments[:first] + [new] + segments[first + len(old) :]
        self.segments, self.bases = kept, [s.base_offset for s in kept]
        return True

    def finish_replace(self, new: LogSegment, old: Sequence[LogSegment]) -> None:
        """Delete ``old``'s files and give ``new``'s their live names (``.swap`` renamed)."""
        for segment in old:
            segment.delete(self._scheduler)
        if any(s is new for s in self.segments):
            new.change_file_suffix(SWAP_SUFFIX, "")

    # ------------------------------------------------------------------------- directory

    def rename_dir(self, directory: Path) -> None:
        os.rename(self._dir, directory)  # noqa: PTH104 - the directory is kept as a string
        self._dir = str(directory)
        for segment in self.segments:
            segment.rename_dir(directory)

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        """Close every segment and remove the directory."""
        self.close()
        shutil.rmtree(self._dir, ignore_errors=True)
