"""CRC32C (Castagnoli), the checksum of RecordBatch v2, computed by the C-backed ``crc32c``."""

from __future__ import annotations

import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Return the CRC32C of ``data``; pass a previous result as ``value`` to continue it."""
    return _crc32c.crc32c(data, value)
