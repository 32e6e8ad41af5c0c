"""Compression codecs: round trips, Kafka framings, and bounded decompression."""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import cramjam
import pytest

from ads.records.compression import XERIAL_MAGIC, CompressionType, compress, decompress
from ads.records.errors import CorruptRecordError, UnsupportedCompressionError

CODECS = [c for c in CompressionType if c != CompressionType.NONE]
BOMB_SIZE = 100 << 20
BOUND = 1 << 20


@pytest.fixture(scope="module")
def zeros() -> bytes:
    return bytes(BOMB_SIZE)


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("size", [0, 1, 1000, 200_000])
def test_records_compression_round_trip(codec: CompressionType, size: int) -> None:
    data = bytes(i * 7 % 251 for i in range(size))
    packed = compress(codec, bytearray(data))
    assert decompress(codec, memoryview(packed), max_size=size) == data


def test_records_compression_snappy_writes_xerial_blocks() -> None:
    data = b"abcdefgh" * 10_000  # spans several 32 KiB blocks
    packed = compress(CompressionType.SNAPPY, data)
    assert packed.startswith(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    assert decompress(CompressionType.SNAPPY, packed, max_size=len(data)) == data


def test_records_compression_snappy_reads_raw() -> None:
    data = b"librdkafka writes raw snappy" * 100
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw, max_size=len(data)) == data


def test_records_compression_lz4_frame_is_kafka_compatible() -> None:
    packed = compress(CompressionType.LZ4, b"x" * 1000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg = packed[4]
    assert flg >> 6 == 1  # frame version
    assert flg & 0x20  # independent blocks, required by Java readers


def test_records_compression_gzip_multiple_members() -> None:
    packed = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, packed, max_size=100) == b"first second"


def test_records_compression_zstd_streamed_frame_without_size() -> None:
    compressor = cramjam.zstd.Compressor(level=3)
    data = bytes(range(256)) * 4000
    compressor.compress(data)
    packed = bytes(compressor.finish())
    assert decompress(CompressionType.ZSTD, packed, max_size=len(data)) == data
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, packed, max_size=len(data) - 1)


@pytest.mark.parametrize("codec", CODECS)
def test_records_compression_exact_bound(codec: CompressionType) -> None:
    data = b"q" * 5000
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=5000) == data
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed, max_size=4999)


def _bombs(zeros: bytes) -> dict[str, tuple[CompressionType, bytes]]:
    lz4_sized = cramjam.lz4.Compressor(level=1, content_checksum=False, block_linked=False)
    lz4_sized.compress(zeros)
    zstd_stream = cramjam.zstd.Compressor(level=1)
    zstd_stream.compress(zeros)
    return {
        "gzip": (CompressionType.GZIP, bytes(cramjam.gzip.compress(zeros, level=1))),
        "snappy-xerial": (CompressionType.SNAPPY, compress(CompressionType.SNAPPY, zeros)),
        "snappy-raw": (CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(zeros))),
        "lz4": (CompressionType.LZ4, bytes(lz4_sized.finish())),
        "zstd-sized": (CompressionType.ZSTD, bytes(cramjam.zstd.compress(zeros, level=1))),
        "zstd-streamed": (CompressionType.ZSTD, bytes(zstd_stream.finish())),
    }


def test_records_compression_bombs_are_bounded(zeros: bytes) -> None:
    bombs = _bombs(zeros)
    del zeros
    for name, (codec, packed) in bombs.items():
        tracemalloc.start()
        try:
            with pytest.raises(CorruptRecordError):
                decompress(codec, packed, max_size=BOUND)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # A loose limit: inflating the whole 100 MB would take far more memory.
        assert peak < 8 * BOUND, (name, peak)


@pytest.mark.parametrize("codec", CODECS)
def test_records_compression_garbage_is_corrupt(codec: CompressionType) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\xff" * 64, max_size=BOUND)
    packed = compress(codec, bytes(range(256)) * 100)
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed[: len(packed) // 2], max_size=BOUND)


def test_records_compression_xerial_truncated_block() -> None:
    packed = compress(CompressionType.SNAPPY, b"z" * 100)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, packed[:18], max_size=BOUND)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, packed[:-1], max_size=BOUND)


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_records_compression_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"x", max_size=10)
