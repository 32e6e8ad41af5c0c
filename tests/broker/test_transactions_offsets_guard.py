"""KIP-890 for TxnOffsetCommit: the offsets of a transaction that ended while its
coordinator was being asked are refused (INVALID_TXN_STATE), as a produce is; otherwise they
would wait for a marker that already came and stay pending for good.

Driven in-process on a real broker's loop: the window is an await on another broker's
transaction coordinator, which one broker cannot open, so the test opens it by hand (the
guard taken as the handler takes it, then the transaction's marker written, then the
write)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from ads.coordinator.group.api import OffsetCommit
from ads.coordinator.group.records import OFFSETS_TOPIC
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic

PID, EPOCH = 4242, 0


@pytest.fixture
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("guard")) as b:
        create_topic(b.bootstrap_servers, "in", 1)
        # The group's offsets partition exists (a plain commit creates it).
        c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g"})
        c.commit(offsets=[TopicPartition("in", 0, 1)], asynchronous=False)
        c.close()
        yield b


async def _commit_after_marker(b: EmbeddedBroker, guarded: bool) -> tuple[list[ErrorCode],
                                                                        bool]:
    broker = b.broker
    assert broker is not None
    groups = broker.group_coordinator
    p = groups.partition_of("g")
    guard = broker.replica_manager.start_verification(OFFSETS_TOPIC, p, PID)
    assert guard is not None
    # Meanwhile the transaction is aborted and its marker written to the group's partition.
    assert await groups.complete_transaction(p, PID, EPOCH, False, 0) is ErrorCode.NONE
    results = await groups.txn_commit_offsets("g", PID, EPOCH, -1, "", None,
                                              [OffsetCommit("in", 0, 99, -1, "")],
                                              guard if guarded else None)
    return results, bool(groups.unstable_offsets("g", [("in", 0)]))


def test_txn_offset_commit_refused_when_its_transaction_ended_while_verified(
        embedded: EmbeddedBroker) -> None:
    results, pending = embedded.run(_commit_after_marker(embedded, guarded=True))
    assert results == [ErrorCode.INVALID_TXN_STATE]
    assert not pending  # nothing left waiting for a marker
    # Without the guard the same write goes through and its offsets wait for good: what
    # the guard is for.
    results, pending = embedded.run(_commit_after_marker(embedded, guarded=False))
    assert results == [ErrorCode.NONE] and pending
