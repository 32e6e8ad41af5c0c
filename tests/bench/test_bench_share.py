"""`ads bench share-consume` on a tiny input: share consumers (confluent-kafka's
ShareConsumer) read what `ads bench produce` wrote, alone and beside a classic group
consumer, and the tool prints one well-formed JSON object. Speed is not asserted."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ads.cli.main import main
from ads.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def share_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"group.share.enable": "true"}) as b:
        yield b


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(["bench", *argv, "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    return json.loads(out[0])


def test_bench_share_consume_against_a_classic_consumer(
        share_broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = share_broker.bootstrap_servers
    run_json(capsys, "produce", "--bootstrap-server", bs, "--topic", "q", "--partitions", "1",
             "--num-records", "3000")
    report = run_json(capsys, "share-consume", "--bootstrap-server", bs, "--topic", "q",
                      "--num-records", "3000", "--consumers", "2", "--compare",
                      "--timeout-ms", "8000")
    share = report["share"]
    # Every record read: the group starts at the earliest offset.
    assert share["complete"] and share["records"] == 3000, report
    assert share["records_per_s"] > 0
    assert report["classic"]["records"] == 3000 and report["classic"]["complete"]
    assert report["share_over_classic"] > 0
    assert main(["bench", "share-consume", "--bootstrap-server", bs, "--topic", "q",
                 "--num-records", "100"]) == 0
    assert "records by 1 share consumers" in capsys.readouterr().out
