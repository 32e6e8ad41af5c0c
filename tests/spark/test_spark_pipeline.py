"""`ads pipeline load` / `status`: topics copied into Parquet exactly once, including when
the loading driver is killed with SIGKILL mid-run and started again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
from pyspark.sql import SparkSession
from test_spark_read import TS, produce

from ads.spark.output import OutputLog
from ads.spark.pipeline import LoadOptions, load, status
from ads.testing import EmbeddedBroker
from conftest import create_topic

DAY_MS = 86_400_000




def dataset_rows(out: Path) -> list[tuple[str, int, int]]:
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table(
        columns=["topic", "partition", "offset"])
    return sorted(zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(),
                      table.column("offset").to_pylist(), strict=True))


def test_spark_pipeline_load_and_status(spark: SparkSession, broker: EmbeddedBroker,
                                        tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "orders", 2)
    create_topic(bootstrap, "refunds", 1)
    produce(bootstrap, "orders", 60, 2, ts=TS)
    produce(bootstrap, "orders", 40, 2, ts=TS + DAY_MS)
    produce(bootstrap, "refunds", 10, 1)
    out = tmp_path / "lake"
    options = LoadOptions(bootstrap_servers=bootstrap, topics=("orders", "refunds"),
                          output=out, max_records_per_batch=45)
    lines: list[str] = []
    result = load(spark, options, report=lines.append)
    assert result.records == 110 and result.batches == 3
    assert any("records/s" in line and "lag" in line for line in lines)
    assert dataset_rows(out) == sorted(
        [("orders", p, o) for p in (0, 1) for o in range(50)]
        + [("refunds", 0, o) for o in range(10)])
    dates = sorted(p.name for p in (out / "topic=orders").iterdir())
    assert dates == ["date=2023-11-14", "date=2023-11-15"]

    produce(bootstrap, "orders", 6, 2)
    last, rows = status(out)
    assert last is not None and last.batch == 2
    assert [(r.topic, r.partition, r.loaded_to, r.records, r.lag) for r in rows] == [
        ("orders", 0, 50, 50, 3), ("orders", 1, 50, 50, 3), ("refunds", 0, 10, 10, 0)]
    again = load(spark, LoadOptions(bootstrap_servers=bootstrap, topics=("orders",),
                                    output=out, trigger="once"), report=lines.append)
    assert again.records == 6 and again.batches == 1
    assert len(dataset_rows(out)) == 116
    assert [r.lag for r in status(out)[1]] == [0, 0, 0]


def run_cli(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.Popen([sys.executable, "-m", "ads.cli.main", "pipeline", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)


def test_spark_pipeline_sigkill_and_rerun(broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "payments", 3)
    produce(bootstrap, "payments", 1800, 3)
    out = tmp_path / "lake"
    load_args = ["load", "--bootstrap-server", bootstrap, "--topic", "payments",
                 "--output", str(out), "--master", "local[2]",
                 "--max-records-per-batch", "300"]
    first = run_cli(*load_args)
    commits = OutputLog(out).commits
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and first.poll() is None:
        if commits.is_dir() and len(list(commits.glob("*.json"))) >= 2:
            break
        time.sleep(0.05)
    assert first.poll() is None, first.communicate()[0]
    time.sleep(0.3)  # into the next batch: staging written or being written
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=10)
    killed_at = len(list(commits.glob("*.json")))
    assert 2 <= killed_at < 8

    second = run_cli(*load_args)
    output, _ = second.communicate(timeout=180)
    assert second.returncode == 0, output
    assert "loaded" in output and "records/s" in output
    assert dataset_rows(out) == sorted(("payments", p, o) for p in range(3) for o in range(600))

    stat = run_cli("status", "--output", str(out))
    text, _ = stat.communicate(timeout=60)
    assert stat.returncode == 0, text
    assert "payments  0          600        600      600  0" in text
