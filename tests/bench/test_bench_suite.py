"""`ads bench suite --quick`: both brokers start, every workload runs against both, and the
results, table and plots are written. A smoke test only; figures are not checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ads.bench.mock import MockBroker
from ads.cli.main import main

pytestmark = pytest.mark.slow


def test_bench_suite_quick_writes_results(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n<!-- bench-suite:begin -->\nold\n<!-- bench-suite:end -->\n")
    status = main(["bench", "suite", "--quick", "--output-dir", str(tmp_path / "out"),
                   "--docs", str(docs)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    (run_dir,) = (tmp_path / "out").iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    assert [w["id"] for w in results["workloads"]] == [f"W{i}" for i in range(1, 9)]
    for wl in results["workloads"]:
        for side in ("ads", "mock"):
            (run,) = wl["runs"][side]
            assert "error" not in run, (wl["id"], side, run)
        assert wl["summary"]["ratio"] is not None, wl["id"]
    assert results["machine"]["cores"]
    assert results["loopback_mb_per_s"] > 0
    assert (run_dir / "results.md").read_text().startswith("Run ")
    assert {p.name for p in run_dir.glob("*.png")} == {"throughput.png", "latency.png"}
    assert not (run_dir / "ads-data").exists()
    assert "| W1 produce 100 B" in captured.out
    # A quick run's figures mean nothing: the docs keep what they had.
    assert "old" in docs.read_text()


def test_bench_mock_creates_topics_with_partitions() -> None:
    from confluent_kafka.admin import AdminClient

    with MockBroker() as mock:
        mock.create_topic("m", 3)
        md = AdminClient({"bootstrap.servers": mock.bootstrap}).list_topics("m", timeout=10)
        assert len(md.topics["m"].partitions) == 3
