"""`ads pipeline table --writer spark`: JSON records kept as a Delta table written by
Spark's own Delta package (``txnAppId``/``txnVersion``), the job's process group SIGKILLed
in the middle of a micro-batch and run again to the end, then a replay of its last
micro-batch: each good record once, offsets contiguous per partition, the bad records in
the dead-letter table, read through ``deltalake`` and Spark SQL.

The jars come from the folder `make install` fills from tools/spark_delta/pom.xml, so the
test needs no repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from test_spark_copy import CopyJob, kill_mid_batch
from test_spark_tables import (
    PARTITIONS,
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
    assert job.wait(timeout_s=150) == 0, job.output()
    return job.output()


@pytest.mark.timeout(300)  # about a minute alone; more when other work shares the cores
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
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert table.transaction_version(app) == last
    assert "WRITE" in [h["operation"] for h in table.history()]  # Spark's Delta writer

    # Spark's commit of the last micro-batch removed: the replay writes nothing.
    versions = table.version(), dead.version()
    for name in (f"{last}", f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    out = run_to_end(tmp_path / "run-2.log", args)
    assert f"batch {last}: already in the tables" in out, out
    assert "wrote 0 records" in out, out
    table, dead = DeltaTable(str(path)), DeltaTable(str(tmp_path / dead_letter_name("orders")))
    assert (table.version(), dead.version()) == versions
    check_rows(table.to_pyarrow_table(), count)
