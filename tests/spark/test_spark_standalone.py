"""`ads pipeline load` and `ads pipeline copy` with `--master spark://...` on a Spark
standalone cluster of one master and two workers (separate JVMs on loopback, started from
the pyspark package's own scripts): the results are those of local mode, and executors on
both workers ran tasks of each job. Spark's own Kafka connector runs there too: a streaming
query whose driver is killed and started again (test_spark_kafka_connector.py). And
`ads pipeline table` into Iceberg against three `ads broker` processes: a partition's
leader SIGKILLed under the running job, then the job itself, exactly once all the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from standalone_support import StandaloneCluster
from test_spark_copy import PREFIX, CopyJob, kill_mid_batch, read_committed
from test_spark_kafka_connector import (
    STREAM_PARTITIONS,
    STREAM_TOPIC,
    TXN_TOPIC,
    stream_input,
    stream_killed_and_restarted,
)
from test_spark_pipeline import dataset_rows
from test_spark_read import produce
from test_spark_tables import SCHEMA

from ads.spark.pipeline import last_committed_offsets
from ads.spark.tables import iceberg_catalog, iceberg_identifier
from ads.spark.wire import TopicPartition
from ads.testing import EmbeddedBroker
from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster, wait_until
from conftest import create_topic
from replication_support import FAST, create, partition_state

HERE = Path(__file__).parent


def on_cluster(cluster: StandaloneCluster, events: Path) -> list[str]:
    """A pipeline job's options that run it as an application of ``cluster``."""
    args = ["--master", cluster.url]
    for key, value in cluster.application_conf(events).items():
        args += ["--spark-conf", f"{key}={value}"]
    return args


def pipeline(cluster: StandaloneCluster, events: Path, *args: str) -> str:
    command = [sys.executable, "-m", "ads.cli.main", "pipeline", *args,
               *on_cluster(cluster, events)]
    # The driver finds the transform module here; the executors only through the job.
    env = dict(cluster.env(), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def finished_app(cluster: StandaloneCluster, name: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        apps = [a for a in cluster.master_state()["completedapps"] if a["name"] == name]
        if apps:
            return str(apps[0]["id"])
        time.sleep(0.5)
    raise AssertionError(f"the master lists no finished application {name!r}")


def tasks_per_worker(events: Path, app_id: str) -> Counter[int]:
    """Successful tasks per worker (by its web UI port), from the application's event log:
    an executor's log URLs are served by the worker that runs it."""
    worker_of: dict[str, int | None] = {}
    tasks: Counter[str] = Counter()
    for path in sorted(events.rglob(f"*{app_id}*")):
        if not path.is_file() or path.name.startswith((".", "appstatus")):
            continue
        for line in path.read_text().splitlines():
            event: dict[str, Any] = json.loads(line)
            if event["Event"] == "SparkListenerExecutorAdded":
                url = event["Executor Info"]["Log Urls"]["stdout"]
                worker_of[event["Executor ID"]] = urlparse(url).port
            elif (event["Event"] == "SparkListenerTaskEnd"
                  and event["Task End Reason"]["Reason"] == "Success"):
                tasks[event["Task Info"]["Executor ID"]] += 1
    out: Counter[int] = Counter()
    for executor, n in tasks.items():
        port = worker_of[executor]
        assert port is not None
        out[port] += n
    return out


def assert_both_workers_ran(cluster: StandaloneCluster, events: Path, name: str) -> None:
    app_id = finished_app(cluster, name)
    per_worker = tasks_per_worker(events, app_id)
    assert set(per_worker) == set(cluster.worker_ui_ports), per_worker
    assert all(n > 0 for n in per_worker.values())
    for worker in cluster.worker_states():
        ran = worker["executors"] + worker["finishedexecutors"]
        assert any(e["appid"] == app_id for e in ran), worker


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One cluster for the module's tests; each application's event log goes to
    `events(cluster)`."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone") / "spark")
    events(cluster).mkdir(parents=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
    assert cluster.alive_groups() == []  # no JVM of the cluster is left, executors included


def events(cluster: StandaloneCluster) -> Path:
    return cluster.workdir.parent / "events"


@pytest.mark.timeout(720)  # about 1.5 to 2 minutes; more when other work shares the cores
def test_spark_standalone_pipeline_load_and_copy(broker: EmbeddedBroker,
                                                 standalone: StandaloneCluster,
                                                 tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "sa-in", 4)
    create_topic(bootstrap, "sa-out", 4)
    produced = produce(bootstrap, "sa-in", 800, 4)
    out = tmp_path / "lake"
    printed = pipeline(standalone, events(standalone), "load", "--bootstrap-server", bootstrap,
                       "--topic", "sa-in", "--output", str(out), "--trigger", "once")
    assert "loaded 800 records in 1 batches" in printed
    assert dataset_rows(out) == sorted(("sa-in", p, o) for p in range(4)
                                       for o in range(200))
    assert_both_workers_ran(standalone, events(standalone), "ads pipeline load")

    printed = pipeline(standalone, events(standalone), "copy", "--bootstrap-server", bootstrap,
                       "--from-topic", "sa-in", "--to-topic", "sa-out",
                       "--transform", "copy_transforms:tag",
                       "--checkpoint", str(tmp_path / "checkpoint"))
    assert "copied 800 records" in printed
    expected = {p: [(r["key"], PREFIX + r["value"],
                     [(h["key"], h["value"]) for h in r["headers"]] if r["headers"]
                     else None) for r in produced if r["partition"] == p]
                for p in range(4)}
    assert read_committed(bootstrap, "sa-out", 4, 800) == expected
    assert_both_workers_ran(standalone, events(standalone), "ads pipeline copy")


@pytest.mark.timeout(600)
def test_spark_standalone_kafka_connector_stream_killed(spark: SparkSession,
                                                        broker: EmbeddedBroker,
                                                        standalone: StandaloneCluster,
                                                        tmp_path: Path) -> None:
    """Spark's own Kafka connector on the cluster (the scenario of
    test_spark_kafka_connector.py's killed stream): the driver killed with SIGKILL,
    restarted on its checkpoint, its reads and its Kafka sink on both workers."""
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, STREAM_TOPIC, STREAM_PARTITIONS)
    create_topic(bootstrap, TXN_TOPIC, 2)
    create_topic(bootstrap, "sa-copied", 2)
    given = stream_input(bootstrap)
    conf = standalone.application_conf(events(standalone)) | {
        "spark.app.name": "kafka connector"}
    stream_killed_and_restarted(spark, bootstrap, tmp_path, standalone.url, "sa-copied",
                                given, conf)
    assert_both_workers_ran(standalone, events(standalone), "kafka connector")


