"""Errors raised by the partition log.

Each class names the Kafka error code the broker answers with (``kafka_error``); the broker
maps them at its handler boundary, so this package never imports the protocol layer.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "CorruptIndexError",
    "CorruptRecordsError",
    "InvalidProducerEpochError",
    "KafkaStorageError",
    "LogDirInUseError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "StorageError",
]


class StorageError(Exception):
    """Base class of every error raised by ``ads.storage``."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(StorageError):
    """A fetch or delete-records offset lies outside [log start offset, log end offset]."""

    kafka_error = "OFFSET_OUT_OF_RANGE"


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer's batch does not follow its previous sequence number."""

    kafka_error = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StorageError):
    """A batch carries a producer epoch older than the one the log has seen."""

    kafka_error = "INVALID_PRODUCER_EPOCH"


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from a coordinator older than the last one seen here."""

    kafka_error = "TRANSACTION_COORDINATOR_FENCED"


class RecordBatchTooLargeError(StorageError):
    """The appended records cannot fit in one segment (larger than ``segment.bytes``)."""

    kafka_error = "RECORD_LIST_TOO_LARGE"


class KafkaStorageError(StorageError):
    """A file operation failed; the log may be unusable until restart."""

    kafka_error = "KAFKA_STORAGE_ERROR"


class CorruptRecordsError(StorageError):
    """A stored batch whose records had to be read does not decode (or would inflate past
    the bound of a read); the batch stays as it is, the read fails."""

    kafka_error = "CORRUPT_MESSAGE"


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; it is rebuilt from the log."""


class CheckpointError(StorageError):
    """A checkpoint or snapshot file is malformed."""


class LogDirInUseError(StorageError):
    """Another process holds a log directory's lock (``LogManager.lock_dirs``)."""
