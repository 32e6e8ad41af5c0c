"""Apache Kafka's own broker as a reference for tests (docs/kafka-reference.md).

`KafkaReference` runs one Kafka broker in KRaft mode, broker and controller in one JVM
(`process.roles=broker,controller`), from the jars `make test-deps` copies out of the
local Maven repository (tests/kafka_reference/pom.xml names the version). A reference test
sends the same client calls to it and to an ADS broker and asserts the answers agree.

    with KafkaReference(tmp_path) as kafka:
        AdminClient({"bootstrap.servers": kafka.bootstrap}) ...

It is the benchmark suite's `ads.bench.kafka.KafkaPeer` (storage format, start, the wait
for the first Metadata answer within a deadline, SIGTERM then SIGKILL, the parent-death
signal, the log beside the data quoted in every failure) with settings for tests: the heap
capped at 512 MiB, the JIT stopped at its first tier (a test broker lives for seconds;
measured, it starts a little sooner so), one partition per internal topic, and fewer
network and I/O threads. Start it from the test's main thread: the JVM is killed with the
thread that started it, should the test process die before its teardown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from ads.bench.kafka import KafkaPeer

T = TypeVar("T")
JARS = Path(__file__).parent / "kafka_reference" / "target" / "jars"
JVM_OPTIONS = ("-Xmx512m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TEST_SETTINGS = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "num.network.threads": "1",
    "num.io.threads": "2",
}


class KafkaReference(KafkaPeer):
    """One Apache Kafka broker (KRaft, combined roles) in a subprocess; not thread-safe."""

    def __init__(self, work_dir: Path, overrides: dict[str, str] | None = None) -> None:
        """`work_dir`: an empty directory for the data, the configs and the log;
        `overrides`: server.properties keys set on top of the helper's."""
        super().__init__(JARS, work_dir, {**TEST_SETTINGS, **(overrides or {})}, JVM_OPTIONS)

    def start(self, timeout_s: float = 60.0) -> KafkaReference:
        super().start(timeout_s)
        return self

    def __enter__(self) -> KafkaReference:
        return self.start()


# librdkafka's admin calls do not mark these retriable; Kafka answers them while its
# coordinators load the internal topics the first group or transaction request creates.
COORDINATOR_NOT_READY = frozenset({KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                   KafkaError.COORDINATOR_NOT_AVAILABLE,
                                   KafkaError.NOT_COORDINATOR})


def retry_retriable(call: Callable[[], T], timeout: float = 30.0) -> T:
    """`call()`, called again while it fails with a retriable error (a coordinator still
    loading its partition just after the start, for instance), until `timeout`; used the
    same way for both brokers a test compares."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            retriable = error.retriable() or error.code() in COORDINATOR_NOT_READY
            if not retriable or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