TABLE_TOPIC = "sa-ice"
TABLE_PARTITIONS = 3
PHASE = 120  # records produced before the leader's kill, after it, and before the job's


def produce_ids(bootstrap: str, ids: range) -> dict[tuple[int, int], int]:
    """JSON records of ``ids`` (record i to partition i % 3) by an idempotent producer
    with acks=all; returns the id at each (partition, offset) the cluster acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    acked: dict[tuple[int, int], int] = {}
    failed: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = json.loads(msg.value())["id"]

    for i in ids:
        producer.produce(TABLE_TOPIC, value=json.dumps({"id": i, "name": f"n{i}",
                                                        "amount": i / 4}).encode(),
                         key=b"k%d" % i, partition=i % TABLE_PARTITIONS,
                         on_delivery=delivered)
    assert producer.flush(60) == 0
    assert failed == []
    return acked


@pytest.mark.broker_process
@pytest.mark.timeout(420)  # about 1.5 minutes; more when other work shares the cores
def test_spark_standalone_table_iceberg_through_leader_and_job_kills(
        standalone: StandaloneCluster, tmp_path: Path) -> None:
    """``ads pipeline table --table-format iceberg`` on the cluster against three brokers:
    the leader of a partition SIGKILLed while the job runs and more records produced
    after the failover, which the job reads from the new leader; then the job SIGKILLed
    mid-batch and run again with ``--once``: the table holds every acknowledged record
    exactly once."""
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    ads = Cluster(tmp_path / "ads", 3, *FAST)
    jobs: list[CopyJob] = []
    try:
        ads.start()
        create(ads, TABLE_TOPIC, TABLE_PARTITIONS, 3, **{"min.insync.replicas": "2"})
        ads.wait_for(lambda: all(len(partition_state(ads, TABLE_TOPIC, p)["isr"]) == 3
                                 for p in range(TABLE_PARTITIONS)), "every ISR of three")
        produced = produce_ids(ads.bootstrap, range(PHASE))
        checkpoint, warehouse = tmp_path / "cp", tmp_path / "warehouse"
        # The whole bootstrap list, the broker killed below included, as a user gives it.
        args = ["--bootstrap-server", ads.bootstrap, "--topic", TABLE_TOPIC,
                "--table-format", "iceberg", "--path", str(warehouse),
                "--checkpoint", str(checkpoint), "--value-format", "json",
                "--schema", SCHEMA, *on_cluster(standalone, events(standalone))]

        def run(n: int, *more: str) -> CopyJob:
            jobs.append(CopyJob(tmp_path / f"run-{n}.log", *args, *more, verb="table",
                                env=standalone.env()))
            return jobs[-1]

        job = run(1, "--trigger", "200ms", "--max-records-per-batch", "60")
        moved = TopicPartition(TABLE_TOPIC, 0)

        def committed(tp: TopicPartition = moved) -> int:
            return last_committed_offsets(checkpoint).get(tp, 0)

        # Caught up, so that the driver asks for the ends every trigger while the leader is
        # gone (a kill during a micro-batch would find only the executors' fetches).
        per_partition = PHASE // TABLE_PARTITIONS
        wait_until(lambda: all(committed(TopicPartition(TABLE_TOPIC, p)) == per_partition
                               for p in range(TABLE_PARTITIONS)),
                   "the job caught up", 120, job.output)
        leader = partition_state(ads, TABLE_TOPIC, moved.partition)["leader"]
        ads.brokers[leader].kill9()
        # Acknowledged once a new leader from the ISR has them (acks=all, 2 in sync).
        produced |= produce_ids(ads.bootstrap, range(PHASE, 2 * PHASE))
        assert partition_state(ads, TABLE_TOPIC, moved.partition)["leader"] not in (leader, -1)
        wait_until(lambda: committed() > per_partition, "micro-batches from the new leader",
                   90, job.output)
        produced |= produce_ids(ads.bootstrap, range(2 * PHASE, 3 * PHASE))
        done = len([p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()])
        kill_mid_batch(job, checkpoint, after=done, limit_s=90)

        again = run(2, "--once")
        assert again.wait(180) == 0, again.output()
    finally:
        for started in jobs:
            started.kill()
        ads.stop()

    table = iceberg_catalog(warehouse).load_table(iceberg_identifier(TABLE_TOPIC))
    rows = table.scan().to_arrow().select(["partition", "offset", "id", "name"]).to_pylist()
    held = {(r["partition"], r["offset"]): r["id"] for r in rows}
    assert len(held) == len(rows) == 3 * PHASE, again.output()  # none twice
    assert held == produced
    assert all(r["name"] == f"n{r['id']}" for r in rows)
    for p in range(TABLE_PARTITIONS):  # contiguous from 0 in every partition
        assert sorted(o for q, o in held if q == p) == list(range(3 * per_partition))
