"""Partition reassignment on three broker processes, through kafka-python's admin client
and `ads topics reassign`: a reassignment that only drops replicas completes at once and the
dropped broker deletes its replica; one that adds a replica makes it on the new broker and
waits for it to join the ISR (which comes with replication), listed meanwhile, until it is
cancelled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError
from test_controller_cluster import create, leaders

from ads.cli.main import main
from cluster_support import Cluster

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]


def replicas(c: Cluster, topic: str, partition: int, via: int = 1) -> list[int]:
    md = c.admin(via).list_topics(topic, timeout=10)
    return list(md.topics[topic].partitions[partition].replicas)


def has_replica(c: Cluster, node: int, topic: str, partition: int) -> bool:
    return (c.brokers[node].data_dir / f"{topic}-{partition}").exists()


def test_cluster_reassign_partitions(cluster: Cluster, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    c = cluster
    create(c, "moves", 2, rf=2)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "moves").values()), "leaders")
    keep, drop = replicas(c, "moves", 0)
    producer = Producer({"bootstrap.servers": c.bootstrap})
    for i in range(10):
        producer.produce("moves", value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    assert has_replica(c, drop, "moves", 0)

    admin = KafkaAdminClient(bootstrap_servers=c.brokers[1].bootstrap)
    try:
        tp0, tp1 = KTopicPartition("moves", 0), KTopicPartition("moves", 1)
        assert admin.alter_partition_reassignments({tp0: [keep, keep]}) == {
            tp0: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp0: [keep]}) == {tp0: None}
        c.wait_for(lambda: replicas(c, "moves", 0, drop) == [keep], "partition 0 on one broker")
        c.wait_for(lambda: not has_replica(c, drop, "moves", 0), "the dropped replica deleted")
        assert admin.list_partition_reassignments() == {}

        # Moving partition 1 to the broker without a replica of it.
        origin = replicas(c, "moves", 1)
        (new,) = set(c.brokers) - set(origin)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moves", "partition": 1, "replicas": [new]}]}))
        args = ["--reassignment-json-file", str(plan), "--bootstrap-server", c.bootstrap]
        assert main(["topics", "reassign", "--execute", *args]) == 0
        assert "Successfully started partition reassignment for moves-1" in (
            capsys.readouterr().out)
        c.wait_for(lambda: has_replica(c, new, "moves", 1), "the new replica made")
        assert admin.list_partition_reassignments([tp1]) == {tp1: {
            "replicas": [new, *origin], "adding_replicas": [new],
            "removing_replicas": origin}}
        assert main(["topics", "reassign", "--verify", *args]) == 1
        assert "Reassignment of partition moves-1 is still in progress." in (
            capsys.readouterr().out)
        assert main(["topics", "reassign", "--list",
                     "--bootstrap-server", c.bootstrap]) == 0
        assert f"Partition moves-1: replicas {new},{origin[0]},{origin[1]}; adding {new}" in (
            capsys.readouterr().out)

        assert main(["topics", "reassign", "--cancel", *args]) == 0
        assert "Successfully cancelled partition reassignment for moves-1" in (
            capsys.readouterr().out)
        c.wait_for(lambda: replicas(c, "moves", 1) == origin, "partition 1 back")
        c.wait_for(lambda: not has_replica(c, new, "moves", 1), "the new replica deleted")
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "r",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("moves", 0, 0)])
    got = [msg.value() for msg in consumer.consume(10, 10) if msg.error() is None]
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))
