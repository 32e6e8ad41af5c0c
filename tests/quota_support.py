"""Helpers of the quota tests: AlterClientQuotas and DescribeClientQuotas sent by
kafka-python's admin client (its protocol classes over its own connection: the library has
no wrapper method for these APIs), and bounded producer and consumer runs that note when
each message was acknowledged or consumed and every throttle the client was told of."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
Entry = AlterClientQuotasRequest.EntryData


def _send(bootstrap: str, request: Any) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="quota-admin")
    try:
        return admin._manager.run(admin._manager.send, request)
    finally:
        admin.close()


def alter(bootstrap: str, entity: dict[str, str | None], ops: dict[str, float | None],
          validate_only: bool = False) -> tuple[int, str | None]:
    """Sets (None: removes) quotas of one entity; (error code, message) of its entry."""
    [result] = alter_many(bootstrap, [(entity, ops)], validate_only)
    return result


def alter_many(bootstrap: str,
               entries: list[tuple[dict[str, str | None], dict[str, float | None]]],
               validate_only: bool = False) -> list[tuple[int, str | None]]:
    request = AlterClientQuotasRequest(entries=[
        Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in e.items()],
              ops=[Entry.OpData(key=k, value=v if v is not None else 0.0, remove=v is None)
                   for k, v in ops.items()])
        for e, ops in entries], validate_only=validate_only)
    response = _send(bootstrap, request)
    return [(r.error_code, r.error_message) for r in response.entries]


def describe(bootstrap: str, components: list[tuple[str, int, str | None]],
             strict: bool = False) -> tuple[int, dict[tuple[tuple[str, str | None], ...],
                                                      dict[str, float]]]:
    """(error code, {entity as sorted (type, name) pairs: {key: value}})."""
    component = DescribeClientQuotasRequest.ComponentData
    response = _send(bootstrap, DescribeClientQuotasRequest(
        components=[component(entity_type=t, match_type=mt, match=m) for t, mt, m in components],
        strict=strict))
    entries = {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
               {v.key: v.value for v in entry.values} for entry in response.entries or []}
    return response.error_code, entries


@dataclass
class Run:
    """What a bounded client run saw: (monotonic time, bytes) per message, throttles."""

    start: float = field(default_factory=time.monotonic)
    events: list[tuple[float, int]] = field(default_factory=list)
    throttles: list[float] = field(default_factory=list)

    def rate(self, from_s: float, to_s: float) -> float:
        """Bytes per second of the messages seen between `from_s` and `to_s` (seconds
        after the start)."""
        total = sum(n for t, n in self.events if from_s <= t - self.start < to_s)
        return total / (to_s - from_s)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.events)


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float,
                value_size: int = 1000) -> Run:
    """Produces as fast as the producer takes messages, for `seconds`. Small batches and
    a small queue, so each produce request is a small part of the quota."""
    run = Run()

    def on_throttle(event: Any) -> None:
        if event.throttle_time > 0:
            run.throttles.append(event.throttle_time)

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            run.events.append((time.monotonic(), len(msg.value())))

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "linger.ms": 5, "batch.size": 16384,
                         "queue.buffering.max.kbytes": 512, "throttle_cb": on_throttle})
    payload = b"x" * value_size
    run.start = time.monotonic()
    while time.monotonic() - run.start < seconds:
        try:
            producer.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.02)
        producer.poll(0)
    producer.flush(5)
    return run


def fill(bootstrap: str, topic: str, total_bytes: int, value_size: int = 1000) -> int:
    """Writes `total_bytes` of records to partition 0 of `topic` (a fixed amount, so reading
    it all back takes the same on a busy machine); returns the bytes written. Batches stay
    small: a fetch returns at least one whole batch, and one larger than a consumer's quota
    allows in its window would be answered empty every time."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.size": 16384})
    payload = b"x" * value_size
    count = total_bytes // value_size
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0, "the filler's records were not all written"
    return count * value_size


def consume_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> Run:
    """Consumes partition 0 of `topic` from its start for `seconds`, fetching at most 16 KB
    at a time: a fetch over the quota is answered empty and asked again, so each must be a
    small part of what the quota allows."""
    run = Run()

    def on_throttle(event: Any) -> None:
        if event.throttle_time > 0:
            run.throttles.append(event.throttle_time)

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "group.id": f"group-{client_id}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "max.partition.fetch.bytes": 16384,
                         "throttle_cb": on_throttle})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group join to wait for
    try:
        run.start = time.monotonic()
        while time.monotonic() - run.start < seconds:
            for msg in consumer.consume(1000, timeout=0.1):
                if msg.error() is None:
                    run.events.append((time.monotonic(), len(msg.value())))
    finally:
        consumer.close()
    return run
