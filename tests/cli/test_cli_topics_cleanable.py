"""`ads topics describe --data-dir DIR` adds each partition's cleanable ratio."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from ads.cli.main import main
from ads.testing import EmbeddedBroker
from conftest import create_topic


def test_cli_topics_describe_shows_cleanable_ratio(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data_dir=data, config={"log.cleaner.enable": "false"}) as broker:
        bs = broker.bootstrap_servers
        create_topic(bs, "state", **{"cleanup.policy": "compact", "segment.bytes": "1000"})
        create_topic(bs, "plain")
        producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        for i in range(30):
            producer.produce("state", key=b"k%d" % (i % 3), value=b"v" * 100, partition=0)
            producer.flush(10)
        assert main(["topics", "describe", "state", "--bootstrap-server", bs,
                     "--data-dir", str(data)]) == 0
        out = capsys.readouterr().out
        # Nothing cleaned yet (the cleaner is off): every sealed segment is dirty.
        assert "\tPartition: 0\t" in out and "CleanableRatio: 1.000" in out
        assert main(["topics", "describe", "state", "--bootstrap-server", bs]) == 0
        assert "CleanableRatio" not in capsys.readouterr().out
