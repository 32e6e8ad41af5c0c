"""Batches built by real client libraries read back here, and ours read back there.

aiokafka's codecs run on cramjam, so it covers every codec; kafka-python is checked for the
codecs it can use without optional packages (none and gzip).
"""

from __future__ import annotations

import warnings

import pytest
from aiokafka.codec import snappy_encode
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder

from ads.records.batch import (
    ControlRecordType,
    Record,
    RecordSpec,
    build_batch,
    build_control_batch,
    decode_records,
    patch_base_offset,
    read_batch_header,
    set_log_append_time,
    validate_batches,
)
from ads.records.compression import CompressionType, decompress

# kafka-python's package import reads its schemas through a deprecated importlib API, and the
# warning is attributed to importlib, out of reach of the project's module-based filter.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch as KpBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

MAX = 1 << 22
ALL_CODECS = list(CompressionType)
KAFKA_PYTHON_CODECS = [CompressionType.NONE, CompressionType.GZIP]

SAMPLE: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
    (b"key-0", b"value " * 200, [], 1_700_000_000_000),
    (None, b"no key", [("trace", b"abc"), ("empty", None)], 1_700_000_000_005),
    (b"tombstone", None, [], 1_699_999_999_990),
    (b"", b"", [("", b"")], 1_700_000_000_001),
]


def _expected(base_offset: int = 0) -> list[Record]:
    return [
        Record(base_offset + i, ts, key, value, tuple(headers))
        for i, (key, value, headers, ts) in enumerate(SAMPLE)
    ]


def _build_with(builder_type: type, codec: int, **producer: int) -> bytes:
    builder = builder_type(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=MAX,
    )
    for offset, (key, value, headers, ts) in enumerate(SAMPLE):
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


def _ours(codec: int) -> bytes:
    return build_batch(
        [RecordSpec(key, value, headers, ts) for key, value, headers, ts in SAMPLE],
        compression=codec,
        producer_id=77,
        producer_epoch=2,
        base_sequence=10,
    )


def _read_theirs(batch_type: type, data: bytes) -> list[Record]:
    batch = batch_type(data)
    assert batch.validate_crc()
    return [
        Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch
    ]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_records_clients_aiokafka_batches_validate_and_decode(codec: CompressionType) -> None:
    data = _build_with(AioBuilder, codec, producer_id=5, producer_epoch=0, base_sequence=3)
    [(_, header)] = validate_batches(memoryview(data), max_batch_bytes=MAX)
    assert header.compression == codec
    assert (header.producer_id, header.base_sequence, header.last_sequence) == (5, 3, 6)
    assert decode_records(data, max_uncompressed_bytes=MAX) == _expected()


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_records_clients_aiokafka_reads_ours(codec: CompressionType) -> None:
    data = bytearray(_ours(codec))
    patch_base_offset(data, 0, 1000, 4)
    batch = AioBatch(bytes(data))
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.base_sequence) == (77, 10)
    assert _read_theirs(AioBatch, bytes(data)) == _expected(1000)


def test_records_clients_aiokafka_reads_log_append_time() -> None:
    data = bytearray(_ours(CompressionType.LZ4))
    set_log_append_time(data, 0, 1_800_000_000_000)
    batch = AioBatch(bytes(data))
    assert batch.validate_crc()
    assert batch.timestamp_type == 1
    assert {r.timestamp for r in batch} == {1_800_000_000_000}


@pytest.mark.parametrize("kind", list(ControlRecordType))
def test_records_clients_aiokafka_reads_control_batch(kind: ControlRecordType) -> None:
    data = build_control_batch(kind, 9, 1, 4, base_offset=30, timestamp=5)
    batch = AioBatch(data)
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    [record] = list(batch)
    assert record.offset == 30
    assert record.key == kind.to_bytes(4, "big")


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_records_clients_kafka_python_batches_validate_and_decode(
    codec: CompressionType,
) -> None:
    data = _build_with(KpBuilder, codec)
    [(_, header)] = validate_batches(data, max_batch_bytes=MAX)
    assert header.compression == codec
    assert decode_records(data, max_uncompressed_bytes=MAX) == _expected()


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_records_clients_kafka_python_reads_ours(codec: CompressionType) -> None:
    data = _ours(codec)
    assert _read_theirs(KpBatch, data) == _expected()
    assert read_batch_header(data).size == KpBatch(data).size_in_bytes


def test_records_clients_raw_snappy_from_client_codec() -> None:
    payload = b"raw snappy body " * 500
    raw = bytes(snappy_encode(payload, xerial_compatible=False))
    assert decompress(CompressionType.SNAPPY, raw, max_size=len(payload)) == payload
    xerial = snappy_encode(payload, xerial_compatible=True)
    assert decompress(CompressionType.SNAPPY, xerial, max_size=len(payload)) == payload
