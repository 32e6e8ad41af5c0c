"""The replica manager and its purgatories, driven directly on an event loop with real logs:
lookups and their error codes, leadership changes and epoch fencing, delayed produce
(completion when the high watermark passes, NOT_ENOUGH_REPLICAS_AFTER_APPEND, timeout) and
delayed fetch (woken by an append, by its deadline, by a leadership change); metadata
changes applied in one batch (`apply_delta`)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from ads.common.clock import ManualClock
from ads.common.later import Later
from ads.metadata.model import PartitionState, TopicState
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from ads.replication.partition import Partition, PartitionError
from ads.replication.replica_manager import (
    FetchParams,
    FetchPartition,
    FetchResult,
    MetadataDelta,
    ReplicaManager,
)
from ads.storage.config import LogConfig
from ads.storage.log import Log
from replication_support import client_append, client_result

T0 = 1_700_000_000_000
NODE = 1
OTHER = 2


def _manager(tmp_path: Path, logs: list[Log], *names: str, **config: object) -> ReplicaManager:
    rm = ReplicaManager(NODE)
    cfg = LogConfig().with_overrides(**config)
    for name in names or ("t",):
        log = Log.open(tmp_path / f"{name}-0", name, 0, cfg, clock=ManualClock(T0),
                       recovery_point=0, log_start_offset=0, clean_shutdown=True)
        logs.append(log)
        rm.add_partition(name, uuid.uuid4(), 0, log, 0, cfg)
    return rm


def _batch(n: int = 1) -> memoryview:
    return memoryview(bytes(build_batch([(None, b"v%d" % i) for i in range(n)], timestamp=T0)))


def _fetch(offset: int = 0, epoch: int = -1, topic: str = "t") -> list[FetchPartition]:
    return [FetchPartition(topic, 0, offset, 1 << 20, epoch)]


PARAMS = FetchParams(max_bytes=1 << 20, min_bytes=1, max_wait_ms=0, read_committed=False,
                     check_epoch=True)


def _replicate(part: Partition, isr: list[int]) -> None:
    """Makes the partition's replicas and ISR hold a follower that has nothing yet."""
    part.replicas = sorted(set(part.replicas) | set(isr) | {OTHER})
    part.isr = isr
    part.replica_end_offsets[OTHER] = 0


