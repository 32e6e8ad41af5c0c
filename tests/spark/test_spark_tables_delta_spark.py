"""`ads pipeline table --writer spark`: JSON records kept as a Delta table written by
Spark's own Delta package (``txnAppId``/``txnVersion``), the job's process group SIGKILLed
in the middle of a micro-batch and run again to the end, then a replay of its last
micro-batch: each good record once, offsets contiguous per partition, the bad records in
the dead-letter table, read through ``deltalake`` and Spark SQL. And ``--mode upsert``:
updates and tombstones over several micro-batches merged into the table (one ``MERGE`` a
micro-batch), then a replay of its last micro-batch that merges nothing.

The jars come from the folder `make install` fills from tools/spark_delta/pom.xml, so the
test needs no repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from test_spark_copy import CopyJob, kill_mid_batch
from test_spark_tables import (
    PARTITIONS,
    Keyed,
    check_dead_letters,
    check_rows,
    job_args,
    produce_json,
    spark_sql_check,
)

from ads.spark.tables import dead_letter_name
from ads.testing import EmbeddedBroker
from conftest import create_topic

DELTA_JARS = Path(__file__).parents[2] / "tools" / "spark_delta" / "target" / "jars"


def run_to_end(log: Path, args: list[str]) -> str:
    """The job run with ``--once``: what the topic holds, in one micro-batch."""
    job = CopyJob(log, *args, "--once", verb="table")
    assert job.wait(timeout_s=300) == 0, job.output()
    return job.output()


def last_batch(checkpoint: Path) -> int:
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def unlog_last_batch(checkpoint: Path) -> int:
    """Spark's commit of the last micro-batch removed, as a kill after the table's
    commit and before Spark's leaves it: the next run replays that micro-batch."""
    last = last_batch(checkpoint)
    for name in (f"{last}", f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    return last


@pytest.mark.timeout(600)  # about a minute alone; more when other work shares the cores
def test_spark_table_spark_writer_delta_exactly_once_through_a_kill_and_a_replay(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    assert list(DELTA_JARS.glob("delta-spark_*.jar")), "run make install (tools/spark_delta)"
    bootstrap = broker.bootstrap_servers
    count = 2000
    create_topic(bootstrap, "t-sw", PARTITIONS)
    produce_json(bootstrap, "t-sw", count)
    path, checkpoint = tmp_path / "orders", tmp_path / "cp"
    args = [*job_args(bootstrap, "t-sw", "delta", path, checkpoint),
            "--writer", "spark", "--spark-jars", str(DELTA_JARS)]
    kill_mid_batch(CopyJob(tmp_path / "run-0.log", *args, verb="table"), checkpoint,
                   after=1, limit_s=150)
    out = run_to_end(tmp_path / "run-1.log", args)
    assert "wrote " in out, out

    table = DeltaTable(str(path))
    dead = DeltaTable(str(tmp_path / dead_letter_name("orders")))
    check_rows(table.to_pyarrow_table(), count)
    assert table.metadata().partition_columns == ["date"]
    check_dead_letters(dead.to_pyarrow_table(), count)
    spark_sql_check(spark, table.file_uris(), count)
    query = (checkpoint / "metadata").read_text()
    app = query.split('"id":"')[1].split('"')[0]
    last = last_batch(checkpoint)
    assert table.transaction_version(app) == last
    assert "WRITE" in [h["operation"] for h in table.history()]  # Spark's Delta writer

    # Spark's commit of the last micro-batch removed: the replay writes nothing.
    versions = table.version(), dead.version()
    unlog_last_batch(checkpoint)
    out = run_to_end(tmp_path / "run-2.log", args)
    assert f"batch {last}: already in the tables" in out, out
    assert "wrote 0 records" in out, out
    table, dead = DeltaTable(str(path)), DeltaTable(str(tmp_path / dead_letter_name("orders")))
    assert (table.version(), dead.version()) == versions
    check_rows(table.to_pyarrow_table(), count)


@pytest.mark.timeout(600)  # about 50 s alone; more when other work shares the cores
def test_spark_table_spark_writer_upsert_merges_each_batch_once(
        spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path) -> None:
    assert list(DELTA_JARS.glob("delta-spark_*.jar")), "run make install (tools/spark_delta)"
    bootstrap = broker.bootstrap_servers
    # Not compacted: a compacted topic refuses records without a key, and some are sent.
    create_topic(bootstrap, "u-sw", 2)
    keyed = Keyed(bootstrap, "u-sw")
    dead: list[bytes] = []
    for i in range(90):  # keys k0..k11, each in one partition: updates all along
        n = i % 12
        if i % 29 == 11:  # no key: a dead letter
            dead.append(json.dumps({"id": i}).encode())
            keyed.put(i, None, dead[-1])
        elif i % 31 == 17:  # does not parse: a dead letter, the key keeps its row
            dead.append(b"{bad %d" % i)
            keyed.put(i, b"k%d" % n, dead[-1], partition=n % 2)
        else:  # a tombstone every 7th record, some of them for keys written again later
            value = None if i % 7 == 3 else json.dumps({"id": i, "name": f"n{i}"}).encode()
            keyed.put(i, b"k%d" % n, value, partition=n % 2)
    keyed.put(90, b"k99", None)  # a tombstone for a key never seen deletes nothing
    keyed.flush()
    assert 0 < len(keyed.latest) < 12  # some keys deleted for good
    path, checkpoint = tmp_path / "latest", tmp_path / "cp"
    # Few shuffle partitions, as the tests' own session has (the latest row per key is a
    # window, MERGE a join): micro-batches of a few dozen rows.
    args = [*job_args(bootstrap, "u-sw", "delta", path, checkpoint), "--mode", "upsert",
            "--writer", "spark", "--spark-jars", str(DELTA_JARS),
            "--spark-conf", "spark.sql.shuffle.partitions=2"]
    # Micro-batches of at most 50 records: two, a key's records spread over both.
    job = CopyJob(tmp_path / "run-1.log", *args, "--trigger", "available-now",
                  "--max-records-per-batch", "50", verb="table")
    assert job.wait(timeout_s=300) == 0, job.output()

    table = DeltaTable(str(path))
    rows = table.to_pyarrow_table().select(["key", "id"]).to_pylist()
    assert sorted((r["key"], r["id"]) for r in rows) == sorted(keyed.latest.items())
    assert table.metadata().partition_columns == ["date"]
    spark.read.parquet(*table.file_uris()).createOrReplaceTempView("latest")
    assert sorted(tuple(r) for r in spark.sql("SELECT key, id FROM latest").collect()) == \
        sorted(keyed.latest.items())
    dead_letters = DeltaTable(str(tmp_path / dead_letter_name("latest")))
    assert sorted(dead_letters.to_pyarrow_table().column("value").to_pylist()) == sorted(dead)
    app = json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]
    last = last_batch(checkpoint)
    assert last == 1, job.output()
    assert table.transaction_version(app) == last
    merges = [h for h in table.history() if h["operation"] == "MERGE"]
    assert len(merges) == last + 1, table.history()  # one a micro-batch
    assert merges[0]["userMetadata"] == f"ads.batch={last}"  # the newest first

    # The last micro-batch replayed: the table records it (txn), so nothing is merged.
    versions = table.version(), dead_letters.version()
    unlog_last_batch(checkpoint)
    out = run_to_end(tmp_path / "run-2.log", args)
    assert f"batch {last}: already in the table" in out, out
    assert "wrote 0 records" in out, out
    table = DeltaTable(str(path))
    assert (table.version(), DeltaTable(str(tmp_path / dead_letter_name("latest"))).version()) \
        == versions
    rows = table.to_pyarrow_table().select(["key", "id"]).to_pylist()
    assert sorted((r["key"], r["id"]) for r in rows) == sorted(keyed.latest.items())
