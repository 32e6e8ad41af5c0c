"""`ads pipeline table`: a topic of JSON records kept as a Delta Lake table, with the job
SIGKILLed mid-batch twice and started again, and as an Iceberg table; for both, a restart
after the table committed a batch that Spark's checkpoint did not: every record is in the
table exactly once (offsets contiguous per partition), records that do not parse are in
the dead-letter table, the table is partitioned by date; read through Spark SQL and
through the table format's own Python reader; the job's /metrics while it runs and after.
Upsert by key, maintenance, the progress `ads pipeline status --checkpoint` shows,
refusals."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession
from test_spark_copy import CopyJob, kill_mid_batch
from test_spark_read import TS

from ads.spark.jobmetrics import serve_metrics
from ads.spark.pipeline import checkpoint_status
from ads.spark.tables import (
    TableError,
    TableOptions,
    dead_letter_name,
    iceberg_catalog,
    iceberg_identifier,
    job_metrics,
    run_table,
)
from ads.testing import EmbeddedBroker
from conftest import create_topic
from http_support import http_call

PARTITIONS = 4
DAY_MS = 86_400_000
SCHEMA = "id BIGINT, name STRING, amount DOUBLE"


def is_bad(i: int) -> bool:
    return i % 401 == 7


def produce_json(bootstrap: str, topic: str, count: int) -> None:
    """Records ``0 .. count-1``, record i to partition i % 4, JSON but for a few that do
    not parse; the first half dated a day before the second."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        value = (b"{not json %d" % i if i % 2 else b'{"id": "x%d"}' % i) if is_bad(i) else \
            json.dumps({"id": i, "name": f"n{i}", "amount": i / 4}).encode()
        producer.produce(topic, value=value, key=b"k%d" % i, partition=i % PARTITIONS,
                         timestamp=TS + (0 if i < count // 2 else DAY_MS) + i,
                         headers=[("seq", b"%d" % i)])
        if i % 1000 == 999:
            producer.poll(0)
    assert producer.flush(30) == 0


def check_rows(table: pa.Table, count: int) -> None:
    """Each good record exactly once, at its offset, with its columns and date."""
    rows = table.select(["partition", "offset", "id", "name", "date"]).to_pylist()
    assert len(rows) == count - sum(map(is_bad, range(count)))
    seen = sorted((r["partition"], r["offset"]) for r in rows)
    assert len(set(seen)) == len(seen)
    for r in rows:
        i = r["offset"] * PARTITIONS + r["partition"]  # record i is offset i // 4 of i % 4
        assert (r["id"], r["name"]) == (i, f"n{i}")
        assert r["date"] == ("2023-11-14" if i < count // 2 else "2023-11-15")
    expected = sorted((i % PARTITIONS, i // PARTITIONS) for i in range(count) if not is_bad(i))
    assert seen == expected


def check_dead_letters(table: pa.Table, count: int) -> None:
    got = sorted((r["partition"], r["offset"], r["value"][:1]) for r in
                 table.select(["partition", "offset", "value"]).to_pylist())
    assert got == sorted((i % PARTITIONS, i // PARTITIONS, b"{")
                         for i in range(count) if is_bad(i))


def spark_sql_check(spark: SparkSession, files: list[str], count: int) -> None:
    """The table's data files as its log lists them, read by Spark and counted in SQL:
    offsets per partition contiguous from 0, none twice."""
    spark.read.parquet(*files).createOrReplaceTempView("kept")
    per = spark.sql("SELECT partition, count(*) AS n, count(DISTINCT offset) AS d, "
                    "min(offset) AS lo, max(offset) AS hi FROM kept "
                    "GROUP BY partition ORDER BY partition").collect()
    for r in per:
        bad = sum(1 for i in range(count) if is_bad(i) and i % PARTITIONS == r["partition"])
        assert r["n"] == r["d"] == r["hi"] - r["lo"] + 1 - bad, r
        assert r["lo"] == 0 and r["hi"] == count // PARTITIONS - 1, r
    assert [r["partition"] for r in per] == list(range(PARTITIONS))


def job_args(bootstrap: str, topic: str, fmt: str, path: Path, checkpoint: Path) -> list[str]:
    return ["--bootstrap-server", bootstrap, "--topic", topic, "--table-format", fmt,
            "--path", str(path), "--checkpoint", str(checkpoint), "--value-format", "json",
            "--schema", SCHEMA, "--master", "local[2]", "--trigger", "100ms",
            "--max-records-per-batch", "400", "--spark-conf", "spark.ui.enabled=false"]


def options(bootstrap: str, topic: str, fmt: str, path: Path, checkpoint: Path,
            **more: Any) -> TableOptions:
    more.setdefault("trigger", "once")
    return TableOptions(bootstrap_servers=bootstrap, topic=topic, table_format=fmt,
                        path=path, checkpoint=checkpoint, value_format="json",
                        schema=SCHEMA, **more)


Samples = dict[tuple[str, str | None], float]


def scrape(url: str) -> Samples:
    """The samples of a job's /metrics, by name and partition label."""
    answer = http_call(url)
    assert answer.status == 200, answer
    return {(s.name, s.labels.get("partition")): s.value
            for family in text_string_to_metric_families(answer.body)
            for s in family.samples}


def scrape_once(job: CopyJob, scraped: list[Samples]) -> bool:
    """For ``kill_mid_batch``: false until the job's /metrics (at the address its log
    shows) has been scraped once, so that the kill waits for a batch running after it."""
    if scraped:
        return True
    shown = re.search(r"metrics on (http://\S+)", job.output())
    if shown:
        scraped.append(scrape(shown.group(1)))
    return False


def check_live_metrics(samples: Samples, count: int) -> None:
    """A scrape in the middle of a run: each partition's committed offset and its lag add
    up to the partition's end offset (the topic was produced before the job started)."""
    for p in map(str, range(PARTITIONS)):
        committed = samples[("ads_pipeline_committed_offset", p)]
        assert 0 < committed <= count // PARTITIONS, samples
        assert committed + samples[("ads_pipeline_lag_records", p)] == count // PARTITIONS
        if committed < count // PARTITIONS:  # the records are from 2023
            assert samples[("ads_pipeline_lag_seconds", p)] > 86_400, samples


def finish_with_metrics(spark: SparkSession, o: TableOptions, bootstrap: str,
                        lines: list[str]) -> Any:
    """The job run to the end in this process with its /metrics served, scraped after it:
    the figures are the run's, and the table has caught up with the topic's ends."""
    metrics = job_metrics(o)
    with serve_metrics("127.0.0.1:0", metrics, lines.append) as (host, port):
        result = run_table(spark, o, report=lines.append, metrics=metrics)
        samples = scrape(f"http://{host}:{port}/metrics")
    assert result.batches >= 1 and result.skipped == 0, lines
    assert samples[("ads_pipeline_rows_written_total", None)] == result.records
    assert samples[("ads_pipeline_dead_letter_rows_total", None)] == result.dead_letters
    assert samples[("ads_pipeline_batches_committed_total", None)] == result.batches
    assert samples[("ads_pipeline_last_batch_duration_seconds", None)] > 0
    _, progress = checkpoint_status(o.checkpoint, bootstrap)
    assert len(progress) == PARTITIONS
    for r in progress:
        p = str(r.partition)
        assert samples[("ads_pipeline_committed_offset", p)] == r.end, samples
        assert samples[("ads_pipeline_lag_records", p)] == 0
        assert samples[("ads_pipeline_lag_seconds", p)] == 0
    return result


def kill_then_finish(spark: SparkSession, bootstrap: str, topic: str, fmt: str,
                     path: Path, checkpoint: Path, logs: Path, kills: int, count: int,
                     **more: Any) -> list[str]:
    """The job SIGKILLed ``kills`` times mid-batch (the first time in its first batch,
    then each time in a batch after the one the killed run was in; the last killed run
    serves /metrics, scraped once while it runs), then run to the end in this process;
    then Spark's commit of its last batch is removed (the state a kill after the table's
    commit and before Spark's leaves; for Delta, the dead-letter table's commits from that
    batch's on too: a kill between the two tables' commits) and the job run again."""
    args = job_args(bootstrap, topic, fmt, path, checkpoint)
    committed = -1
    scraped: list[Samples] = []
    for n in range(kills):
        served = ["--metrics-listener", "127.0.0.1:0"] if n == kills - 1 else []
        job = CopyJob(logs / f"run-{n}.log", *args, *served, verb="table")
        committed = kill_mid_batch(
            job, checkpoint, after=committed + 1, limit_s=90,
            inside=(lambda job=job: scrape_once(job, scraped)) if served else lambda: True)
    if kills:
        check_live_metrics(scraped[0], count)
    lines: list[str] = []
    o = options(bootstrap, topic, fmt, path, checkpoint, **more)
    result = finish_with_metrics(spark, o, bootstrap, lines)
    if not kills:  # this run wrote every record: all but the bad ones to the table
        assert result.records == count - sum(map(is_bad, range(count)))

    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for name in (f"{last}", f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    if fmt == "delta":
        unlog_batch(path.parent / dead_letter_name(path.name), last)
    again = run_table(spark, o, report=lines.append)
    assert (again.skipped, again.records) == (1, 0), lines
    # the dead letters of the replayed batch written again where their commit was removed
    assert (again.dead_letters > 0) == (fmt == "delta"), lines
    assert any("already in the table" in line for line in lines)
    return lines


def unlog_batch(table: Path, batch: int) -> None:
    """Removes the Delta log's commit of ``batch`` and those after it (maintenance)."""
    for entry in sorted((table / "_delta_log").glob("*.json"), reverse=True):
        actions = [json.loads(line) for line in entry.read_text().splitlines() if line]
        entry.unlink()
        if any(a.get("txn", {}).get("version") == batch for a in actions):
            return
    raise AssertionError(f"no commit of batch {batch} in {table}")


@pytest.mark.timeout(240)  # 40 s alone; twice that when other work shares the cores
def test_spark_table_delta_exactly_once_through_kills(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    count = 4000
    create_topic(bootstrap, "t-delta", PARTITIONS)
    produce_json(bootstrap, "t-delta", count)
    path = tmp_path / "orders"
    # Maintenance after the third micro-batch, which the run in this process writes: by
    # then the first date's partition has a file from each micro-batch.
    lines = kill_then_finish(spark, bootstrap, "t-delta", "delta", path, tmp_path / "cp",
                             tmp_path, kills=2, count=count, maintain_every=3)

    table = DeltaTable(str(path))
    assert "OPTIMIZE" in [h["operation"] for h in table.history()], lines
    check_rows(table.to_pyarrow_table(), count)
    assert table.metadata().partition_columns == ["date"]
    assert {p["date"] for p in table.partitions()} == {"2023-11-14", "2023-11-15"}
    check_dead_letters(DeltaTable(str(tmp_path / dead_letter_name("orders")))
                       .to_pyarrow_table(), count)
    spark_sql_check(spark, table.file_uris(), count)


@pytest.mark.timeout(240)
def test_spark_table_iceberg_exactly_once_through_a_replay(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    count = 2000
    create_topic(bootstrap, "t.ice", PARTITIONS)
    produce_json(bootstrap, "t.ice", count)
    warehouse = tmp_path / "warehouse"
    # No SIGKILL here (the Delta test has them, and each costs a Spark process's start):
    # what differs between the formats is the table's record of batches, which the replay
    # of a batch the table already holds exercises. Five micro-batches of 400 records,
    # maintenance after the fifth: each date's partition then has three files.
    lines = kill_then_finish(spark, bootstrap, "t.ice", "iceberg", warehouse,
                             tmp_path / "cp", tmp_path, kills=0, count=count,
                             trigger="available-now", max_records_per_batch=400,
                             maintain_every=5)

    catalog = iceberg_catalog(warehouse)
    table = catalog.load_table("ads.t_ice")
    assert iceberg_identifier("t.ice") == "ads.t_ice"
    check_rows(table.scan().to_arrow(), count)
    assert [f.name for f in table.spec().fields] == ["date"]
    batches = [s.summary.get("ads.batch") for s in table.snapshots()]
    # one snapshot per batch, then the compaction's
    assert batches == [str(b) for b in range(5)] + [None, None]
    check_compacted(table, lines)
    check_dead_letters(catalog.load_table(dead_letter_name("ads.t_ice")).scan().to_arrow(),
                       count)
    spark_sql_check(spark, [t.file.file_path for t in table.scan().plan_files()], count)


def check_compacted(table: Any, lines: list[str]) -> None:
    """The compaction's snapshots (one per date) replaced each date's three files by one
    and changed no row: the table before them and after them, read by time travel."""
    compactions = [s for s in table.snapshots()
                   if s.summary.get("ads.maintenance") == "compaction"]
    assert len(compactions) == 2, lines
    assert any("table maintained: 6 files compacted into 2" in line for line in lines), lines

    def files_and_rows(snapshot_id: int) -> tuple[int, list[dict[str, Any]]]:
        scan = table.scan(snapshot_id=snapshot_id)
        rows = scan.to_arrow().sort_by([("partition", "ascending"), ("offset", "ascending")])
        return len(list(scan.plan_files())), rows.to_pylist()

    before = files_and_rows(compactions[0].parent_snapshot_id)
    after = files_and_rows(compactions[-1].snapshot_id)
    assert (before[0], after[0]) == (6, 2)
    assert before[1] == after[1]


def test_spark_table_bytes_values_and_refusals(spark: SparkSession, broker: EmbeddedBroker,
                                               tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "t-raw", PARTITIONS)
    produce_json(bootstrap, "t-raw", 20)
    path = tmp_path / "raw"
    result = run_table(spark, TableOptions(
        bootstrap_servers=bootstrap, topic="t-raw", table_format="delta", path=path,
        checkpoint=tmp_path / "cp", trigger="once", partition_by_date=False),
        report=lambda _: None)
    assert (result.records, result.dead_letters) == (20, 0)
    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == []
    got = table.to_pyarrow_table()
    assert got.column_names == ["topic", "partition", "offset", "timestamp", "key",
                                "headers", "value"]
    rows = sorted(got.to_pylist(), key=lambda r: (r["partition"], r["offset"]))
    assert rows[0]["headers"] == [{"key": "seq", "value": b"0"}]
    assert rows[0]["value"] == json.dumps({"id": 0, "name": "n0", "amount": 0.0}).encode()
    assert not (tmp_path / dead_letter_name("raw")).exists()
    shown = subprocess.run([sys.executable, "-m", "ads.cli.main", "pipeline", "status",
                            "--checkpoint", str(tmp_path / "cp"), "--bootstrap-server",
                            bootstrap], capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "micro-batch 0 committed" in shown.stdout
    assert "t-raw  3          5          -        5    0" in shown.stdout, shown.stdout

    def refused(message: str, **more: Any) -> None:
        with pytest.raises(TableError, match=message):
            run_table(spark, TableOptions(**{  # type: ignore[arg-type]
                "bootstrap_servers": bootstrap, "topic": "t-raw", "table_format": "delta",
                "path": tmp_path / "no", "checkpoint": tmp_path / "cp-no", **more}))

    refused("'t-none' does not exist", topic="t-none")
    refused("does not parse", value_format="json", schema="id BIGINT,,")
    refused("offset, Date clash", value_format="json", schema="offset BIGINT, Date STRING")
    refused("goes with the json value format", schema="id BIGINT")
    refused("table format must be one of", table_format="hudi")
    refused("no Iceberg Spark runtime", table_format="iceberg", writer="spark")
    refused("no Iceberg Spark runtime", table_format="iceberg", writer="spark",
            mode="upsert")
    refused("a session started with Spark's Delta package", writer="spark")
    assert not (tmp_path / "cp-no").exists()


class Keyed:
    """Records produced to ``topic`` (partition ``i % 2`` unless told), and what an upsert
    table should hold after them: per key, the id in its last record's JSON value; no row
    after a tombstone. A record without a key or whose value does not parse changes
    nothing."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.latest: dict[bytes, int] = {}

    def put(self, i: int, key: bytes | None, value: bytes | None,
            partition: int | None = None) -> None:
        def delivered(err: Any, _msg: Any) -> None:
            assert err is None, err

        self.producer.produce(self.topic, key=key, value=value, timestamp=TS + i,
                              partition=i % 2 if partition is None else partition,
                              on_delivery=delivered)
        if key is not None and value is not None and not value.startswith(b"{bad"):
            self.latest[key] = json.loads(value)["id"]
        elif key is not None and value is None:
            self.latest.pop(key, None)

    def flush(self) -> None:
        assert self.producer.flush(15) == 0


def read_table(fmt: str, path: Path, topic: str) -> pa.Table:
    if fmt == "delta":
        return DeltaTable(str(path)).to_pyarrow_table()
    return iceberg_catalog(path).load_table(iceberg_identifier(topic)).scan().to_arrow()


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_spark_table_upsert_keeps_the_latest_per_key(
        fmt: str, spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    topic = f"u-{fmt}"
    # Not compacted: a compacted topic refuses records without a key, and one is sent.
    create_topic(bootstrap, topic, 2)
    keyed = Keyed(bootstrap, topic)
    put, latest = keyed.put, keyed.latest
    for i in range(40):  # keys 0..9, each written four times in the first batch
        put(i, b"k%d" % (i % 10), json.dumps({"id": i, "name": f"n{i}", "amount": 1.0})
            .encode())
    put(40, None, b'{"id": 40}')  # no key: nothing to upsert, a dead letter
    put(41, b"k1", b"{bad")  # does not parse: a dead letter, k1 keeps its row
    keyed.flush()
    path = tmp_path / "table"
    # Maintenance after every micro-batch, keeping nothing older than now.
    o = options(bootstrap, topic, fmt, path, tmp_path / "cp", mode="upsert",
                maintain_every=1, retention_hours=0)
    lines: list[str] = []
    first = run_table(spark, o, report=lines.append)
    assert (first.records, first.dead_letters) == (10, 2)
    for i in range(50, 56):  # k0 and k5 deleted, k2 and k3 updated, k10 new
        key = {50: b"k0", 51: b"k5", 52: b"k2", 53: b"k3", 54: b"k10", 55: b"k2"}[i]
        put(i, key, None if i in (50, 51) else json.dumps({"id": i, "name": "x"}).encode())
    put(56, b"k11", None)  # a tombstone for a key never seen deletes nothing
    keyed.flush()
    assert run_table(spark, o, report=lines.append).records == 6  # one per key in it
    rows = read_table(fmt, path, topic).select(["key", "id"]).to_pylist()
    assert sorted((r["key"], r["id"]) for r in rows) == sorted(latest.items())
    assert b"k0" not in latest and latest[b"k2"] == 55 and latest[b"k1"] == 31
    # both tables after each run (the dead-letter table exists from the first run on)
    assert sum("table maintained" in line for line in lines) == 4, lines
    batch, progress = checkpoint_status(tmp_path / "cp", bootstrap)
    assert batch == 1
    assert [(r.partition, r.loaded_to, r.end, r.lag) for r in progress] == [
        (0, 25, 25, 0), (1, 24, 24, 0)]
    if fmt == "delta":
        table = DeltaTable(str(path))
        assert "VACUUM END" in [h["operation"] for h in table.history()]
        files = {p.name for p in path.rglob("*.parquet")}
        assert files == {Path(u).name for u in table.file_uris()}  # the rest vacuumed
    else:
        table = iceberg_catalog(path).load_table(iceberg_identifier(topic))
        assert len(table.snapshots()) == 1  # the older ones expired


@pytest.mark.parametrize(("args", "message"), [
    (["--value-format", "json"], "--schema goes with --value-format json"),
    (["--trigger", "soon"], "--trigger"),
    (["--max-records-per-batch", "0"], "must be positive"),
    (["--metrics-listener", "nowhere"], "--metrics-listener"),
    (["--writer", "spark", "--table-format", "iceberg"],
     "there is no Iceberg Spark runtime for Spark 4.2"),
    (["--writer", "spark", "--table-format", "iceberg", "--mode", "upsert"],
     "there is no Iceberg Spark runtime for Spark 4.2"),
    (["--spark-jars", "x"], "--spark-jars goes with --writer spark"),
    (["--writer", "spark", "--spark-jars", "nowhere"], "has no delta-spark_4.2_2.13-"),
    # upsert passes the writer's checks: what stops this one is the jar folder
    (["--writer", "spark", "--mode", "upsert", "--spark-jars", "nowhere"],
     "has no delta-spark_4.2_2.13-"),
])
def test_spark_table_cli_usage_errors(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "ads.cli.main", "pipeline", "table",
                           "--topic", "a", "--table-format", "delta", "--path", "x", *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
