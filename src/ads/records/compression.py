"""Compression codecs of RecordBatch v2 bodies, with decompression bounded in memory.

The codec id sits in attributes bits 0-2 of a batch. What each codec's bytes look like:

- gzip (1): one or more gzip members (RFC 1952).
- snappy (2): either raw snappy (a varint uncompressed length, then the snappy stream), as
  librdkafka writes, or xerial framing, as the Java client writes::

      magic    8 bytes  0x82 'SNAPPY' 0x00
      version  int32    1
      compat   int32    1
      blocks   repeated: length int32 (big-endian), then that many bytes of raw snappy

  We write xerial framing (32 KiB blocks), which every client reads, and read both.
- lz4 (3): the standard LZ4 frame format (KIP-57). Java readers accept only independent
  blocks, so we write independent blocks without content checksum.
- zstd (4): one or more standard zstd frames.

Compressed bodies live inside a batch covered by its CRC, so there is no separate recovery
rule here: a damaged body fails the batch CRC before it is decompressed.

``decompress`` never holds more than about ``max_size`` bytes of output (plus one gzip chunk
or one snappy block): gzip is inflated incrementally with a cap, snappy lengths are read from
the preambles before anything is inflated, and lz4/zstd inflate into buffers that grow
geometrically up to ``max_size`` and fail as soon as one would overflow. A decompression
bomb therefore costs bounded memory and time and raises ``CorruptRecordError``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum

import cramjam

from ads.records.errors import CorruptRecordError, UnsupportedCompressionError

__all__ = ["CompressionType", "compress", "decompress"]

Buffer = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
XERIAL_BLOCK_SIZE = 32 * 1024

# Kafka's default levels (KIP-390): gzip follows zlib's default, lz4 9, zstd 3.
_GZIP_LEVEL = 6
_LZ4_LEVEL = 9
_ZSTD_LEVEL = 3

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GUESS_RATIO = 8
_MIN_GUESS = 64 * 1024
_GROWTH = 4
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_GZIP_CHUNK = 1 << 20


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch body with ``codec`` (a ``CompressionType`` value) at ``level``
    (KIP-390: gzip 1-9 or -1, lz4 1-17, zstd -131072-22; None or -1 the codec's default;
    snappy has no levels)."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        gzip_level = _GZIP_LEVEL if level is None or level == -1 else level
        return bytes(cramjam.gzip.compress(data, level=gzip_level))
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        compressor = cramjam.lz4.Compressor(
            level=_LZ4_LEVEL if level is None else level, content_checksum=False,
            block_linked=False,
        )
        # The streaming compressor accepts only bytes.
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL if level is None else level))
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, *, max_size: int) -> bytes:
    """Decompress a batch body, raising ``CorruptRecordError`` if it is malformed or would
    inflate to more than ``max_size`` bytes."""
    if codec == CompressionType.NONE:
        if len(data) > max_size:
            raise CorruptRecordError(f"body of {len(data)} bytes exceeds {max_size}")
        return bytes(data)
    if codec == CompressionType.GZIP:
        return _gzip_decompress(data, max_size)
    if codec == CompressionType.SNAPPY:
        if bytes(data[:8]) == XERIAL_MAGIC:
            return _xerial_decompress(data, max_size)
        return _snappy_raw_decompress(data, max_size)
    if codec == CompressionType.LZ4:
        return _decompress_growing(cramjam.lz4.decompress_into, data, max_size, None)
    if codec == CompressionType.ZSTD:
        declared = _zstd_content_size(data)
        if declared is not None and declared > max_size:
            raise CorruptRecordError(f"zstd frame declares {declared} bytes, above {max_size}")
        return _decompress_growing(cramjam.zstd.decompress_into, data, max_size, declared)
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def _gzip_decompress(data: Buffer, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    pending: Buffer = data
    inflater = zlib.decompressobj(_GZIP_WBITS)
    try:
        while True:
            # max_length caps each call's output, so a bomb never inflates past the bound;
            # one call's output is also capped at a chunk, as zlib builds it in pieces and
            # joins them, holding twice what it returns.
            limit = min(max_size - total + 1, _GZIP_CHUNK)
            chunk = inflater.decompress(pending, limit)
            total += len(chunk)
            if total > max_size:
                raise CorruptRecordError(f"gzip body inflates beyond {max_size} bytes")
            parts.append(chunk)
            if inflater.eof:
                if not inflater.unused_data:
                    break
                pending = inflater.unused_data  # another gzip member follows
                inflater = zlib.decompressobj(_GZIP_WBITS)
            elif inflater.unconsumed_tail or len(chunk) == limit:
                pending = inflater.unconsumed_tail  # may be empty: output was still pending
            else:
                raise CorruptRecordError("gzip body is truncated")
    except zlib.error as exc:
        raise CorruptRecordError(f"invalid gzip body: {exc}") from None
    return b"".join(parts)


def _snappy_raw_decompress(data: Buffer, max_size: int, already: int = 0) -> bytes:
    try:
        length = cramjam.snappy.decompress_raw_len(data)
        if already + length > max_size:
            raise CorruptRecordError(f"snappy body declares {length} bytes, above {max_size}")
        return bytes(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"invalid snappy body: {exc}") from None


def _xerial_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER.size:
        raise CorruptRecordError("xerial snappy header is truncated")
    pos = _XERIAL_HEADER.size
    parts: list[bytes] = []
    total = 0
    while pos < len(view):
        if pos + _XERIAL_BLOCK_LENGTH.size > len(view):
            raise CorruptRecordError("xerial snappy block length is truncated")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, pos)
        pos += _XERIAL_BLOCK_LENGTH.size
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes does not fit")
        block = _snappy_raw_decompress(view[pos : pos + length], max_size, total)
        total += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        out += _XERIAL_BLOCK_LENGTH.pack(len(block))
        out += block
    return bytes(out)


def _zstd_content_size(data: Buffer) -> int | None:
    """The Frame_Content_Size of a single-frame zstd body, or None if not declared."""
    if len(data) < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = data[4]
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    dict_id_size = (0, 1, 2, 4)[descriptor & 3]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if fcs_size == 0:
        return None
    start = 5 + (0 if single_segment else 1) + dict_id_size
    if len(data) < start + fcs_size:
        return None
    value = int.from_bytes(data[start : start + fcs_size], "little")
    return value + 256 if fcs_size == 2 else value


def _decompress_growing(
    into: Callable[[Buffer, bytearray], int], data: Buffer, max_size: int, declared: int | None
) -> bytes:
    # The codecs fail fast when the output buffer is full, so a buffer that grows up to
    # max_size bounds memory; the retries cost at most a constant factor of extra work.
    size = declared if declared is not None else max(_MIN_GUESS, len(data) * _GUESS_RATIO)
    size = min(size, max_size)
    while True:
        out = bytearray(size)
        try:
            written = into(data, out)
        except cramjam.DecompressionError as exc:
            del out  # freed before the next, larger buffer: the peak stays one buffer
            if size >= max_size:
                raise CorruptRecordError(
                    f"body is malformed or inflates beyond {max_size} bytes: {exc}"
                ) from None
            size = min(max(size * _GROWTH, _MIN_GUESS), max_size)
            continue
        del out[written:]
        return bytes(out)
