"""Recompression of a produced batch into its topic's codec (topic `compression.type`).

A topic whose `compression.type` names a codec (or `uncompressed`) stores every batch with
it, as Kafka does: a batch produced with another codec is decompressed and compressed again
at the topic's level (KIP-390: `compression.gzip.level`, `compression.lz4.level`,
`compression.zstd.level`). `producer` keeps the producer's codec; a batch already in the
topic's codec is kept as it came, whatever level it was compressed at (Kafka does the same).

One batch in, one batch out, and the records are never decoded: the body is inflated and
deflated as one block. The new batch keeps every header field (base offset, leader epoch,
last offset delta, timestamps, producer id, epoch and sequence, record count) except the
codec bits of `attributes`, `batchLength` and the CRC, which covers the new attributes and
body (layout in `ads.records.batch`). Nothing here is stored by this module, so there is no
crash rule of its own: the log appends the result like any produced batch.
"""

from __future__ import annotations

import struct

from ads.records import compression
from ads.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    BatchHeader,
)
from ads.records.crc import crc32c

__all__ = ["TOPIC_CODECS", "recompress_batch", "target_codec"]

Buffer = bytes | bytearray | memoryview

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")

# The codec a topic's compression.type stores; "producer" (absent) keeps the batch's.
TOPIC_CODECS: dict[str, int] = {
    "uncompressed": compression.CompressionType.NONE,
    "gzip": compression.CompressionType.GZIP,
    "snappy": compression.CompressionType.SNAPPY,
    "lz4": compression.CompressionType.LZ4,
    "zstd": compression.CompressionType.ZSTD,
}


def target_codec(compression_type: str) -> int | None:
    """The codec a topic with this `compression.type` stores, None for `producer`."""
    return TOPIC_CODECS.get(compression_type)


def recompress_batch(buf: Buffer, pos: int, header: BatchHeader, codec: int,
                     level: int | None, max_uncompressed_bytes: int) -> bytearray:
    """The batch at ``pos`` with its records compressed with ``codec`` at ``level``.

    Raises ``CorruptRecordError`` when the body does not decompress (or would inflate
    beyond ``max_uncompressed_bytes``).
    """
    with memoryview(buf) as view:
        payload = view[pos + RECORDS_OFFSET: pos + header.size]
        body: Buffer = (compression.decompress(header.compression, payload,
                                               max_size=max_uncompressed_bytes)
                        if header.compression else payload)
        packed = compression.compress(codec, body, level) if codec else bytes(body)
        out = bytearray(view[pos: pos + RECORDS_OFFSET])
    out += packed
    _INT32.pack_into(out, LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    attributes = (header.attributes & ~COMPRESSION_CODEC_MASK) | codec
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, attributes)
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out
