"""The suite's numbers and reports: percentiles, the resource sampler, the table, the docs
block, flame graphs and top frames."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from ads.bench import report
from ads.bench.stats import ResourceSampler, latency_summary, median, percentile


def test_bench_stats_percentiles_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 99.9) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert median([3.0, 1.0, 2.0, 10.0]) == 2.5


def test_bench_stats_latency_summary_in_ms() -> None:
    summary = latency_summary([0.001, 0.002, 0.003, 0.004])
    assert summary["avg"] == 2.5 and summary["max"] == 4.0 and summary["p50"] == 2.0
    assert latency_summary([])["p99"] is None


def test_bench_stats_sampler_reads_own_process() -> None:
    sampler = ResourceSampler(os.getpid(), interval_s=0.01).start()
    sum(range(200_000))
    usage = sampler.stop()
    assert usage is not None
    assert usage.rss_max_mb > 1 and usage.cpu_s >= 0 and usage.wall_s > 0


def _results() -> dict:  # type: ignore[type-arg]
    side = {"median": 100.0, "min": 90.0, "max": 110.0, "n": 3, "cpu_s": 1.5,
            "rss_max_mb": 50.0, "client_cpu_s": 2.25}
    return {
        "started": "2026-01-01T00-00-00", "command": "ads bench suite", "reps": 3,
        "machine": {"cpu_model": "CPU", "cores": 2, "memory_gb": "24", "kernel": "6",
                    "python": "3.11", "librdkafka": "2"},
        "loopback_mb_per_s": 3000.0,
        "workloads": [{
            "id": "W1", "title": "produce", "metric_label": "records/s", "unit": "records/s",
            "higher_is_better": True, "note": "n",
            "summary": {"ads": side, "ratio": 2.0,
                        "mock": {**side, "median": 50.0, "min": 45.0, "max": 55.0}},
            "extra_metrics": [], "latency_label": "ack",
            "latency": {"ads": {"p50": 1.0, "p99": 2.0}, "mock": {"p50": 1.5, "p99": 3.0}},
        }],
    }


def test_bench_report_table_and_docs_block(tmp_path: Path) -> None:
    text = report.results_markdown(_results())
    assert "| W1 produce | records/s | 100 (90–110) | 50 (45–55) | 2.00× ↑ |" in text
    assert "| 1.5 s / 50 MB (client 2.2 s) |" in text
    assert "3,000 MB/s" in text
    docs = tmp_path / "b.md"
    docs.write_text(f"intro\n{report.DOCS_BEGIN}\nold\n{report.DOCS_END}\noutro\n")
    assert report.update_docs(docs, text)
    new = docs.read_text()
    assert "old" not in new and "intro" in new and "outro" in new and "W1 produce" in new
    plain = tmp_path / "plain.md"
    plain.write_text("no markers")
    assert not report.update_docs(plain, text)


def test_bench_report_has_a_column_and_ratio_per_peer(tmp_path: Path) -> None:
    results = _results()
    results["sides"] = ["ads", "mock", "kafka"]
    results["brokers"] = {
        "ads": {"start_to_answer_s": 0.61, "cpu_s": 12.0, "rss_peak_mb": 70.4},
        "mock": {"start_to_answer_s": 0.2, "cpu_s": 3.0, "rss_peak_mb": 400.0},
        "kafka": {"start_to_answer_s": 3.25, "format_s": 1.1, "cpu_s": 80.5,
                  "rss_peak_mb": 1234.0},
    }
    wl = results["workloads"][0]
    side = wl["summary"]["ads"]
    wl["summary"]["kafka"] = {**side, "median": 400.0, "min": 390.0, "max": 410.0,
                              "cpu_s": 3.5, "rss_max_mb": 900.0}
    wl["summary"]["ratios"] = {"mock": 2.0, "kafka": 0.25}
    wl["latency"]["kafka"] = {"p50": 0.5, "p99": 1.0}
    text = report.results_markdown(results)
    assert ("| ADS median (min–max) | mock median (min–max) | ADS / mock "
            "| Kafka median (min–max) | ADS / Kafka | ADS CPU / max RSS (client CPU) "
            "| mock CPU / max RSS (client CPU) | Kafka CPU / max RSS (client CPU) "
            "| notes |") in text
    assert "| 100 (90–110) | 50 (45–55) | 2.00× ↑ | 400 (390–410) | 0.25× ↑ |" in text
    assert "| 3.5 s / 900 MB (client 2.2 s) | n |" in text
    assert "alternating ADS, mock, Kafka, ADS, mock, Kafka, ..." in text
    assert "| ADS | 0.61 s | 12.0 s | 70 MB |" in text
    assert "| Kafka | 3.25 s (after 1.10 s of storage format) | 80.5 s | 1,234 MB |" in text
    written = report.plot_results(results, tmp_path)
    assert {p.name for p in written} == {"throughput.png", "latency.png"}


def test_bench_report_plots_are_png(tmp_path: Path) -> None:
    written = report.plot_results(_results(), tmp_path)
    assert {p.name for p in written} == {"throughput.png", "latency.png"}
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_report_profile_frames_and_flame_graph() -> None:
    stacks = report.read_collapsed([
        "main (a.py:1);loop (a.py:5);append (log.py:9) 6\n",
        "main (a.py:1);loop (a.py:5);decode (codec.py:3) 3\n",
        "main (a.py:1);idle (a.py:7) 1\n",
        "garbage\n",
    ])
    assert sum(stacks.values()) == 10
    top = report.top_frames(stacks)
    assert top[0].frame == "append (log.py:9)" and top[0].self_pct == 60.0
    assert {t.frame: t.total_pct for t in top}["decode (codec.py:3)"] == 30.0
    svg = report.flame_graph_svg(stacks, "W1")
    assert svg.startswith("<svg") and "append (log.py:9)" in svg and "60.0%" in svg
    assert report.top_frames(Counter()) == []


def test_suite_says_why_the_docs_file_was_not_updated(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from ads.bench.report import DOCS_BEGIN, DOCS_END  # noqa: PLC0415
    from ads.bench.suite import SuiteOptions, update_docs  # noqa: PLC0415

    missing = tmp_path / "nope.md"
    update_docs(SuiteOptions(docs=missing), "results\n")
    assert not missing.exists()
    assert "does not exist: not updated" in capsys.readouterr().err
    plain = tmp_path / "plain.md"
    plain.write_text("no block here\n")
    update_docs(SuiteOptions(docs=plain), "results\n")
    assert plain.read_text() == "no block here\n"
    assert "has no" in capsys.readouterr().err
    marked = tmp_path / "marked.md"
    marked.write_text(f"a\n{DOCS_BEGIN}\nold\n{DOCS_END}\nb\n")
    update_docs(SuiteOptions(docs=marked), "results\n")
    assert "results" in marked.read_text() and "old" not in marked.read_text()
    assert f"updated {marked}" in capsys.readouterr().err
