"""Golden bytes: request frames captured from real clients (tools/capture_golden.py) decode,
and re-encode to exactly the same bytes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ads.protocol import codec
from ads.protocol.messages import ApiKey
from ads.records.batch import validate_batches

GOLDEN = Path(__file__).parent / "golden"
FRAMES = sorted(GOLDEN.glob("*/*.bin"))


def test_protocol_golden_frames_present() -> None:
    clients = {p.parent.name for p in FRAMES}
    assert clients == {"confluent-kafka", "kafka-python", "aiokafka"}
    assert len(FRAMES) >= 20


@pytest.mark.parametrize("path", FRAMES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_protocol_golden_request_roundtrip(path: Path) -> None:
    frame = path.read_bytes()
    header, body = codec.decode_request(memoryview(frame)[4:])
    name, version = re.fullmatch(r"(\w+)-v(\d+)", path.stem).groups()  # type: ignore[union-attr]
    assert ApiKey(header.api_key).name.title().replace("_", "") == name
    assert header.api_version == int(version)
    again = codec.encode_request(header.api_key, header.api_version, header.correlation_id,
                                 header.client_id, body)
    assert again == frame


@pytest.mark.parametrize("path", [p for p in FRAMES if p.stem.startswith("Produce")],
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_protocol_golden_produce_batches_validate(path: Path) -> None:
    _, body = codec.decode_request(memoryview(path.read_bytes())[4:])
    for topic in body.topic_data:
        for part in topic.partition_data:
            assert len(validate_batches(part.records, max_batch_bytes=1 << 20)) == 1
