"""The replica manager's one append path, driven on an event loop with real logs: validation
by origin (a leader's CLIENT and COORDINATOR writes, a follower's REPLICATION copies),
transaction markers committed like data (min.insync.replicas, the wait for the high
watermark), the last stable offset held below a transaction whose marker is not yet
replicated, and the KIP-890 verification guard refusing an append whose transaction ended
while it was verified."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from ads.common.clock import ManualClock
from ads.protocol.errors import ErrorCode
from ads.records.batch import ControlRecordType, build_batch, build_control_batch
from ads.replication.partition import AppendOrigin, Partition, PartitionError
from ads.replication.replica_manager import ReplicaManager
from ads.storage.config import LogConfig
from ads.storage.log import Log

T0 = 1_700_000_000_000
NODE, OTHER = 1, 2
KEY = ("t", 0)
PID, EPOCH = 7, 0


def _manager(tmp_path: Path, logs: list[Log], **config: object) -> tuple[ReplicaManager,
                                                                         Partition]:
    rm = ReplicaManager(NODE, clock=ManualClock(T0))
    cfg = LogConfig().with_overrides(**config)
    log = Log.open(tmp_path / "t-0", "t", 0, cfg, clock=ManualClock(T0), recovery_point=0,
                   log_start_offset=0, clean_shutdown=True)
    logs.append(log)
    return rm, rm.add_partition("t", uuid.uuid4(), 0, log, 0, cfg)


def _txn_batch(seq: int, n: int = 2) -> memoryview:
    return memoryview(build_batch([(None, b"v%d" % i) for i in range(n)], timestamp=T0,
                                  producer_id=PID, producer_epoch=EPOCH, base_sequence=seq,
                                  is_transactional=True))


def _marker(commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_control_batch(kind, PID, EPOCH, 0, timestamp=T0)


def _with_follower(part: Partition, end: int = 0) -> None:
    """The ISR holds a follower whose log ends at `end`."""
    part.replicas = [NODE, OTHER]
    part.isr = [NODE, OTHER]
    part.replica_end_offsets[OTHER] = end


def _error(rm: ReplicaManager, batch: memoryview | bytes, origin: AppendOrigin) -> ErrorCode:
    result = rm.append_records({KEY: batch}, origin, 1, 1000).results[KEY]
    return result.code if isinstance(result, PartitionError) else ErrorCode.NONE


async def test_append_path_origin_decides_validation(tmp_path: Path, logs: list[Log]) -> None:
    rm, _ = _manager(tmp_path, logs)
    # A producer may not write a marker; a coordinator may, and it ends the transaction.
    assert _error(rm, _txn_batch(0), AppendOrigin.CLIENT) is ErrorCode.NONE
    assert _error(rm, _marker(True), AppendOrigin.CLIENT) is ErrorCode.INVALID_RECORD
    assert _error(rm, _marker(True), AppendOrigin.COORDINATOR) is ErrorCode.NONE
    assert rm.partition("t", 0).last_stable_offset == 3
    # A coordinator's transactional record without a sequence (TxnOffsetCommit) is kept as
    # it is; a producer's would be refused as out of order.
    unsequenced = build_batch([(b"k", b"v")], timestamp=T0, producer_id=PID,
                              producer_epoch=EPOCH, is_transactional=True)
    assert _error(rm, unsequenced, AppendOrigin.COORDINATOR) is ErrorCode.NONE


def _replicate(rm: ReplicaManager, batch: memoryview | bytes, high_watermark: int
               ) -> ErrorCode:
    result = rm.append_records({KEY: batch}, AppendOrigin.REPLICATION, 1, 0,
                               leader_offsets={KEY: (high_watermark, 0)}).results[KEY]
    return result.code if isinstance(result, PartitionError) else ErrorCode.NONE


async def test_append_path_replication_only_on_a_follower(tmp_path: Path,
                                                          logs: list[Log]) -> None:
    rm, part = _manager(tmp_path, logs)
    batch = memoryview(build_batch([(None, b"a"), (None, b"b")], timestamp=T0))
    # Led here: the leader's log is written by its own appends, never as a copy.
    assert _replicate(rm, batch, 2) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    rm.become_follower("t", 0, 1, OTHER)
    # A follower takes no client or coordinator write ...
    assert _error(rm, batch, AppendOrigin.CLIENT) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _error(rm, _marker(True), AppendOrigin.COORDINATOR) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    # ... but copies its leader's batches, offsets kept, and takes its high watermark up to
    # its own log end.
    assert _replicate(rm, batch, 5) is ErrorCode.NONE
    assert (part.log_end_offset, part.high_watermark) == (2, 2)
    # A copy failing its CRC appends nothing.
    corrupt = bytearray(build_batch([(None, b"c")], timestamp=T0, base_offset=2))
    corrupt[-1] ^= 0xFF
    assert _replicate(rm, bytes(corrupt), 5) is ErrorCode.CORRUPT_MESSAGE
    assert part.log_end_offset == 2
    unknown = rm.append_records({("u", 0): batch}, AppendOrigin.REPLICATION, 1, 0,
                                leader_offsets={("u", 0): (0, 0)}).results[("u", 0)]
    assert isinstance(unknown, PartitionError)
    assert unknown.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_append_path_marker_is_committed_like_data(tmp_path: Path,
                                                         logs: list[Log]) -> None:
    rm, part = _manager(tmp_path, logs, min_insync_replicas=2)
    _with_follower(part)
    first = rm.append_records({KEY: _txn_batch(0)}, AppendOrigin.CLIENT, -1, 5000)
    part.replica_end_offsets[OTHER] = 2
    assert part.maybe_advance_high_watermark()
    rm.produce_purgatory.check_and_complete(KEY)
    assert await asyncio.wait_for(first.committed(), 1) == {}
    # The marker waits for the follower, and until then the transaction is unstable:
    # a new leader without the marker would hold it open.
    marker = rm.append_records({KEY: _marker(True)}, AppendOrigin.COORDINATOR, -1, 5000)
    assert marker.pending is not None and not marker.pending.future.done()
    assert part.log_end_offset == 3 and part.high_watermark == 2
    assert part.last_stable_offset == 0
    part.replica_end_offsets[OTHER] = 3
    assert part.maybe_advance_high_watermark()
    rm.produce_purgatory.check_and_complete(KEY)
    assert await asyncio.wait_for(marker.committed(), 1) == {}
    assert part.last_stable_offset == 3
    # Below min.insync.replicas a marker is refused up front, as acks=all data is.
    part.isr = [NODE]
    refused = rm.append_records({KEY: _marker(False)}, AppendOrigin.COORDINATOR, -1, 5000)
    assert refused.errors() == {KEY: ErrorCode.NOT_ENOUGH_REPLICAS}


async def test_append_path_marker_not_committed_when_leadership_moves(
        tmp_path: Path, logs: list[Log]) -> None:
    rm, part = _manager(tmp_path, logs)
    _with_follower(part, 2)
    rm.append_records({KEY: _txn_batch(0)}, AppendOrigin.CLIENT, 1, 5000)
    marker = rm.append_records({KEY: _marker(False)}, AppendOrigin.COORDINATOR, -1, 5000)
    rm.become_follower("t", 0, 1, OTHER)
    assert await asyncio.wait_for(marker.committed(), 1) == {
        KEY: ErrorCode.NOT_LEADER_OR_FOLLOWER}


async def test_append_path_verification_guard_refuses_append_after_abort(
        tmp_path: Path, logs: list[Log]) -> None:
    rm, part = _manager(tmp_path, logs)
    assert _error(rm, _txn_batch(0), AppendOrigin.CLIENT) is ErrorCode.NONE
    # A produce request verifies its transaction with a coordinator elsewhere; while it
    # waits for the answer the transaction is aborted and its marker written here.
    guard = rm.start_verification("t", 0, PID)
    assert guard is not None
    assert _error(rm, _marker(False), AppendOrigin.COORDINATOR) is ErrorCode.NONE
    late = rm.append_records({KEY: _txn_batch(2)}, AppendOrigin.CLIENT, 1, 1000,
                             guards={KEY: guard})
    assert late.errors() == {KEY: ErrorCode.INVALID_TXN_STATE}
    assert part.last_stable_offset == part.log_end_offset == 3  # nothing left open
    # A verification with no marker in between appends.
    guard = rm.start_verification("t", 0, PID)
    assert guard is not None
    ok = rm.append_records({KEY: _txn_batch(2)}, AppendOrigin.CLIENT, 1, 1000,
                           guards={KEY: guard})
    assert ok.errors() == {}
