"""The share-partition state machine (KIP-932): acquisition of whole batches, locks and their
expiry, delivery counts, acknowledgements and the in-flight window."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ads.protocol.errors import ErrorCode
from ads.replication.share_partition import (
    AcknowledgeType,
    RecordState,
    ShareConfig,
    SharePartition,
)

ACCEPT, RELEASE, REJECT, GAP = (int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE),
                                int(AcknowledgeType.REJECT), int(AcknowledgeType.GAP))
CONFIG = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=100)
BATCHES = [(0, 4), (5, 9), (10, 14)]


def states(sp: SharePartition) -> list[tuple[int, int, str, int]]:
    return [(s.first, s.last, s.state.name, s.delivery_count) for s in sp.spans]


def test_share_partition_acquires_whole_batches_up_to_max_records() -> None:
    sp = SharePartition(0, CONFIG)
    assert sp.next_fetch_offset() == 0
    acquired, lo, hi = sp.acquire("a", BATCHES, 7, now_ms=0)
    # 7 records asked: the second batch is taken whole, the third is left.
    assert acquired == [(0, 9, 1)] and (lo, hi) == (0, 2)
    assert sp.end_offset == 10 and sp.next_fetch_offset() == 10
    again, lo, hi = sp.acquire("b", BATCHES, 100, now_ms=0)  # the same batches read again
    assert again == [(10, 14, 1)] and (lo, hi) == (2, 3)


def test_share_partition_record_limit_splits_a_batch() -> None:
    """record_limit (KIP-1206): never more than max_records, the batch split where the
    limit falls; its rest is acquired by the next fetch, from the middle of the batch."""
    sp = SharePartition(0, CONFIG)
    acquired, lo, hi = sp.acquire("a", BATCHES, 7, now_ms=0, record_limit=True)
    assert acquired == [(0, 6, 1)] and (lo, hi) == (0, 2)
    assert sp.end_offset == 7 and sp.next_fetch_offset() == 7
    acquired, _, _ = sp.acquire("b", BATCHES[1:], 2, now_ms=0, record_limit=True)
    assert acquired == [(7, 8, 1)]
    # Released records are split too: 2 of the 5 released go, 3 stay available.
    assert sp.acknowledge("a", 0, 4, [RELEASE], now_ms=1) == ErrorCode.NONE
    acquired, _, _ = sp.acquire("c", BATCHES[:1], 2, now_ms=2, record_limit=True)
    assert acquired == [(0, 1, 2)]
    assert states(sp)[:2] == [(0, 1, "ACQUIRED", 2), (2, 4, "AVAILABLE", 1)]


def test_share_partition_renew_extends_the_lock() -> None:
    """RENEW (KIP-1222): the records stay the member's, delivery count unchanged, locked for
    another lock duration from the renewal; nothing is written for it."""
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", BATCHES[:1], 100, now_ms=0)
    renew = int(AcknowledgeType.RENEW)
    assert sp.prepare_acknowledge("a", 0, 1, [renew], now_ms=800) == []
    assert sp.acknowledge("b", 0, 1, [renew], now_ms=800) == ErrorCode.INVALID_RECORD_STATE
    sp.expire(1000)  # 2-4 were not renewed
    assert states(sp) == [(0, 1, "ACQUIRED", 1), (2, 4, "AVAILABLE", 1)]
    assert sp.next_deadline_ms() == 1800
    # Per-offset types mixing RENEW and ACCEPT: only the ACCEPT is written.
    assert sp.prepare_acknowledge("a", 0, 1, [renew, ACCEPT], now_ms=1500) == [
        (1, 1, int(RecordState.ACKNOWLEDGED), 1)]


def test_share_partition_acknowledgements_move_the_start() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", BATCHES[:2], 100, now_ms=0)
    assert sp.acknowledge("a", 0, 4, [ACCEPT], now_ms=1) == ErrorCode.NONE
    assert sp.start_offset == 5
    # Per-offset types: 5 accepted, 6 released, 7-9 rejected.
    types = [ACCEPT, RELEASE, REJECT, REJECT, REJECT]
    assert sp.acknowledge("a", 5, 9, types, now_ms=1) == ErrorCode.NONE
    assert sp.start_offset == 6
    assert states(sp) == [(6, 6, "AVAILABLE", 1), (7, 9, "ARCHIVED", 1)]
    assert sp.next_fetch_offset() == 6
    acquired, _, _ = sp.acquire("b", [(5, 9)], 100, now_ms=2)
    assert acquired == [(6, 6, 2)]  # redelivered with a higher count; 7-9 stay archived


def test_share_partition_refuses_records_not_held() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", BATCHES[:1], 100, now_ms=0)
    assert sp.acknowledge("b", 0, 4, [ACCEPT], 1) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 3, 7, [ACCEPT], 1) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 0, 4, [ACCEPT, ACCEPT], 1) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 4, [9], 1) == ErrorCode.INVALID_REQUEST
    assert states(sp) == [(0, 4, "ACQUIRED", 1)]  # nothing changed
    assert sp.acknowledge("a", 0, 4, [ACCEPT], 1) == ErrorCode.NONE
    assert sp.acknowledge("a", 0, 4, [ACCEPT], 1) == ErrorCode.INVALID_RECORD_STATE


def test_share_partition_locks_expire_and_the_count_limit_archives() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", BATCHES[:1], 100, now_ms=0)
    assert sp.next_deadline_ms() == 1000
    assert not sp.expire(999)
    assert sp.expire(1000)
    assert states(sp) == [(0, 4, "AVAILABLE", 1)]
    # Too late: the lock is gone.
    assert sp.acknowledge("a", 0, 4, [ACCEPT], 1001) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acquire("b", BATCHES[:1], 100, now_ms=1001)[0] == [(0, 4, 2)]
    assert sp.acknowledge("b", 0, 4, [RELEASE], 1002) == ErrorCode.NONE
    assert sp.acquire("a", BATCHES[:1], 100, now_ms=1003)[0] == [(0, 4, 3)]
    assert sp.acknowledge("a", 0, 4, [RELEASE], 1004) == ErrorCode.NONE
    # Released at the limit (3 deliveries): archived, and out of the window.
    assert sp.start_offset == 5 and not sp.spans


def test_share_partition_release_member_and_record_lock_limit() -> None:
    sp = SharePartition(0, ShareConfig(1000, 5, max_record_locks=10))
    sp.acquire("a", BATCHES, 100, now_ms=0)
    assert sp.end_offset == 10  # the window holds at most 10 records
    assert sp.next_fetch_offset() is None
    assert sp.release_member("a")
    assert sp.next_fetch_offset() == 0
    assert {s.state for s in sp.spans} == {RecordState.AVAILABLE}


def test_share_partition_gap_before_a_batch_and_log_start() -> None:
    sp = SharePartition(0, CONFIG)
    acquired, _, _ = sp.acquire("a", [(3, 5)], 100, now_ms=0)  # 0-2 were compacted away
    assert acquired == [(3, 5, 1)]
    assert states(sp)[0] == (0, 2, "ARCHIVED", 0)
    sp.move_start(4)
    assert sp.start_offset == 4 and states(sp) == [(4, 5, "ACQUIRED", 1)]


def test_share_partition_counts_records_by_span() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", BATCHES, 100, now_ms=0)
    types = [ACCEPT, ACCEPT, RELEASE, REJECT, RELEASE]
    assert sp.acknowledge("a", 0, 4, types, now_ms=1) == ErrorCode.NONE
    assert sp.expire(1000)  # 5-14: their locks expire, they come back
    c = sp.counts()
    assert (c.start_offset, c.end_offset, c.in_flight, c.acquired) == (2, 15, 12, 0)
    assert (c.acknowledged, c.archived, c.redelivered) == (2, 1, 0)
    sp.acquire("b", BATCHES, 100, now_ms=1001)  # 2, 4 and 5-14 delivered a second time
    assert sp.acknowledge("b", 5, 9, [ACCEPT], now_ms=1002) == ErrorCode.NONE
    sp.release_member("b")
    c = sp.counts()
    assert (c.in_flight, c.acquired, c.acknowledged, c.archived, c.redelivered) == (
        7, 0, 7, 1, 12)
    sp.acquire("a", BATCHES, 100, now_ms=1003)  # the third delivery: at the limit
    assert sp.counts().acquired == 7
    sp.release_member("a")
    c = sp.counts()
    assert (c.start_offset, c.in_flight, c.acquired, c.archived, c.redelivered) == (
        15, 0, 0, 8, 19)


@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 14), st.integers(0, 4),
                          st.sampled_from([ACCEPT, RELEASE, REJECT])), max_size=30))
def test_share_partition_spans_stay_contiguous(ops: list[tuple[str, int, int, int]]) -> None:
    sp = SharePartition(0, CONFIG)
    now = 0
    for member, first, length, ack in ops:
        now += 300
        sp.acquire(member, BATCHES, 6, now)
        sp.acknowledge(member, first, first + length, [ack], now)
        expected = sp.start_offset
        for span in sp.spans:
            assert span.first == expected and span.last >= span.first
            expected = span.last + 1
        assert expected == sp.end_offset
        counts = sp.counts()
        done = sum(s.last - s.first + 1 for s in sp.spans
                   if s.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))
        # Every record done was counted once, where its span settled.
        assert counts.acknowledged + counts.archived == sp.start_offset + done
        assert counts.in_flight == sp.end_offset - sp.start_offset - done
        assert not sp.spans or sp.spans[0].state not in (RecordState.ACKNOWLEDGED,
                                                          RecordState.ARCHIVED)
