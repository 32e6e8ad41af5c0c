"""Smoke tests of `ads bench produce|consume|e2e` on tiny inputs: they run against a broker
and print one well-formed JSON object. Speed is not asserted."""

from __future__ import annotations

import json

import pytest

from ads.cli.main import main

LATENCY_KEYS = {"avg", "p50", "p95", "p99", "p99.9", "max"}


def run_json(capsys, *argv: str) -> dict:  # type: ignore[no-untyped-def]
    assert main(["bench", *argv, "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    return json.loads(out[0])


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka"])
def test_bench_produce_reports_rate_and_latency(bootstrap, capsys, client) -> None:  # type: ignore[no-untyped-def]
    report = run_json(capsys, "produce", "--bootstrap-server", bootstrap, "--topic", "p",
                      "--partitions", "2", "--num-records", "300", "--record-size", "50",
                      "--client", client)
    assert report["acknowledged"] == 300 and report["failed"] == 0
    assert report["bytes"] == 300 * 50
    assert report["records_per_s"] > 0 and report["mb_per_s"] > 0
    assert set(report["latency_ms"]) == LATENCY_KEYS
    assert 0 <= report["latency_ms"]["p50"] <= report["latency_ms"]["max"]


def test_bench_produce_payload_file_and_throttle(bootstrap, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    payloads = tmp_path / "payloads.txt"
    payloads.write_bytes(b"alpha\nbeta\n\ngamma\n")
    report = run_json(capsys, "produce", "--bootstrap-server", bootstrap, "--topic", "pf",
                      "--partitions", "3", "--round-robin", "--num-records", "200",
                      "--payload-file", str(payloads), "--throughput", "2000",
                      "--compression", "lz4", "--acks", "all", "--linger-ms", "0")
    assert report["acknowledged"] == 200
    assert 200 * 4 <= report["bytes"] <= 200 * 5
    assert report["elapsed_s"] >= 0.09  # paced to 2,000 records/s


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka"])
def test_bench_consume_assign_mode(bootstrap, capsys, client) -> None:  # type: ignore[no-untyped-def]
    run_json(capsys, "produce", "--bootstrap-server", bootstrap, "--topic", "c",
             "--partitions", "2", "--num-records", "400", "--round-robin")
    report = run_json(capsys, "consume", "--bootstrap-server", bootstrap, "--topic", "c",
                      "--num-records", "400", "--client", client, "--timeout-ms", "5000")
    assert report["records"] == 400 and report["complete"]
    assert report["bytes"] == 400 * 100
    assert report["mode"] == "assign"
    assert report["time_to_first_record_ms"] is not None


def test_bench_consume_last_records_in_rounds(bootstrap, capsys) -> None:  # type: ignore[no-untyped-def]
    run_json(capsys, "produce", "--bootstrap-server", bootstrap, "--topic", "r",
             "--partitions", "1", "--num-records", "500")
    report = run_json(capsys, "consume", "--bootstrap-server", bootstrap, "--topic", "r",
                      "--num-records", "100", "--last", "100", "--rounds", "3")
    assert report["target"] == 300
    assert report["records"] == 300 and report["complete"]


def test_bench_consume_group_mode(bootstrap, capsys) -> None:  # type: ignore[no-untyped-def]
    run_json(capsys, "produce", "--bootstrap-server", bootstrap, "--topic", "g",
             "--partitions", "1", "--num-records", "200")
    report = run_json(capsys, "consume", "--bootstrap-server", bootstrap, "--topic", "g",
                      "--num-records", "200", "--group", "bench-group", "--timeout-ms", "8000")
    assert report["mode"] == "group" and report["records"] == 200 and report["complete"]


def test_bench_e2e_reports_latency(bootstrap, capsys) -> None:  # type: ignore[no-untyped-def]
    # 0.5 s of sending: a few of the clients' 200 ms statistics intervals.
    report = run_json(capsys, "e2e", "--bootstrap-server", bootstrap, "--topic", "e",
                      "--partitions", "1", "--num-records", "1500", "--throughput", "3000",
                      "--linger-ms", "0", "--producer-prop", "batch.num.messages=1")
    assert report["sent"] == 1500 and report["received"] == 1500
    assert report["failed"] == 0
    assert set(report["latency_ms"]) == LATENCY_KEYS
    assert report["latency_ms"]["p50"] > 0
    assert report["requests_per_s"] > 0
    # The clients' round trips, as librdkafka times them: each one a request's wait.
    assert 0 < report["produce_rtt_p50_us"] < report["latency_ms"]["max"] * 1000
    assert 0 < report["fetch_rtt_p50_us"] < 1_000_000
    assert report["fetch_requests_per_s"] > report["requests_per_s"] / 10


def test_bench_tools_print_a_summary_line(bootstrap, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["bench", "produce", "--bootstrap-server", bootstrap, "--topic", "s",
                 "--partitions", "1", "--num-records", "50"]) == 0
    out = capsys.readouterr().out
    assert "50 records sent" in out and "records/s" in out and "p99" in out


def test_bench_rejects_bad_numbers(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["bench", "produce", "--topic", "x", "--num-records", "0"]) == 2
    assert "--num-records must be positive" in capsys.readouterr().err


def test_bench_produce_warm_up_times_from_a_first_acknowledged_record(bootstrap, capsys) -> None:  # type: ignore[no-untyped-def]
    """An idempotent producer's set-up (its producer id first) is reported apart."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    cold = run_json(capsys, "produce", "--bootstrap-server", bootstrap, "--topic", "w",
                    "--partitions", "1", "--num-records", "200")
    assert cold["ready_ms"] is None
    warm = run_json(capsys, "produce", "--bootstrap-server", bootstrap, "--topic", "w",
                    "--num-records", "200", "--warm-up",
                    "--producer-prop", "enable.idempotence=true", "--acks", "all")
    assert warm["acknowledged"] == 200 and warm["failed"] == 0
    assert warm["bytes"] == 200 * 100  # the warm-up record is not counted
    assert warm["ready_ms"] > 0 and warm["elapsed_s"] > 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "warm-up-check"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("w", 0), timeout=10)
    finally:
        consumer.close()
    assert high - low == 200 + 1 + 200  # the warm-up record is in the topic

    assert main(["bench", "produce", "--bootstrap-server", bootstrap, "--topic", "w",
                 "--num-records", "10", "--warm-up", "--client", "kafka-python"]) != 0
    assert "confluent-kafka client only" in capsys.readouterr().err
