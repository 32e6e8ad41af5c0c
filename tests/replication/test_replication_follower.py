"""The leader's and the follower's halves of replication, with real logs and two replica
managers on one event loop: a follower fetch (replica id) reads to the log end offset and
moves the high watermark, caught-up followers join the ISR and lagging ones leave it, the
follower's copy is byte for byte the leader's, and a diverging follower truncates where
the logs agree (leader epochs, KIP-101/279)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.common.partitions import TopicPartition
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.replication.partition import AppendOrigin, PartitionError
from ads.replication.replica_manager import (
    FetchParams,
    FetchPartition,
    FetchResult,
    PartitionRead,
    ReplicaManager,
)
from ads.storage.config import LogConfig
from ads.storage.log import Log
from replication_support import client_append, client_result, replica_batches

T0 = 1_700_000_000_000
LEADER, FOLLOWER = 1, 2
TOPIC_ID = uuid.uuid4()


def _replica(tmp_path: Path, logs: list[Log], node: int, clock: ManualClock,
             **config: object) -> ReplicaManager:
    rm = ReplicaManager(node, clock=clock)
    cfg = LogConfig().with_overrides(**config)
    log = Log.open(tmp_path / f"n{node}" / "t-0", "t", 0, cfg, clock=clock, recovery_point=0,
                   log_start_offset=0, clean_shutdown=True)
    logs.append(log)
    rm.add_partition("t", TOPIC_ID, 0, log, 0, cfg, leader=False)
    return rm


def _batch(n: int = 1, tag: str = "v") -> memoryview:
    return memoryview(bytes(build_batch([(None, f"{tag}{i}".encode()) for i in range(n)],
                                        timestamp=T0)))


async def _follower_fetch(leader: ReplicaManager, follower: ReplicaManager) -> PartitionRead:
    """One round of the follower's fetcher, done by hand: fetch, then append or truncate."""
    part = follower.get("t", 0)
    assert part is not None
    target = FetchPartition("t", 0, part.log_end_offset, 1 << 20, part.leader_epoch,
                            part.log.latest_epoch)
    params = FetchParams(1 << 20, 1, 0, False, True, replica_id=follower.node_id)
    result = leader.fetch([target], params)
    assert isinstance(result, FetchResult)
    read = result.reads[0]
    if read.diverging_epoch >= 0 or read.diverging_end_offset >= 0:
        part.truncate_to_leader(read.diverging_epoch, read.diverging_end_offset)
    elif read.error == ErrorCode.NONE:
        records = read.records if read.records is not None else b""
        data = records if isinstance(records, bytes) else records.read_bytes()
        key = TopicPartition("t", 0)
        result = follower.append_records(
            {key: memoryview(data)}, AppendOrigin.REPLICATION, 1, 0,
            leader_offsets={key: (read.high_watermark, read.log_start_offset)}).results[key]
        assert not isinstance(result, PartitionError), result
    return read


async def _settle() -> None:
    for _ in range(5):  # ISR changes are recorded by tasks on the loop
        await asyncio.sleep(0)


def _pair(tmp_path: Path, logs: list[Log], clock: ManualClock
          ) -> tuple[ReplicaManager, ReplicaManager, list[tuple[int, list[int]]]]:
    leader = _replica(tmp_path, logs, LEADER, clock)
    follower = _replica(tmp_path, logs, FOLLOWER, clock)
    recorded: list[tuple[int, list[int]]] = []

    async def record(topic: str, index: int, epoch: int, isr: list[int]) -> bool:
        recorded.append((epoch, isr))
        return True

    leader.isr_writer = record
    leader.become_leader("t", 0, 0, [LEADER], [LEADER, FOLLOWER])
    follower.become_follower("t", 0, 0, LEADER)
    return leader, follower, recorded


async def test_replication_follower_fetch_moves_the_high_watermark_and_joins_the_isr(
        tmp_path: Path, logs: list[Log]) -> None:
    clock = ManualClock(T0)
    leader, follower, recorded = _pair(tmp_path, logs, clock)
    lpart = leader.partition("t", 0)
    client_result(leader, "t", _batch(3), -1)
    # The ISR is the leader alone: what it appends is committed at once.
    assert lpart.high_watermark == 3
    read = await _follower_fetch(leader, follower)
    assert read.error == ErrorCode.NONE and read.size > 0
    fpart = follower.get("t", 0)
    assert fpart is not None and fpart.log_end_offset == 3 and fpart.high_watermark == 3
    await _follower_fetch(leader, follower)  # reports offset 3: caught up
    await _settle()
    assert recorded == [(0, [LEADER, FOLLOWER])]
    assert lpart.isr == [LEADER, FOLLOWER]
    # Now the follower holds the high watermark back until it has fetched past an append.
    waiting = client_append(leader, "t", _batch(2), -1).pending
    assert lpart.high_watermark == 3
    assert waiting is not None and not waiting.future.done()
    await _follower_fetch(leader, follower)
    assert lpart.high_watermark == 3
    await _follower_fetch(leader, follower)
    assert lpart.high_watermark == 5
    await asyncio.wait_for(waiting.future, 1)
    assert waiting.errors == {}
    assert replica_batches(tmp_path / "n1", "t", 0) == replica_batches(tmp_path / "n2", "t", 0)


