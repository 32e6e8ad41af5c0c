"""KIP-890 part 1: a transactional batch is appended only to a partition of its producer's
ongoing transaction.

A partition leader asks the transaction coordinator of the request's transactional id
whether the partition belongs to the id's ongoing transaction with the batch's producer id
and epoch: directly when the coordinator runs on this broker, otherwise with one
AddPartitionsToTxn v4 `verify_only` request per produce request to the coordinator's
broker (`markers.BrokerMarkerWriter.verify`). This closes Kafka's hanging-transaction
hole: a late retry of a batch whose transaction already ended can no longer open a
transaction nobody will end (it would hold the last stable offset forever).

Answers: the coordinator's (INVALID_TXN_STATE for a partition not added or a transaction
not ongoing, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING); a coordinator that
cannot answer (moved, loading, unreachable) gives NOT_ENOUGH_REPLICAS, which producers
retry, as in Kafka; for TxnOffsetCommit (`verify`) it gives COORDINATOR_NOT_AVAILABLE, the
error a producer retries there (librdkafka aborts the transaction on NOT_ENOUGH_REPLICAS).
A transactional batch in a request without a transactional id is INVALID_TXN_STATE.
Cost: one byte read per partition of every produce request; a transactional batch's
header is read once more. Used from the event loop only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ads.common.partitions import TopicPartition
from ads.protocol.errors import ErrorCode
from ads.records import batch as rb
from ads.records.errors import RecordError

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext
    from ads.protocol import messages as m

# What a coordinator that cannot answer now means for the producer: retry.
_RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_LEADER_OR_FOLLOWER})


def is_transactional(records: memoryview | None) -> bool:
    """Whether the first batch's attributes say transactional (a byte read)."""
    # The low byte of the big-endian attributes holds the transactional bit.
    return bool(records and len(records) >= rb.BATCH_OVERHEAD
                and records[rb.ATTRIBUTES_OFFSET + 1] & rb.TRANSACTIONAL_FLAG_MASK)


def transactional_header(records: memoryview | None) -> rb.BatchHeader | None:
    """The header of a transactional batch; None for anything else (which the partition
    validates as usual)."""
    if records is None or not is_transactional(records):
        return None
    try:
        return rb.read_batch_header(records)
    except RecordError:
        return None


def _local(broker: BrokerContext, txn_id: str) -> bool:
    coordinator = broker.transaction_coordinator
    return coordinator.runtime.shard(coordinator.partition_of(txn_id)) is not None


def remote_checks(broker: BrokerContext, req: m.ProduceRequest
                  ) -> tuple[int, int, list[TopicPartition]] | None:
    """The producer id, epoch and partitions to verify with a coordinator on another
    broker before appending; None when there are none."""
    txn_id = req.transactional_id
    if not txn_id:
        return None
    found: tuple[int, int] | None = None
    partitions: list[TopicPartition] = []
    for td in req.topic_data:
        for pd in td.partition_data:
            header = transactional_header(pd.records)
            if header is not None:
                found = found or (header.producer_id, header.producer_epoch)
                partitions.append(TopicPartition(td.name, pd.index))
    if found is None or _local(broker, txn_id):
        return None
    return found[0], found[1], partitions


async def verify_remotely(broker: BrokerContext, txn_id: str, producer_id: int,
                          producer_epoch: int, partitions: list[TopicPartition],
                          retry: ErrorCode = ErrorCode.NOT_ENOUGH_REPLICAS
                          ) -> dict[TopicPartition, ErrorCode]:
    """The coordinator's verdicts; `retry` for a coordinator that cannot answer."""
    verdicts = await broker.txn_requests.verify(txn_id, producer_id, producer_epoch,
                                                partitions)
    return {p: retry if e in _RETRIABLE else e for p, e in verdicts.items()}


async def verify(broker: BrokerContext, txn_id: str, producer_id: int, producer_epoch: int,
                 partition: TopicPartition) -> ErrorCode:
    """Whether one partition belongs to the id's ongoing transaction, wherever its
    coordinator runs (TxnOffsetCommit asks it of the group's `__consumer_offsets`
    partition)."""
    if _local(broker, txn_id):
        coordinator = broker.transaction_coordinator
        return coordinator.verify_partitions(txn_id, producer_id, producer_epoch,
                                             [partition])[partition]
    found = await verify_remotely(broker, txn_id, producer_id, producer_epoch, [partition],
                                  retry=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return found[partition]


def check(broker: BrokerContext, txn_id: str | None, partition: TopicPartition,
          records: memoryview | None, verdicts: dict[TopicPartition, ErrorCode]) -> ErrorCode:
    """The error of one partition's batch (NONE: append it)."""
    header = transactional_header(records)
    if header is None:
        return ErrorCode.NONE
    if not txn_id:
        return ErrorCode.INVALID_TXN_STATE
    verdict = verdicts.get(partition)
    if verdict is not None:
        return verdict
    if not _local(broker, txn_id):
        return ErrorCode.NOT_ENOUGH_REPLICAS  # not verified: the producer retries
    coordinator = broker.transaction_coordinator
    found = coordinator.verify_partitions(txn_id, header.producer_id, header.producer_epoch,
                                          [partition])
    return found[partition]
