"""Loading a partition directory: leftover files, interrupted swaps, segment discovery.

Files a crash can leave behind, and what loading does with them (Kafka's rules):

- ``*.deleted``: a segment or index already removed from the log; deleted.
- ``*.cleaned``: output of a compaction that had not been swapped in; deleted.
- ``*.tmp``: an unfinished atomic write (checkpoint, snapshot); deleted.
- ``<base>.log.swap``: a compaction result whose swap-in had started. The swap is finished:
  segments whose base offset lies in the swap file's offset range are deleted and the swap
  file is renamed to ``<base>.log``. Index ``.swap`` files are deleted; the indexes of the
  swapped segment are rebuilt from the log, except its ``.txnindex.swap`` (aborted
  transactions cannot be told from the log alone), which is renamed with it.
- an ``.index``/``.timeindex``/``.txnindex`` with no ``.log``: deleted.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ads.records.batch import BATCH_OVERHEAD, BatchHeader, read_batch_header
from ads.records.errors import RecordError
from ads.storage.epoch_cache import LeaderEpochCache
from ads.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    file_name,
    file_names,
)
from ads.storage.segment import LogSegment
from ads.storage.txn_index import TXN_INDEX_SUFFIX

__all__ = [
    "base_offsets",
    "prepare_directory",
    "recover_segments",
    "segment_base_offsets",
]

logger = logging.getLogger(__name__)

_TMP_SUFFIX = ".tmp"
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, _TMP_SUFFIX, SWAP_SUFFIX)


def _base_offset(name: str, suffix: str) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None  # noqa: PLR2004


def base_offsets(names: Iterable[str], suffix: str = LOG_SUFFIX) -> list[int]:
    """Base offsets of the ``<base><suffix>`` files among ``names``, ascending."""
    offsets = []
    for name in names:
        base = _base_offset(name, suffix)
        if base is not None:
            offsets.append(base)
    return sorted(offsets)


def segment_base_offsets(directory: Path) -> list[int]:
    """Base offsets of the ``.log`` files in ``directory``, ascending."""
    return base_offsets(file_names(directory))


def _next_offset_of_file(path: Path, base_offset: int) -> int:
    """One past the last offset in a segment file, reading only headers."""
    next_offset = base_offset
    fd = os.open(path, os.O_RDONLY)
    try:
        size, position = os.fstat(fd).st_size, 0
        while position < size:
            try:
                header = read_batch_header(os.pread(fd, BATCH_OVERHEAD, position))
            except RecordError:
                break
            next_offset = header.next_offset
            position += header.size
    finally:
        os.close(fd)
    return next_offset


def _complete_swap(directory: Path, swap: Path, base_offset: int) -> None:
    end = _next_offset_of_file(swap, base_offset)
    for other in segment_base_offsets(directory):
        if base_offset <= other < end:
            for suffix in (LOG_SUFFIX, *_INDEX_SUFFIXES):
                (directory / file_name(other, suffix)).unlink(missing_ok=True)
    swap.rename(directory / file_name(base_offset, LOG_SUFFIX))
    txn_swap = directory / (file_name(base_offset, TXN_INDEX_SUFFIX) + SWAP_SUFFIX)
    if txn_swap.exists():
        txn_swap.rename(directory / file_name(base_offset, TXN_INDEX_SUFFIX))
    logger.info("completed the interrupted swap of %s (offsets %d..%d)", swap, base_offset, end)


def _leftovers(names: list[str]) -> bool:
    """Whether ``names`` hold anything ``prepare_directory`` must remove or finish: a file
    with a leftover suffix, or an index whose segment file is missing."""
    stems, index_stems = set(), set()
    for name in names:
        if name.endswith(_LEFTOVER_SUFFIXES):
            return True
        stem, dot, suffix = name.rpartition(".")
        if suffix == "log":
            stems.add(stem)
        elif dot and "." + suffix in _INDEX_SUFFIXES:
            index_stems.add(stem)
    return not index_stems <= stems


def prepare_directory(directory: Path, names: list[str]) -> list[str]:
    """Remove or finish what an interrupted operation left in ``directory``, whose listing
    is ``names``; returns the names of the files it holds then. Nothing more is listed when
    there is nothing to do, as in almost every directory: a broker start lists each of its
    partition directories once."""
    if not _leftovers(names):
        return names
    swaps: list[tuple[Path, int]] = []
    for name in names:
        path = directory / name
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, _TMP_SUFFIX)):
            path.unlink(missing_ok=True)
        elif name.endswith(SWAP_SUFFIX):
            base = _base_offset(name[: -len(SWAP_SUFFIX)], LOG_SUFFIX)
            if base is None and not name.endswith(TXN_INDEX_SUFFIX + SWAP_SUFFIX):
                path.unlink(missing_ok=True)  # an index swap: rebuilt from the log instead
            elif base is not None:
                swaps.append((path, base))
    for swap, base in swaps:
        _complete_swap(directory, swap, base)
    names = file_names(directory)
    logs = set(base_offsets(names))
    for name in names:
        for suffix in _INDEX_SUFFIXES:
            base = _base_offset(name, suffix)
            if base is not None and base not in logs:
                (directory / name).unlink(missing_ok=True)
    return file_names(directory)


def recover_segments(
    segments: Sequence[LogSegment],
    recovery_point: int,
    max_batch_bytes: int,
    epoch_cache: LeaderEpochCache,
    *,
    durable: bool = True,
) -> Sequence[LogSegment]:
    """Recover every segment from the one holding ``recovery_point`` on, fsyncing each
    (``durable=False``: none; the caller syncs the whole file system once afterwards).

    The first segment that loses bytes to a corrupt tail also loses every later segment
    (deleted here), since offsets must stay contiguous; returns the segments kept. Leader
    epochs found in the recovered batches are added to ``epoch_cache``.
    """
    bases = [s.base_offset for s in segments]
    first = max(bisect.bisect_right(bases, recovery_point) - 1, 0)

    def note_epoch(header: BatchHeader) -> None:
        if header.partition_leader_epoch > epoch_cache.latest_epoch:
            epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

    for i in range(first, len(segments)):
        segment = segments[i]
        truncated = segment.recover(max_batch_bytes, note_epoch)
        if durable:
            segment.flush()
        if truncated and i + 1 < len(segments):
            doomed = segments[i + 1 :]
            logger.warning(
                "deleting %d segments after the corrupt tail of %s", len(doomed), segment.log_path
            )
            for later in doomed:
                later.delete(None)
            return segments[: i + 1]
    # Per log at debug level: a start after a crash may recover a hundred thousand logs,
    # and the log manager reports how many.
    logger.debug(
        "recovered %d segments of %s from offset %d",
        len(segments) - first,
        segments[0].log_path.parent if segments else "?",
        recovery_point,
    )
    return segments
