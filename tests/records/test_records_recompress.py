"""Recompressing a batch into a topic's codec (``ads.records.recompress``): every codec
pair keeps the records and every header field but the codec, length and CRC."""

from __future__ import annotations

import itertools

import pytest

from ads.records.batch import (
    RecordSpec,
    build_batch,
    decode_records,
    read_batch_header,
    validate_batches,
)
from ads.records.compression import CompressionType
from ads.records.errors import CorruptRecordError
from ads.records.recompress import recompress_batch, target_codec

MAX = 1 << 24
SPECS = [RecordSpec(b"k%d" % i, b"value %d " % i * 20, [("h", b"x")], 1_000 + i)
         for i in range(50)]


@pytest.mark.parametrize(("source", "target"),
                         list(itertools.permutations(list(CompressionType), 2)))
def test_recompress_every_codec_pair(source: CompressionType, target: CompressionType) -> None:
    batch = build_batch(SPECS, base_offset=7, compression=source, producer_id=5,
                        producer_epoch=1, base_sequence=3, partition_leader_epoch=2)
    before = read_batch_header(batch)
    out = recompress_batch(batch, 0, before, target, None, MAX)
    (_, after), = validate_batches(out, max_batch_bytes=MAX)  # CRC and counts hold
    assert after.compression == target
    assert after._replace(crc=0, batch_length=0, attributes=0) == before._replace(
        crc=0, batch_length=0, attributes=0)
    assert after.attributes & ~7 == before.attributes & ~7
    assert decode_records(out, max_uncompressed_bytes=MAX) == decode_records(
        batch, max_uncompressed_bytes=MAX)


def test_recompress_levels_change_the_size() -> None:
    batch = build_batch(SPECS)
    header = read_batch_header(batch)
    fast = recompress_batch(batch, 0, header, CompressionType.ZSTD, -50, MAX)
    best = recompress_batch(batch, 0, header, CompressionType.ZSTD, 19, MAX)
    assert len(best) < len(fast)
    low = recompress_batch(batch, 0, header, CompressionType.GZIP, 1, MAX)
    high = recompress_batch(batch, 0, header, CompressionType.GZIP, 9, MAX)
    assert len(high) <= len(low)


def test_recompress_bounded_inflation() -> None:
    batch = build_batch([RecordSpec(b"k", b"\0" * 100_000)], compression=CompressionType.ZSTD)
    with pytest.raises(CorruptRecordError):
        recompress_batch(batch, 0, read_batch_header(batch), CompressionType.NONE, None, 1000)


def test_recompress_target_codec_names() -> None:
    assert target_codec("producer") is None
    assert target_codec("uncompressed") == CompressionType.NONE
    assert target_codec("zstd") == CompressionType.ZSTD
