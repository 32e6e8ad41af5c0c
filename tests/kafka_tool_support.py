"""Kafka's own command-line tools, run as their `kafka-*.sh` scripts run them: the tool's
class from Apache Kafka's jars (tests/kafka_reference/pom.xml, fetched by `make test`)."""

from __future__ import annotations

import subprocess

from kafka_reference import JARS

TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
}
TOOL_TIMEOUT_S = 90


def run(tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """One tool, as its script would run it (a small heap, its log to stderr)."""
    command = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-cp", f"{JARS}/*", TOOLS[tool], *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True,  # noqa: S603
                          timeout=TOOL_TIMEOUT_S, check=False)


def ok(tool: str, *args: str, stdin: str | None = None) -> str:
    done = run(tool, *args, stdin=stdin)
    assert done.returncode == 0, (tool, args, done.stdout, done.stderr[-3000:])
    return done.stdout