async def test_replication_lagging_follower_leaves_the_isr(tmp_path: Path,
                                                           logs: list[Log]) -> None:
    clock = ManualClock(T0)
    leader, follower, recorded = _pair(tmp_path, logs, clock)
    lpart = leader.partition("t", 0)
    await _follower_fetch(leader, follower)
    await _settle()
    assert lpart.isr == [LEADER, FOLLOWER]
    client_result(leader, "t", _batch(1), -1)
    clock.advance(20_000)
    leader.shrink_isrs(30_000)
    await _settle()
    assert lpart.isr == [LEADER, FOLLOWER]  # caught up 20 s ago: still in sync
    clock.advance(15_000)
    leader.shrink_isrs(30_000)
    await _settle()
    assert recorded[-1] == (0, [LEADER]) and lpart.isr == [LEADER]
    # min.insync.replicas=2 now refuses acks=all; the follower catches up and rejoins.
    lpart.config = lpart.config.with_overrides(min_insync_replicas=2)
    with pytest.raises(Exception, match="NOT_ENOUGH_REPLICAS"):
        client_result(leader, "t", _batch(1), -1)
    await _follower_fetch(leader, follower)
    await _follower_fetch(leader, follower)
    await _settle()
    assert lpart.isr == [LEADER, FOLLOWER]
    client_result(leader, "t", _batch(1), -1)
    assert (leader.isr_expands, leader.isr_shrinks) == (2, 1)  # counted for /metrics


async def test_replication_a_diverging_follower_truncates_to_the_leader(
        tmp_path: Path, logs: list[Log]) -> None:
    clock = ManualClock(T0)
    leader, follower, _ = _pair(tmp_path, logs, clock)
    client_result(leader, "t", _batch(2, "a"), -1)
    await _follower_fetch(leader, follower)
    await _follower_fetch(leader, follower)
    # Broker 2 leads at epoch 1 and takes writes the old leader never sees...
    follower.become_leader("t", 0, 1, [FOLLOWER], [LEADER, FOLLOWER])
    client_result(follower, "t", _batch(3, "b"), 1)
    # ...while the old leader, cut off, still appended at epoch 0 (acks=1).
    client_result(leader, "t", _batch(4, "c"), 1)
    # The old leader becomes a follower at epoch 2 under broker 2, which leads again.
    follower.become_leader("t", 0, 2, [FOLLOWER], [LEADER, FOLLOWER])
    leader.become_follower("t", 0, 2, FOLLOWER)
    read = await _follower_fetch(follower, leader)  # roles swapped: 1 fetches from 2
    assert (read.diverging_epoch, read.diverging_end_offset) == (0, 2)
    assert leader.get("t", 0).log_end_offset == 2  # type: ignore[union-attr]
    for _ in range(3):
        await _follower_fetch(follower, leader)
    assert leader.get("t", 0).log_end_offset == 5  # type: ignore[union-attr]
    ours = replica_batches(tmp_path / "n1", "t", 0)
    theirs = replica_batches(tmp_path / "n2", "t", 0)
    assert ours == theirs and [b[1] for b in ours] == [0, 1]


async def test_replication_append_wakes_a_waiting_follower_fetch(tmp_path: Path,
                                                                logs: list[Log]) -> None:
    clock = ManualClock(T0)
    leader, follower, _ = _pair(tmp_path, logs, clock)
    await _follower_fetch(leader, follower)
    await _settle()
    assert leader.partition("t", 0).isr == [LEADER, FOLLOWER]
    # The follower waits at the log end; an append does not move the high watermark (the
    # follower has not got it yet) but must wake the follower, or acks=all waits out
    # replica.fetch.wait.max.ms on every produce.
    part = follower.get("t", 0)
    assert part is not None
    waiting = leader.fetch([FetchPartition("t", 0, part.log_end_offset, 1 << 20, 0, 0)],
                           FetchParams(1 << 20, 1, 30_000, False, True, replica_id=FOLLOWER))
    assert not isinstance(waiting, FetchResult)
    client_result(leader, "t", _batch(1), -1)
    assert leader.partition("t", 0).high_watermark == 0
    result = await asyncio.wait_for(waiting, 5)  # long before its 30 s deadline
    assert result.bytes > 0


async def test_replication_leader_that_wrote_nothing_follows_again(tmp_path: Path,
                                                                  logs: list[Log]) -> None:
    # Broker 2 leads at epoch 1 and writes nothing, then broker 1 leads again (a preferred
    # election): broker 2's epoch 1 has no batch, so the leader answers a divergence at the
    # end of epoch 0, which is broker 2's log end. Truncating there must drop the empty
    # epoch, or every later fetch diverges again and broker 2 never catches up.
    clock = ManualClock(T0)
    leader, follower, _ = _pair(tmp_path, logs, clock)
    client_result(leader, "t", _batch(3), -1)
    await _follower_fetch(leader, follower)
    await _follower_fetch(leader, follower)
    follower.become_leader("t", 0, 1, [FOLLOWER, LEADER], [LEADER, FOLLOWER])
    leader.become_follower("t", 0, 1, FOLLOWER)
    await _follower_fetch(follower, leader)
    leader.become_leader("t", 0, 2, [LEADER, FOLLOWER], [LEADER, FOLLOWER])
    follower.become_follower("t", 0, 2, LEADER)
    first = await _follower_fetch(leader, follower)
    assert (first.diverging_epoch, first.diverging_end_offset) == (0, 3)
    client_result(leader, "t", _batch(2, "after"), 1)
    second = await _follower_fetch(leader, follower)
    assert (second.diverging_epoch, second.diverging_end_offset) == (-1, -1)
    assert follower.get("t", 0).log_end_offset == 5  # type: ignore[union-attr]
    assert replica_batches(tmp_path / "n1", "t", 0) == replica_batches(tmp_path / "n2", "t", 0)
