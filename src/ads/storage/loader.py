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
from collections.abc import Sequence
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
)
from ads.storage.segment import LogSegment
from ads.storage.txn_index import TXN_INDEX_SUFFIX

__all__ = [
    "prepare_directory",
    "recover_segments",
    "segment_base_offsets",
]

logger = logging.getLogger(__name__)

_TMP_SUFFIX = ".tmp"
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def _base_offset(name: str, suffix: str) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None  # noqa: PLR2004


def segment_base_offsets(directory: Path) -> list[int]:
    """Base offsets of the ``.log`` files in ``directory``, ascending."""
    offsets = []
    for path in directory.iterdir():
        base = _base_offset(path.name, LOG_SUFFIX)
        if base is not None:
            offsets.append(base)
    return sorted(offsets)


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


def prepare_directory(directory: Path) -> None:
    """Remove or finish what an interrupted operation left in ``directory``."""
    swaps: list[tuple[Path, int]] = []
    for path in list(directory.iterdir()):
        name = path.name
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
    logs = set(segment_base_offsets(directory))
    for path in list(directory.iterdir()):
        for suffix in _INDEX_SUFFIXES:
            base = _base_offset(path.name, suffix)
            if base is not None and base not in logs:
                path.unlink(missing_ok=True)


def recover_segments(
    segments: Sequence[LogSegment],
    recovery_point: int,
    max_batch_bytes: int,
    epoch_cache: LeaderEpochCache,
) -> Sequence[LogSegment]:
    """Recover and fsync every segment from the one holding ``recovery_point`` on.

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
        segment.flush()
        if truncated and i + 1 < len(segments):
            doomed = segments[i + 1 :]
            logger.warning(
                "deleting %d segments after the corrupt tail of %s", len(doomed), segment.log_path
            )
            for later in doomed:
                later.delete(None)
            return segments[: i + 1]
    logger.info(
        "recovered %d segments of %s from offset %d",
        len(segments) - first,
        segments[0].log_path.parent if segments else "?",
        recovery_point,
    )
    return segments
