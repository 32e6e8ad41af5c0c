"""Batches a follower copies from its leader, described for the log's append.

A follower writes what the leader wrote: the same offsets, leader epochs and bytes, so the
two logs are identical below the high watermark. These functions read only batch headers
(``ads.records.batch``): where to split a fetched run of batches so each write fits one
segment, and what the segment's indexes and the leader-epoch cache need of each batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ads.records.batch import BatchHeader
from ads.storage.errors import OffsetOutOfRangeError
from ads.storage.files import BatchInfo

Headers = Sequence[tuple[int, BatchHeader]]


class ReplicatedRun(NamedTuple):
    start: int  # position of the first batch in the fetched bytes
    end: int  # position after the last
    batches: list[BatchInfo]  # positions relative to `start`
    epochs: list[tuple[int, int]]  # (leader epoch, start offset) newer than the log's
    max_timestamp: int
    offset_of_max_timestamp: int


def segment_groups(headers: Headers, segment_bytes: int) -> list[Headers]:
    """Consecutive runs of batches, each at most `segment_bytes` long (or one batch)."""
    groups: list[Headers] = []
    start = 0
    while start < len(headers):
        first_pos = headers[start][0]
        end = start + 1
        while end < len(headers) and (
                headers[end][0] + headers[end][1].size - first_pos <= segment_bytes):
            end += 1
        groups.append(headers[start:end])
        start = end
    return groups


def describe_run(headers: Headers, latest_epoch: int) -> ReplicatedRun:
    """What the log writes for one group; offsets must only grow."""
    first_pos = headers[0][0]
    batches: list[BatchInfo] = []
    epochs: list[tuple[int, int]] = []
    max_timestamp, offset_of_max = -1, headers[0][1].base_offset
    next_offset = headers[0][1].base_offset
    for pos, header in headers:
        if header.base_offset < next_offset:
            raise OffsetOutOfRangeError(
                f"replicated batch at {header.base_offset} goes back before {next_offset}")
        if header.partition_leader_epoch > latest_epoch:
            latest_epoch = header.partition_leader_epoch
            epochs.append((latest_epoch, header.base_offset))
        batches.append((pos - first_pos, header.size, header.base_offset, header.last_offset,
                        header.max_timestamp))
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, header.base_offset
        next_offset = header.last_offset + 1
    last_pos, last_header = headers[-1]
    return ReplicatedRun(first_pos, last_pos + last_header.size, batches, epochs,
                         max_timestamp, offset_of_max)
