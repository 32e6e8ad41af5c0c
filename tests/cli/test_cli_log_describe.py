"""`ads log describe` run as a subprocess on a broker's data directory."""

from __future__ import annotations

from ads.testing import EmbeddedBroker
from cli_process import ads
from conftest import create_topic


def test_cli_log_describe_sorts_partitions_as_numbers(ads_broker: EmbeddedBroker) -> None:
    create_topic(ads_broker.bootstrap_servers, "many", partitions=12)
    create_topic(ads_broker.bootstrap_servers, "a-first", partitions=2)
    done = ads("log", "describe", "--data-dir", str(ads_broker.data_dir), "--topic", "many")
    assert (done.returncode, done.stderr) == (0, "")
    rows = [dict(f.split(": ", 1) for f in line.split("\t")) for line in done.stdout.splitlines()]
    assert [r["Partition"] for r in rows] == [str(p) for p in range(12)]

    done = ads("log", "describe", "--data-dir", str(ads_broker.data_dir))
    rows = [dict(f.split(": ", 1) for f in line.split("\t")) for line in done.stdout.splitlines()]
    listed = [(r["Topic"], int(r["Partition"])) for r in rows if not r["Topic"].startswith("__")]
    assert listed == [("a-first", 0), ("a-first", 1)] + [("many", p) for p in range(12)]
