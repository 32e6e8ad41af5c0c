"""Partition reassignment on three broker processes, through kafka-python's admin client
and `ads topics reassign`: a reassignment that only drops replicas completes at once and the
dropped broker deletes its replica; one that moves a partition to another broker completes
once the new replica has copied it and joined the ISR; one whose new replica cannot catch up
stays listed until it is cancelled."""

from __future__ import annotations

import json
import os
import signal
import time
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

        # Moving partition 1 to the broker without a replica of it: the new replica copies
        # the partition, joins the ISR, and the old ones go.
        origin = replicas(c, "moves", 1)
        (new,) = set(c.brokers) - set(origin)
        for i in range(10):
            producer.produce("moves", value=f"w{i}".encode(), partition=1)
        assert producer.flush(30) == 0
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moves", "partition": 1, "replicas": [new]}]}))
        args = ["--reassignment-json-file", str(plan), "--bootstrap-server", c.bootstrap]
        assert main(["topics", "reassign", "--execute", *args]) == 0
        assert "Successfully started partition reassignment for moves-1" in (
            capsys.readouterr().out)
        c.wait_for(lambda: replicas(c, "moves", 1, new) == [new], "partition 1 moved")
        c.wait_for(lambda: not any(has_replica(c, n, "moves", 1) for n in origin),
                   "the old replicas deleted")
        assert main(["topics", "reassign", "--verify", *args]) == 0
        assert "Reassignment of partition moves-1 is completed." in capsys.readouterr().out
        assert admin.list_partition_reassignments() == {}

        # A reassignment whose new replica cannot catch up (its broker is paused) stays
        # listed until it is cancelled. The paused broker is not the controller, and the
        # commands bootstrap from the others.
        other = min(set(c.brokers) - {new, c.controller()})
        proc = c.brokers[other].proc
        assert proc is not None
        live = ",".join(c.brokers[n].bootstrap for n in c.brokers if n != other)
        args = ["--reassignment-json-file", str(plan), "--bootstrap-server", live]
        admin.close()
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moves", "partition": 1, "replicas": [new, other]}]}))
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            assert main(["topics", "reassign", "--execute", *args]) == 0
            capsys.readouterr()
            # Once its session has ended the paused broker is out of the metadata, so no
            # client picks it for a request (kafka-python would wait on it).
            c.wait_for(lambda: str(other) not in c.zk_children("/brokers/ids"),
                       "the paused broker's session ends")
            admin = KafkaAdminClient(bootstrap_servers=live)
            listed = {tp1: {"replicas": [new, other], "adding_replicas": [other],
                            "removing_replicas": []}}
            # Waited for with a deadline: should it never be listed, the brokers' logs go
            # into the failure.
            c.wait_for(lambda: admin.list_partition_reassignments([tp1]) == listed,
                       "moves-1 listed as reassigning", timeout_s=15)
            assert main(["topics", "reassign", "--verify", *args]) == 1
            assert "Reassignment of partition moves-1 is still in progress." in (
                capsys.readouterr().out)
            assert main(["topics", "reassign", "--list", "--bootstrap-server", live]) == 0
            assert f"Partition moves-1: replicas {new},{other}; adding {other}" in (
                capsys.readouterr().out)
            assert main(["topics", "reassign", "--cancel", *args]) == 0
            assert "Successfully cancelled partition reassignment for moves-1" in (
                capsys.readouterr().out)
            c.wait_for(lambda: replicas(c, "moves", 1, new) == [new], "partition 1 back")
            assert admin.list_partition_reassignments() == {}
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        c.wait_for(lambda: not has_replica(c, other, "moves", 1), "no replica left behind")
    finally:
        admin.close()

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "r",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("moves", 0, 0), TopicPartition("moves", 1, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        got += [msg.value() for msg in consumer.consume(20, 1) if msg.error() is None]
    consumer.close()
    assert sorted(got) == sorted([f"v{i}".encode() for i in range(10)]
                                 + [f"w{i}".encode() for i in range(10)])