async def test_replica_manager_unknown_partition_codes(tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    with pytest.raises(PartitionError) as err:
        client_result(rm, "nope", _batch(), 1)
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    result = rm.fetch(_fetch(topic="nope"), PARAMS)
    assert isinstance(result, FetchResult)
    assert result.reads[0].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and result.error
    with pytest.raises(PartitionError) as err:
        rm.delete_records("t", 7, -1)
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_replica_manager_append_advances_high_watermark_and_reads(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    first = client_result(rm, "t", _batch(3), 1)
    assert (first.base_offset, first.next_offset) == (0, 3)
    part = rm.partition("t", 0)
    assert part.high_watermark == part.log_end_offset == 3
    result = rm.fetch(_fetch(), PARAMS)
    assert isinstance(result, FetchResult)
    read = result.reads[0]
    assert read.error == ErrorCode.NONE and read.high_watermark == 3 and read.size > 0
    # A small read comes as bytes (its file is not held open until the response is sent);
    # a fetch that keeps regions (a share fetch) gets the file region.
    assert isinstance(read.records, bytes) and len(read.records) == read.size
    kept = rm.fetch(_fetch(), PARAMS._replace(inline_bytes=0))
    assert isinstance(kept, FetchResult)
    region = kept.reads[0].records
    assert region is not None and not isinstance(region, bytes)
    assert region.read_bytes() == read.records


async def test_replica_manager_follower_refuses_produce_and_fetch(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    client_result(rm, "t", _batch(), 1)
    heard: list[tuple[str, int, bool, int]] = []
    rm.add_leadership_listener(lambda *change: heard.append(change))
    rm.become_follower("t", 0, 1)
    with pytest.raises(PartitionError) as err:
        client_result(rm, "t", _batch(), 1)
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    result = rm.fetch(_fetch(), PARAMS)
    assert isinstance(result, FetchResult)
    assert result.reads[0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ("t", 0) not in rm and rm.get("t", 0) is not None
    rm.become_leader("t", 0, 2)
    assert ("t", 0) in rm
    assert heard == [("t", 0, False, 1), ("t", 0, True, 2)]
    assert client_result(rm, "t", _batch(), 1).base_offset == 1
    assert rm.partition("t", 0).log.latest_epoch == 2


async def test_replica_manager_newer_epoch_fences_older_requests(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    rm.become_leader("t", 0, 5)
    stale = rm.fetch(_fetch(epoch=4), PARAMS)
    ahead = rm.fetch(_fetch(epoch=6), PARAMS)
    current = rm.fetch(_fetch(epoch=5), PARAMS)
    assert isinstance(stale, FetchResult) and isinstance(ahead, FetchResult)
    assert isinstance(current, FetchResult)
    assert stale.reads[0].error == ErrorCode.FENCED_LEADER_EPOCH
    assert ahead.reads[0].error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert current.reads[0].error == ErrorCode.NONE
    with pytest.raises(PartitionError) as err:
        rm.become_leader("t", 0, 4)
    assert err.value.code == ErrorCode.FENCED_LEADER_EPOCH


async def test_replica_manager_acks_all_answers_at_once_on_one_replica(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    assert client_append(rm, "t", _batch(2), -1, 1000).pending is None
    assert rm.produce_purgatory.watched() == 0


async def test_purgatory_delayed_produce_completes_when_high_watermark_passes(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    part = rm.partition("t", 0)
    _replicate(part, [NODE, OTHER])
    op = client_append(rm, "t", _batch(2), -1, 5000).pending
    assert part.high_watermark == 0  # the follower has nothing yet

    assert op is not None and not op.future.done()
    assert rm.produce_purgatory.watched() == 1
    part.replica_end_offsets[OTHER] = 1  # halfway: not enough
    assert part.maybe_advance_high_watermark()
    rm.produce_purgatory.check_and_complete(("t", 0))
    assert not op.future.done()
    part.replica_end_offsets[OTHER] = 2
    assert part.maybe_advance_high_watermark()
    rm.produce_purgatory.check_and_complete(("t", 0))
    await asyncio.wait_for(op.future, 1)
    assert op.errors == {}
    await asyncio.sleep(0)  # the done-callback unwatches it
    assert rm.produce_purgatory.watched() == 0


async def test_purgatory_delayed_produce_times_out(tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    _replicate(rm.partition("t", 0), [NODE, OTHER])
    op = client_append(rm, "t", _batch(), -1, 50).pending

    assert op is not None
    await asyncio.wait_for(op.future, 2)
    assert op.errors == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}


async def test_purgatory_delayed_produce_isr_shrinks_below_min(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs, min_insync_replicas=2)
    part = rm.partition("t", 0)
    _replicate(part, [NODE, OTHER])
    op = client_append(rm, "t", _batch(), -1, 5000).pending

    assert op is not None
    part.isr = [NODE]  # the follower fell out of the ISR while the produce waited
    rm.produce_purgatory.check_and_complete(("t", 0))
    await asyncio.wait_for(op.future, 1)
    assert op.errors == {("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
    with pytest.raises(PartitionError) as err:  # and the next acks=all is refused up front
        client_result(rm, "t", _batch(), -1)
    assert err.value.code == ErrorCode.NOT_ENOUGH_REPLICAS


async def test_purgatory_delayed_produce_shrink_to_leader_alone_is_not_acknowledged(
        tmp_path: Path, logs: list[Log]) -> None:
    # The shrink recorded for a dead follower both moves the high watermark past the waiting
    # batch (the leader alone is the ISR) and leaves the ISR below min.insync.replicas: the
    # write only the leader holds is refused, not acknowledged.
    rm = _manager(tmp_path, logs, min_insync_replicas=2)
    part = rm.partition("t", 0)
    _replicate(part, [NODE, OTHER])
    op = client_append(rm, "t", _batch(), -1, 5000).pending

    assert op is not None
    rm.update_isr("t", 0, part.leader_epoch, [NODE])
    assert part.high_watermark == part.log_end_offset
    await asyncio.wait_for(op.future, 1)
    assert op.errors == {("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}


async def test_purgatory_delayed_produce_answers_when_leadership_moves(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    _replicate(rm.partition("t", 0), [NODE, OTHER])
    op = client_append(rm, "t", _batch(), -1, 5000).pending

    assert op is not None
    rm.become_follower("t", 0, 1)
    await asyncio.wait_for(op.future, 1)
    assert op.errors == {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}


async def test_purgatory_delayed_fetch_woken_by_append_in_the_same_pass(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs, "a", "b")
    params = PARAMS._replace(max_wait_ms=5000)
    targets = [FetchPartition("a", 0, 0, 1 << 20, -1), FetchPartition("b", 0, 0, 1 << 20, -1)]
    pending = rm.fetch(targets, params)
    assert isinstance(pending, Later)
    assert rm.fetch_purgatory.watched() == 2  # parked on both partitions at once
    client_result(rm, "b", _batch(), 1)
    # Answered within the append's own step, as Kafka's appending thread completes a
    # delayed fetch: no loop pass in between, and nothing left parked.
    assert pending.done
    assert [r.size > 0 for r in pending.result().reads] == [False, True]
    assert rm.fetch_purgatory.watched() == 0


async def test_purgatory_delayed_fetch_short_of_min_bytes_parks_again(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    batch = _batch()
    pending = rm.fetch(_fetch(), PARAMS._replace(max_wait_ms=5000, min_bytes=len(batch) + 1))
    assert isinstance(pending, Later)
    client_result(rm, "t", batch, 1)  # woken, reads one batch: fewer than min_bytes
    assert not pending.done and rm.fetch_purgatory.watched() == 1
    client_result(rm, "t", _batch(), 1)
    assert pending.done and pending.result().bytes == 2 * len(batch)
    assert rm.fetch_purgatory.watched() == 0


async def test_purgatory_delayed_fetch_answers_at_its_deadline(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    loop = asyncio.get_running_loop()
    start = loop.time()
    pending = rm.fetch(_fetch(), PARAMS._replace(max_wait_ms=100))
    assert not isinstance(pending, FetchResult)
    result = await asyncio.wait_for(pending, 2)  # type: ignore[arg-type]
    assert result.bytes == 0 and result.reads[0].error == ErrorCode.NONE
    assert loop.time() - start >= 0.09
    assert rm.fetch_purgatory.watched() == 0


async def test_purgatory_delayed_fetch_answers_when_leadership_moves(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    pending = rm.fetch(_fetch(), PARAMS._replace(max_wait_ms=5000))
    assert not isinstance(pending, FetchResult)
    rm.become_follower("t", 0, 1)
    result = await asyncio.wait_for(pending, 1)  # type: ignore[arg-type]
    assert result.reads[0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_purgatory_cancelled_fetch_leaves_nothing_behind(
        tmp_path: Path, logs: list[Log]) -> None:
    rm = _manager(tmp_path, logs)
    pending = rm.fetch(_fetch(), PARAMS._replace(max_wait_ms=5000))
    task = asyncio.ensure_future(pending)  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert rm.fetch_purgatory.watched() == 0


class _Logs:
    """A log store making real logs under a directory, remembering what it deleted."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.deleted: list[tuple[str, int]] = []

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        return Log.open(self.root / f"{topic}-{partition}", topic, partition,
                        config or LogConfig(), clock=ManualClock(T0), recovery_point=0,
                        log_start_offset=0, clean_shutdown=True)

    def delete_log(self, topic: str, partition: int) -> None:
        self.deleted.append((topic, partition))

    @property
    def log_dirs(self) -> list[Path]:
        return [self.root]


async def test_replica_manager_apply_delta_opens_leads_follows_and_drops(
        tmp_path: Path) -> None:
    """One batch of metadata changes: replicas new here are opened and lead or follow as
    their state says, one moved away is dropped with its log, a deleted topic goes; the
    leadership listeners hear every change."""
    rm = ReplicaManager(NODE)
    logs = _Logs(tmp_path)
    rm.logs = logs
    heard: list[tuple[str, int, bool, int | None]] = []
    rm.add_leadership_listener(lambda *change: heard.append(change))
    cfg = LogConfig()

    def topic(name: str, *parts: PartitionState) -> TopicState:
        return TopicState(name, uuid.UUID(int=len(name)), list(parts))

    a = topic("a", PartitionState(0, NODE, 3, [NODE, OTHER], [NODE, OTHER]),
              PartitionState(1, OTHER, 5, [OTHER, NODE], [OTHER, NODE]),
              PartitionState(2, OTHER, 0, [OTHER], [OTHER]))
    b = topic("b", PartitionState(0, NODE, 0, [NODE], [NODE]))
    rm.apply_delta(MetadataDelta([(a, cfg), (b, cfg)]))
    assert rm.partition("a", 0).leader_epoch == 3
    assert rm.replica("a", 1).leader_id == OTHER and not rm.replica("a", 1).is_leader
    assert rm.get("a", 2) is None
    assert sorted(heard) == [("a", 0, True, 3), ("a", 1, False, 5), ("b", 0, True, 0)]

    heard.clear()
    moved = topic("a", PartitionState(0, OTHER, 4, [OTHER, NODE], [OTHER, NODE]),
                  PartitionState(1, OTHER, 5, [OTHER], [OTHER]))
    rm.apply_delta(MetadataDelta([(moved, cfg)], deleted=["b"]))
    assert rm.replica("a", 0).leader_id == OTHER and not rm.replica("a", 0).is_leader
    assert rm.get("a", 1) is None and rm.get("b", 0) is None
    assert sorted(logs.deleted) == [("a", 1), ("b", 0)]
    assert sorted(heard) == [("a", 0, False, 4), ("a", 1, False, None), ("b", 0, False, None)]

    # A fenced broker (its registration lost) leads nothing and follows nobody.
    heard.clear()
    led = topic("a", PartitionState(0, NODE, 6, [OTHER, NODE], [OTHER, NODE]))
    rm.apply_delta(MetadataDelta([(led, cfg)], fenced=True))
    assert rm.replica("a", 0).leader_id == -1 and not rm.replica("a", 0).is_leader
    for part in rm:
        part.log.close()
