"""A subscribing consumer in its own process, for tests that kill group members.

Usage: python tests/broker/group_worker.py LIBRARY BOOTSTRAP GROUP TOPIC
LIBRARY is confluent, kafka-python or aiokafka. Prints "partition offset" for every
record, then commits synchronously after each poll, so its uncommitted window is one poll.
All three use the roundrobin assignor so that they can share one group.
"""

from __future__ import annotations

import asyncio
import sys

SESSION_MS = 6000
HEARTBEAT_MS = 500


def out(partition: int, offset: int) -> None:
    print(partition, offset, flush=True)


def run_confluent(bootstrap: str, group: str, topic: str) -> None:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                  "partition.assignment.strategy": "roundrobin"})
    c.subscribe([topic])
    print("ready", flush=True)
    while True:
        msgs = c.consume(100, 0.2)
        good = [m for m in msgs if m.error() is None]
        for m in good:
            out(m.partition(), m.offset())
        if good:
            c.commit(asynchronous=False)


def run_kafka_python(bootstrap: str, group: str, topic: str) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                      partition_assignment_strategy=[RoundRobinPartitionAssignor])
    print("ready", flush=True)
    while True:
        batches = c.poll(timeout_ms=200)
        for tp, records in batches.items():
            for r in records:
                out(tp.partition, r.offset)
        if batches:
            c.commit()


async def run_aiokafka(bootstrap: str, group: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                         partition_assignment_strategy=(RoundRobinPartitionAssignor,))
    await c.start()
    print("ready", flush=True)
    while True:
        batches = await c.getmany(timeout_ms=200)
        for tp, records in batches.items():
            for r in records:
                out(tp.partition, r.offset)
        if batches:
            await c.commit()


def main() -> None:
    library, bootstrap, group, topic = sys.argv[1:5]
    if library == "confluent":
        run_confluent(bootstrap, group, topic)
    elif library == "kafka-python":
        run_kafka_python(bootstrap, group, topic)
    else:
        asyncio.run(run_aiokafka(bootstrap, group, topic))


if __name__ == "__main__":
    main()
