"""Errors raised by the record batch codec.

Each class maps to one Kafka error code; the broker translates them at its handler boundary:

- ``CorruptRecordError``          -> CORRUPT_MESSAGE (2)
- ``InvalidRecordError``          -> INVALID_RECORD (87)
- ``UnsupportedMagicError``       -> UNSUPPORTED_FOR_MESSAGE_FORMAT (43)
- ``UnsupportedCompressionError`` -> UNSUPPORTED_COMPRESSION_TYPE (76)
- ``RecordTooLargeError``         -> MESSAGE_TOO_LARGE (10)
"""

from __future__ import annotations

__all__ = [
    "CorruptRecordError",
    "InvalidRecordError",
    "RecordError",
    "RecordTooLargeError",
    "UnsupportedCompressionError",
    "UnsupportedMagicError",
]


class RecordError(Exception):
    """Base class of every error raised by ``ads.records``."""


class CorruptRecordError(RecordError):
    """The bytes are not a well-formed batch: bad CRC, bad length, truncation, bad varint."""


class InvalidRecordError(RecordError):
    """The batch is well formed but its content breaks a rule (counts, timestamps, keys)."""


class UnsupportedMagicError(RecordError):
    """The batch uses a message format other than v2 (magic 0 and 1 are not accepted)."""


class UnsupportedCompressionError(RecordError):
    """The attributes name a compression codec this broker does not know."""


class RecordTooLargeError(RecordError):
    """A batch is larger than ``max.message.bytes``."""
