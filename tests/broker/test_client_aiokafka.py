"""aiokafka against a real ADS broker."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from conftest import create_topic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
async def test_aiokafka_produce_consume(bootstrap: str, codec: str | None) -> None:
    topic = f"aio-{codec or 'none'}"
    await asyncio.to_thread(create_topic, bootstrap, topic, 2)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                linger_ms=10, enable_idempotence=True)
    await producer.start()
    sent = []
    try:
        for i in range(40):
            key = None if i % 4 == 0 else f"k{i}".encode()
            value = None if (key is not None and i % 9 == 5) else f"aio-{i}".encode() * 5
            headers = [("h", f"{i}".encode())] if i % 2 else []
            fut = await producer.send(topic, key=key, value=value, headers=headers,
                                      partition=i % 2)
            sent.append((i % 2, key, value, headers, fut))
        results = [await f for *_, f in sent]
    finally:
        await producer.stop()
    assert [r.partition for r in results] == [s[0] for s in sent]

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        await consumer.seek_to_beginning()
        got = []
        async with asyncio.timeout(30):
            while len(got) < len(sent):
                batch = await consumer.getmany(timeout_ms=500)
                for msgs in batch.values():
                    got.extend(msgs)
    finally:
        await consumer.stop()
    for part in (0, 1):
        mine = [m for m in got if m.partition == part]
        expected = [s for s in sent if s[0] == part]
        assert [m.offset for m in mine] == list(range(len(expected)))
        for msg, (_, key, value, headers, _) in zip(mine, expected, strict=True):
            assert msg.key == key
            assert msg.value == value
            assert list(msg.headers) == headers
