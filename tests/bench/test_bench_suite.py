"""`ads bench suite --quick`: the brokers start, every workload runs against each, and the
results, table and plots are written. Smoke tests only; figures are not checked, only that
each broker's are there."""

from __future__ import annotations

import json
import os
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
    assert results["sides"] == ["ads", "mock"]  # the default peer
    assert set(results["brokers"]) == {"ads", "mock", "ads-3"}
    assert results["brokers"]["mock"]["start_to_answer_s"] > 0
    assert [w["id"] for w in results["workloads"]] == [f"W{i}" for i in range(1, 13)]
    no_mock = {"W9", "W10", "W12"}  # replicated, or restarted: the mock has neither
    for wl in (w for w in results["workloads"] if w["id"] not in no_mock):
        for side in ("ads", "mock"):
            (run,) = wl["runs"][side]
            assert "error" not in run, (wl["id"], side, run)
        assert wl["summary"]["ratio"] is not None, wl["id"]
    (w11,) = (w["runs"]["ads"][0] for w in results["workloads"] if w["id"] == "W11")
    for size, records in (("one", 1), ("ten", 10)):
        assert w11[size]["requests"] > 0 and w11[size]["records_per_request"] == records
        assert w11[size]["records_per_s"] == pytest.approx(
            w11[size]["requests_per_s"] * records, rel=0.01)
        assert w11[size]["broker_cpu_us_per_request"] > 0, w11
        # the machine as a whole: a cluster of one ADS broker per core
        assert w11["machine"][size]["requests"] > 0, w11
    assert w11["machine"]["brokers"] == os.cpu_count()
    (w12,) = (w["runs"]["ads"][0] for w in results["workloads"] if w["id"] == "W12")
    scale = w12["by_count"]["20"]
    assert w12["largest"] == scale and scale["partitions"] == 20 and scale["topics"] == 1
    assert scale["restart_clean_s"] > 0 and scale["restart_after_kill_s"] > 0
    assert scale["rss_mb"] > 0 and scale["open_files"] > 0 and scale["metadata_ms"] > 0
    for wl in (w for w in results["workloads"] if w["id"] in no_mock):
        assert set(wl["runs"]) == {"ads"}, wl["id"]
        (run,) = wl["runs"]["ads"]
        assert "error" not in run, (wl["id"], run)
        assert wl["summary"]["ads"]["median"] > 0 and wl["summary"]["ratio"] is None
    # the three brokers' sums: more memory than the single broker's
    assert results["brokers"]["ads-3"]["rss_peak_mb"] > results["brokers"]["ads"]["rss_peak_mb"]
    assert results["w9_over_w1"] > 0
    # produce workloads are timed after a first acknowledged record; the set-up apart
    for wl in (w for w in results["workloads"] if w["id"] in ("W1", "W2", "W3", "W8", "W9")):
        for runs in wl["runs"].values():
            assert all(run["ready_ms"] > 0 for run in runs), wl["id"]
    assert results["machine"]["cores"]
    assert results["loopback_mb_per_s"] > 0
    assert (run_dir / "results.md").read_text().startswith("Run ")
    assert {p.name for p in run_dir.glob("*.png")} == {"throughput.png", "latency.png"}
    assert not (run_dir / "ads-data").exists() and not (run_dir / "ads-cluster").exists()
    assert "| W1 produce 100 B" in captured.out
    assert "| ADS, 3 brokers (W9, W10) |" in (run_dir / "results.md").read_text()
    # A quick run's figures mean nothing: the docs keep what they had.
    assert "old" in docs.read_text()


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.kafka_reference
@pytest.mark.timeout(300)
def test_bench_suite_kafka_peer_reports_kafka_figures(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    status = main(["bench", "suite", "--quick", "--peer", "kafka", "--output-dir", str(out)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    (run_dir,) = out.iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["sides"] == ["ads", "kafka"]
    assert [w["id"] for w in results["workloads"]] == [f"W{i}" for i in range(1, 13)]
    for wl in results["workloads"]:
        assert set(wl["runs"]) == {"ads", "kafka"}
        (run,) = wl["runs"]["kafka"]
        assert "error" not in run, (wl["id"], run)
        assert run["broker"]["cpu_s"] >= 0 and run["broker"]["rss_max_mb"] > 0, wl["id"]
        kafka = wl["summary"]["kafka"]
        assert kafka["median"] > 0, wl["id"]
        assert wl["summary"]["ratios"]["kafka"] == wl["summary"]["ads"]["median"] / kafka["median"]
    assert results["workloads"][0]["latency"]["kafka"]["p99"] > 0
    facts = results["brokers"]
    assert set(facts) == {"ads", "kafka", "ads-3", "kafka-3"}
    for side in facts:
        assert 0 < facts[side]["start_to_answer_s"] < 120, side
        assert facts[side]["cpu_s"] > 0, side
    assert facts["kafka"]["format_s"] > 0 and facts["kafka-3"]["format_s"] > 0
    assert facts["kafka"]["rss_peak_mb"] > 100  # a JVM, not the mock or ADS answering
    assert facts["kafka-3"]["rss_peak_mb"] > 2 * facts["kafka"]["rss_peak_mb"]  # three JVMs
    table = (run_dir / "results.md").read_text()
    assert "| ADS median (min–max) | Kafka median (min–max) | ADS / Kafka |" in table
    assert "| Kafka CPU / max RSS (client CPU) |" in table
    assert "| Kafka | " in table and "of storage format)" in table
    assert "alternating ADS, Kafka, ADS, Kafka" in table
    assert {p.name for p in run_dir.glob("*.png")} == {"throughput.png", "latency.png"}
    # Kafka's broker ran from its own configuration in the run's directory, and is gone.
    assert "log.dirs=" + str(run_dir / "kafka" / "data") in (
        run_dir / "kafka" / "server.properties").read_text()
    assert not (run_dir / "kafka" / "data").exists()
    # The cluster: one quorum of its three nodes, each formatted with one cluster id.
    nodes = [run_dir / "kafka-cluster" / f"node-{n}" for n in (1, 2, 3)]
    voters = {line for node in nodes for line in (node / "server.properties").read_text()
              .splitlines() if line.startswith("controller.quorum.voters=")}
    assert len(voters) == 1 and voters.pop().count("@127.0.0.1:") == 3
    assert all(not (node / "data").exists() for node in nodes)
    assert _processes_mentioning(str(run_dir)) == []


def test_bench_suite_kafka_peer_without_jars_is_a_usage_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    status = main(["bench", "suite", "--peer", "both", "--kafka-jars", str(tmp_path / "none"),
                   "--output-dir", str(tmp_path / "out")])
    assert status == 2
    assert "--kafka-jars" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bench_mock_creates_topics_with_partitions() -> None:
    from confluent_kafka.admin import AdminClient

    with MockBroker() as mock:
        mock.create_topic("m", 3)
        md = AdminClient({"bootstrap.servers": mock.bootstrap}).list_topics("m", timeout=10)
        assert len(md.topics["m"].partitions) == 3
