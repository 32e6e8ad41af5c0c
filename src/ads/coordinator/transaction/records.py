"""Records of `__transaction_state`, in Kafka's TransactionLogKey/Value layout.

Key and value start with a big-endian int16 schema version, followed by the struct of that
version (schemas in `ads.protocol.messages`, from Kafka's internal-topics JSON)::

    key    int16 0 | TransactionLogKey v0: transactional_id string
    value  int16 1 | TransactionLogValue v1 (flexible):
                     producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32 |
                     transaction_status int8 (state.TxnState) |
                     transaction_partitions [topic compact string, partition_ids [int32]] |
                     transaction_last_update_timestamp_ms int64 |
                     transaction_start_timestamp_ms int64 |
                     tagged: previous_producer_id (0), next_producer_id (1),
                             client_transaction_version (2)

Version 0 values (what Kafka before 4.0 writes) are read too. A null value is a tombstone:
the id expired (`transactional.id.expiration.ms`) and is forgotten; compaction keeps only
the last record of each id.

Crash rule: one transition is one record in one batch, committed before the coordinator acts
on it. A batch torn by a crash fails its CRC and is cut by log recovery, so the state after
a reload is the last transition the coordinator acted on, or the one before it (whose
effects it then repeats: markers of a PREPARE_* state are written again, which partitions
accept as a marker of an already ended transaction).
"""

from __future__ import annotations

import struct

from ads.common.partitions import TopicPartition
from ads.coordinator.transaction.state import TransactionMetadata, TxnState
from ads.protocol import messages as m
from ads.protocol.errors import DecodeError

TRANSACTION_STATE_TOPIC = "__transaction_state"

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 1


class TransactionRecordError(Exception):
    """A record of `__transaction_state` could not be decoded."""


def txn_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + m.TransactionLogKey(
        transactional_id=transactional_id).encode(KEY_VERSION)


def txn_value(meta: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    value = m.TransactionLogValue(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
        transaction_timeout_ms=meta.timeout_ms, transaction_status=int(meta.state),
        transaction_partitions=[m.TransactionLogValue.PartitionsSchema(topic=t, partition_ids=p)
                                for t, p in by_topic.items()],
        transaction_last_update_timestamp_ms=meta.last_update_ms,
        transaction_start_timestamp_ms=meta.start_ms)
    return _VERSION.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def _version(data: bytes) -> int:
    if len(data) < _VERSION.size:
        raise TransactionRecordError(f"record of {len(data)} bytes has no version")
    return int(_VERSION.unpack_from(data)[0])


def parse_key(data: bytes) -> str:
    version = _version(data)
    if version != KEY_VERSION:
        raise TransactionRecordError(f"unknown transaction log key version {version}")
    try:
        return m.TransactionLogKey.decode(memoryview(data)[2:], version).transactional_id
    except DecodeError as exc:
        raise TransactionRecordError(str(exc)) from exc


def parse_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    version = _version(data)
    if not 0 <= version <= m.TransactionLogValue.VALID_VERSIONS[1]:
        raise TransactionRecordError(f"unknown transaction log value version {version}")
    try:
        v = m.TransactionLogValue.decode(memoryview(data)[2:], version)
        state = TxnState(v.transaction_status)
    except (DecodeError, ValueError) as exc:
        raise TransactionRecordError(str(exc)) from exc
    partitions = {TopicPartition(p.topic, i)
                  for p in v.transaction_partitions or [] for i in p.partition_ids}
    return TransactionMetadata(
        transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state,
        partitions, v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms)
