"""`ads groups` against an in-process broker: list, describe with lag, reset-offsets,
delete-offsets and delete."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ads.cli.main import main
from ads.testing import EmbeddedBroker
from conftest import create_topic

Cap = pytest.CaptureFixture[str]


def run(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as b:
        yield b


def test_cli_groups_describe_lag_matches_produced_and_committed(broker, capsys: Cap) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "lagging", partitions=2)
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("lagging", b"x", partition=0)
    for i in range(4):
        p.produce("lagging", b"y", partition=1)
    p.flush(10)
    c = Consumer({"bootstrap.servers": bs, "group.id": "laggy", "enable.auto.commit": False,
                  "session.timeout.ms": 6000})
    c.commit(offsets=[TopicPartition("lagging", 0, 3), TopicPartition("lagging", 1, 4)],
             asynchronous=False)
    code, out, err = run(capsys, "groups", "describe", "laggy", "--bootstrap-server", bs)
    assert (code, err) == (0, "")
    rows = table(out)
    assert rows[0] == ["Consumer", "group", "'laggy'", "has", "no", "active", "members."]
    assert rows[1][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                           "LAG"]
    assert [r[:6] for r in rows[2:]] == [["laggy", "lagging", "0", "3", "10", "7"],
                                        ["laggy", "lagging", "1", "4", "4", "0"]]
    c.subscribe(["lagging"])
    deadline = time.time() + 20
    while time.time() < deadline and len(c.assignment()) < 2:
        c.poll(0.2)
    code, out, _ = run(capsys, "groups", "describe", "laggy", "--bootstrap-server", bs)
    rows = table(out)
    assert rows[0][0] == "GROUP" and all(r[6] != "-" for r in rows[1:])  # owners shown
    code, out, _ = run(capsys, "groups", "describe", "laggy", "--members",
                       "--bootstrap-server", bs)
    assert code == 0 and table(out)[1][-1] == "2"  # one member owns both partitions
    code, out, _ = run(capsys, "groups", "list", "--bootstrap-server", bs)
    assert (code, out) == (0, "laggy\n")
    code, out, _ = run(capsys, "groups", "list", "--state", "stable", "--bootstrap-server", bs)
    assert table(out)[1] == ["laggy", "Stable", "Classic"]
    code, out, err = run(capsys, "groups", "delete", "laggy", "--bootstrap-server", bs)
    assert code == 1 and out.startswith("Deletion of group 'laggy' failed: ")
    c.close()


def test_cli_groups_reset_and_delete_offsets(broker, capsys: Cap) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "resettable", partitions=2)
    p = Producer({"bootstrap.servers": bs})
    before = int(time.time() * 1000)
    for i in range(6):
        p.produce("resettable", b"%d" % i, partition=0, timestamp=before + i * 1000)
        p.flush(10)  # one batch per record: timestamp lookups work per batch
    c = Consumer({"bootstrap.servers": bs, "group.id": "rg", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("resettable", 0, 2)], asynchronous=False)
    bs_args = ("--bootstrap-server", bs)

    def committed() -> int:
        (tp,) = c.committed([TopicPartition("resettable", 0)], timeout=10)
        return int(tp.offset)

    code, out, _ = run(capsys, "groups", "reset-offsets", "--group", "rg", "--topic",
                       "resettable:0", "--to-latest", *bs_args)
    assert code == 0 and table(out)[1] == ["rg", "resettable", "0", "6"]
    assert committed() == 2  # a dry run changes nothing
    cases = [(["--to-latest"], 6), (["--to-earliest"], 0), (["--to-offset", "4"], 4),
             (["--shift-by", "-3"], 1), (["--shift-by", "100"], 6), (["--to-offset", "99"], 6)]
    for flags, expected in cases:
        code, out, err = run(capsys, "groups", "reset-offsets", "--group", "rg", "--topic",
                             "resettable:0", *flags, "--execute", *bs_args)
        assert (code, err) == (0, ""), flags
        assert committed() == expected, flags
    when = datetime.fromtimestamp((before + 3000) / 1000, tz=timezone.utc).isoformat()
    code, out, _ = run(capsys, "groups", "reset-offsets", "--group", "rg", "--all-topics",
                       "--to-datetime", when, "--execute", *bs_args)
    assert code == 0 and committed() == 3
    code, out, _ = run(capsys, "groups", "delete-offsets", "--group", "rg", "--topic",
                       "resettable", *bs_args)
    assert code == 0 and "Successful" in out
    assert committed() < 0
    code, out, err = run(capsys, "groups", "reset-offsets", "--group", "rg", "--topic",
                         "ghost", "--to-earliest", *bs_args)
    assert (code, err) == (1, "ads groups reset-offsets: Topic 'ghost' does not exist.\n")
    code, out, _ = run(capsys, "groups", "delete", "rg", *bs_args)
    assert (code, out) == (0, "Deletion of group 'rg' succeeded.\n")
    code, out, _ = run(capsys, "groups", "list", *bs_args)
    assert out == ""
    c.close()
