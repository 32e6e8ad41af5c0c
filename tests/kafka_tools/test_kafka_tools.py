"""Kafka's own command-line tools against an ADS cluster: the classes the `kafka-*.sh`
scripts run, from Apache Kafka 4.4's jars (tests/kafka_reference/pom.xml, fetched by
`make test`), with the scripts' arguments, on three `ads broker` processes and a real
ZooKeeper (replication factor 3). Each test runs one tool the way an operator would and
checks what it prints and its exit status (docs/kafka-tools.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from cluster_support import Cluster
from kafka_reference import JARS
from kafka_tool_support import ok, run
from kafka_wire import RawConnection
from share_support import share_drain

pytestmark = pytest.mark.kafka_reference

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert JARS.is_dir(), f"Kafka's jars are fetched by `make test` into {JARS}"
    with Cluster(tmp_path_factory.mktemp("kafka-tools"), 3,
                 "group.initial.rebalance.delay.ms=0", "group.share.enable=true").running() as c:
        yield c


def test_kafka_topics(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    assert "Created topic tools-t." in ok(
        "kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-t",
        "--partitions", "3", "--replication-factor", "3", "--config", "retention.ms=3600000")
    assert "tools-t" in ok("kafka-topics", "--bootstrap-server", bs, "--list").split()
    out = ok("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "tools-t")
    head = re.search(r"Topic: tools-t\tTopicId: (\S+)\tPartitionCount: 3\t"
                     r"ReplicationFactor: 3\tConfigs: (.*)", out)
    assert head is not None, out
    assert "retention.ms=3600000" in head.group(2)
    parts = re.findall(r"Partition: (\d)\tLeader: (\d)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", out)
    assert [p[0] for p in parts] == ["0", "1", "2"], out
    assert all(sorted(p[2].split(",")) == ["1", "2", "3"] for p in parts), out
    ok("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "tools-t",
       "--partitions", "4")
    out = ok("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "tools-t")
    assert "PartitionCount: 4" in out
    # A healthy cluster: nothing under-replicated, nothing unavailable.
    assert ok("kafka-topics", "--bootstrap-server", bs, "--describe",
              "--under-replicated-partitions").strip() == ""
    assert ok("kafka-topics", "--bootstrap-server", bs, "--describe",
              "--unavailable-partitions").strip() == ""
    done = run("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-t",
               "--partitions", "1")
    assert done.returncode != 0 and "already exists" in done.stdout + done.stderr
    ok("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "tools-t")
    cluster.wait_for(lambda: "tools-t" not in ok(
        "kafka-topics", "--bootstrap-server", bs, "--list").split(), "the topic deleted")


def test_kafka_configs_broker_and_topic(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-c",
       "--partitions", "1", "--replication-factor", "3")
    assert "Completed updating config for broker 2." in ok(
        "kafka-configs", "--bootstrap-server", bs, "--entity-type", "brokers",
        "--entity-name", "2", "--alter", "--add-config", "log.retention.ms=7200000")
    out = ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "brokers",
             "--entity-name", "2", "--describe")
    assert "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" \
           "log.retention.ms=7200000" in out, out
    assert "Completed updating default config for brokers in the cluster." in ok(
        "kafka-configs", "--bootstrap-server", bs, "--entity-type", "brokers",
        "--entity-default", "--alter", "--add-config", "log.segment.bytes=2000000")
    out = ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "brokers",
             "--entity-default", "--describe")
    assert "log.segment.bytes=2000000" in out, out
    done = run("kafka-configs", "--bootstrap-server", bs, "--entity-type", "brokers",
               "--entity-name", "2", "--alter", "--add-config", "log.dirs=/elsewhere")
    assert done.returncode != 0
    assert "Cannot update these configs dynamically: [log.dirs]" in done.stdout + done.stderr
    ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics",
       "--entity-name", "tools-c", "--alter", "--add-config", "cleanup.policy=compact")
    out = ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics",
             "--entity-name", "tools-c", "--describe")
    assert "cleanup.policy=compact" in out, out
    ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "brokers",
       "--entity-name", "2", "--alter", "--delete-config", "log.retention.ms")
    ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "brokers",
       "--entity-default", "--alter", "--delete-config", "log.segment.bytes")


def test_kafka_configs_groups(cluster: Cluster) -> None:
    # Group configs (KIP-848, KIP-932), kept in ZooKeeper: set through one broker, taken by
    # the group's coordinator wherever it is.
    bs = cluster.bootstrap
    assert "Completed updating config for group tools-hb." in ok(
        "kafka-configs", "--bootstrap-server", bs, "--entity-type", "groups",
        "--entity-name", "tools-hb", "--alter", "--add-config",
        "consumer.heartbeat.interval.ms=7000,share.record.lock.duration.ms=20000")
    out = ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "groups",
             "--entity-name", "tools-hb", "--describe")
    assert "consumer.heartbeat.interval.ms=7000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:" \
           "consumer.heartbeat.interval.ms=7000" in out, out
    assert "share.record.lock.duration.ms=20000" in out, out
    done = run("kafka-configs", "--bootstrap-server", bs, "--entity-type", "groups",
               "--entity-name", "tools-hb", "--alter", "--add-config",
               "share.record.lock.duration.ms=5")
    assert done.returncode != 0
    assert "Value must be at least 1000" in done.stdout + done.stderr

    def interval() -> int:
        with RawConnection(cluster.brokers[1].bootstrap) as conn:
            found = conn.request(10, 3, m.FindCoordinatorRequest(key="tools-hb", key_type=0))
        if found.error_code != ErrorCode.NONE:
            return -1
        with RawConnection(f"{found.host}:{found.port}") as conn:
            joined = conn.request(68, 0, m.ConsumerGroupHeartbeatRequest(
                group_id="tools-hb", member_epoch=0, rebalance_timeout_ms=5000,
                subscribed_topic_names=["tools-hb"], topic_partitions=[]))
            if joined.error_code == ErrorCode.NONE:  # leave: the group stays empty
                conn.request(68, 0, m.ConsumerGroupHeartbeatRequest(
                    group_id="tools-hb", member_id=joined.member_id, member_epoch=-1))
        return joined.heartbeat_interval_ms if joined.error_code == ErrorCode.NONE else -1
    cluster.wait_for(lambda: interval() == 7000, "the coordinator gives the group's interval")
    ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "groups",
       "--entity-name", "tools-hb", "--alter", "--delete-config",
       "consumer.heartbeat.interval.ms")
    cluster.wait_for(lambda: interval() == 5000, "the broker's interval again")


def test_console_clients_groups_offsets_and_records(cluster: Cluster, tmp_path: Path) -> None:
    bs = cluster.bootstrap
    ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-g",
       "--partitions", "1", "--replication-factor", "3")
    lines = [f"line-{i}" for i in range(20)]
    ok("kafka-console-producer", "--bootstrap-server", bs, "--topic", "tools-g",
       stdin="\n".join(lines) + "\n")
    out = ok("kafka-console-consumer", "--bootstrap-server", bs, "--topic", "tools-g",
             "--group", "tools-group", "--from-beginning", "--max-messages", "20",
             "--timeout-ms", "30000")
    assert out.split() == lines
    out = ok("kafka-consumer-groups", "--bootstrap-server", bs, "--describe",
             "--group", "tools-group")
    row = re.search(r"tools-group\s+tools-g\s+0\s+(\d+)\s+(\d+)\s+(\d+)", out)
    assert row is not None and row.groups() == ("20", "20", "0"), out
    assert "tools-group" in ok("kafka-consumer-groups", "--bootstrap-server", bs,
                               "--list").split()
    out = ok("kafka-consumer-groups", "--bootstrap-server", bs, "--reset-offsets",
             "--group", "tools-group", "--topic", "tools-g", "--to-offset", "5", "--execute")
    assert re.search(r"tools-group\s+tools-g\s+0\s+5", out), out
    assert ok("kafka-get-offsets", "--bootstrap-server", bs, "--topic", "tools-g"
              ).split() == ["tools-g:0:20"]
    offsets = tmp_path / "delete.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools-g", "partition": 0, "offset": 10}]}))
    out = ok("kafka-delete-records", "--bootstrap-server", bs, "--offset-json-file",
             str(offsets))
    assert re.search(r"partition: tools-g-0\s+low_watermark: 10", out), out
    assert ok("kafka-get-offsets", "--bootstrap-server", bs, "--topic", "tools-g",
              "--time", "-2").split() == ["tools-g:0:10"]


def test_kafka_share_groups(cluster: Cluster) -> None:
    """kafka-share-groups.sh: describe, reset-offsets (AlterShareGroupOffsets) and
    delete-offsets (DeleteShareGroupOffsets) of a share group whose partitions are led by
    other brokers than its coordinator; a member after the reset gets the records again."""
    bs = cluster.bootstrap
    ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-sh",
       "--partitions", "2", "--replication-factor", "3")
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("tools-sh", b"sh-%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    ok("kafka-configs", "--bootstrap-server", bs, "--entity-type", "groups",
       "--entity-name", "tools-sh", "--alter", "--add-config", "share.auto.offset.reset=earliest")
    everything = sorted((i % 2, i // 2) for i in range(10))
    assert [(p, o) for p, o, _ in share_drain(bs, "tools-sh", "tools-sh", 10)] == everything
    group = ("kafka-share-groups", "--bootstrap-server", bs, "--group", "tools-sh")

    def described() -> list[list[str]]:
        out = ok(*group, "--describe")
        return sorted(line.split()[:4] for line in out.splitlines()
                      if line.startswith("tools-sh "))

    assert described() == [["tools-sh", "tools-sh", "0", "5"], ["tools-sh", "tools-sh", "1", "5"]]
    out = ok(*group, "--reset-offsets", "--to-earliest", "--topic", "tools-sh", "--execute")
    assert re.search(r"tools-sh\s+tools-sh\s+0\s+0", out), out
    assert described() == [["tools-sh", "tools-sh", "0", "0"], ["tools-sh", "tools-sh", "1", "0"]]
    assert [(p, o) for p, o, _ in share_drain(bs, "tools-sh", "tools-sh", 10)] == everything
    out = ok(*group, "--delete-offsets", "--topic", "tools-sh")
    assert re.search(r"tools-sh\s+Successful", out), out
    assert described() == []
    assert "tools-sh" in ok("kafka-share-groups", "--bootstrap-server", bs, "--list").split()


def test_log_dirs_leader_election_and_reassignment(cluster: Cluster, tmp_path: Path) -> None:
    bs = cluster.bootstrap
    ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-r",
       "--partitions", "2", "--replication-factor", "2")
    out = ok("kafka-log-dirs", "--bootstrap-server", bs, "--describe", "--broker-list",
             "1,2,3", "--topic-list", "tools-r")
    described = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    replicas = [p["partition"] for b in described["brokers"] for d in b["logDirs"]
                for p in d["partitions"]]
    assert sorted(replicas) == ["tools-r-0", "tools-r-0", "tools-r-1", "tools-r-1"], out
    # Every preferred leader leads already: for all partitions nothing is printed, for a
    # named one the tool says so.
    out = ok("kafka-leader-election", "--bootstrap-server", bs, "--election-type",
             "preferred", "--all-topic-partitions")
    assert "Error" not in out and "failed" not in out, out
    out = ok("kafka-leader-election", "--bootstrap-server", bs, "--election-type",
             "preferred", "--topic", "tools-r", "--partition", "1")
    assert "Valid replica already elected for partitions tools-r-1" in out, out
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools-r", "partition": 0, "replicas": [3, 1]}]}))
    out = ok("kafka-reassign-partitions", "--bootstrap-server", bs,
             "--reassignment-json-file", str(plan), "--execute")
    assert "Successfully started partition reassignment" in out, out
    cluster.wait_for(lambda: "Reassignment of partition tools-r-0 is completed" in ok(
        "kafka-reassign-partitions", "--bootstrap-server", bs, "--reassignment-json-file",
        str(plan), "--verify"), "the reassignment verified", 60)


def test_transactions_and_perf_tools(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tools-p",
       "--partitions", "3", "--replication-factor", "3")
    out = ok("kafka-producer-perf-test", "--topic", "tools-p", "--num-records", "20000",
             "--record-size", "100", "--throughput", "-1", "--producer-props",
             f"bootstrap.servers={bs}", "acks=all", "--transactional-id", "tools-perf",
             "--transaction-duration-ms", "200")
    assert re.search(r"^20000 records sent", out, re.M), out
    out = ok("kafka-consumer-perf-test", "--bootstrap-server", bs, "--topic", "tools-p",
             "--messages", "20000", "--timeout", "60000")
    fields = out.strip().splitlines()[-1].split(", ")
    assert int(fields[4]) == 20000, out  # data.consumed.in.nMsg
    out = ok("kafka-transactions", "--bootstrap-server", bs, "list")
    assert re.search(r"^tools-perf\s+\d+\s+\d+\s+CompleteCommit", out, re.M), out
    out = ok("kafka-transactions", "--bootstrap-server", bs, "describe-producers",
             "--topic", "tools-p", "--partition", "0")
    assert re.search(r"^\d+\s+\d+\s+\d+\s+", out.split("\n", 1)[1], re.M), out


def _normalized(text: str) -> str:
    """Tool output with what differs by nature between the two clusters masked: topic ids,
    and the min.insync.replicas that formatting a Kafka 4 KRaft cluster records as the
    cluster's dynamic default (so kafka-topics lists it among a topic's non-default
    configs; a ZooKeeper cluster, as ADS, keeps it a static default)."""
    text = re.sub(r"TopicId: \S+", "TopicId: <id>", text)
    return text.replace("Configs: min.insync.replicas=1,", "Configs: ")


def test_kafka_tools_print_the_same_for_kafka_and_ads(kafka: object, ads: object) -> None:
    """The same commands against Apache Kafka 4.4 (one KRaft node, id 1) and one ADS broker
    (id 1) print the same, topic ids aside."""
    outputs = []
    for bs in (kafka.bootstrap, ads.bootstrap_servers):  # type: ignore[attr-defined]
        ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "same",
           "--partitions", "2", "--replication-factor", "1",
           "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
        ok("kafka-console-producer", "--bootstrap-server", bs, "--topic", "same",
           "--property", "parse.key=true", stdin="a\t1\nb\t2\nc\t3\n")
        outputs.append([_normalized(ok(*command)) for command in (
            ("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "same"),
            ("kafka-configs", "--bootstrap-server", bs, "--entity-type", "topics",
             "--entity-name", "same", "--describe"),
            ("kafka-get-offsets", "--bootstrap-server", bs, "--topic", "same"),
        )])
    kafka_out, ads_out = outputs
    assert ads_out == kafka_out
