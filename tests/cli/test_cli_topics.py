"""`ads topics` against an in-process broker, driven through `ads.cli.main.main`."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from ads.cli.main import main
from conftest import create_topic

Cap = pytest.CaptureFixture[str]


def run(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_topics_create_list_delete(bootstrap: str, capsys: Cap) -> None:
    bs = ("--bootstrap-server", bootstrap)
    assert run(capsys, "topics", "create", "beta", "--partitions", "2", *bs) == (
        0, "Created topic beta.\n", "")
    assert run(capsys, "topics", "create", "alpha", *bs)[0] == 0
    assert run(capsys, "topics", "list", *bs) == (0, "alpha\nbeta\n", "")

    assert run(capsys, "topics", "delete", "alpha", *bs) == (0, "Deleted topic alpha.\n", "")
    assert run(capsys, "topics", "list", *bs) == (0, "beta\n", "")


def test_cli_topics_create_existing_fails_with_one_line(bootstrap: str, capsys: Cap) -> None:
    bs = ("--bootstrap-server", bootstrap)
    assert run(capsys, "topics", "create", "dup", *bs)[0] == 0
    code, out, err = run(capsys, "topics", "create", "dup", *bs)
    assert (code, out) == (1, "")
    assert err == "ads topics create: Topic 'dup' already exists.\n"
    assert run(capsys, "topics", "create", "dup", "--if-not-exists", *bs) == (0, "", "")


def test_cli_topics_create_refused_by_broker(bootstrap: str, capsys: Cap) -> None:
    bs = ("--bootstrap-server", bootstrap)
    for argv in (["bad/name"], ["rf", "--replication-factor", "3"],
                 ["cfg", "--config", "retention.ms=soon"]):
        code, out, err = run(capsys, "topics", "create", *argv, *bs)
        assert (code, out) == (1, ""), argv
        assert err.startswith("ads topics create: ") and err.count("\n") == 1, err


def test_cli_topics_delete_missing(bootstrap: str, capsys: Cap) -> None:
    bs = ("--bootstrap-server", bootstrap)
    code, out, err = run(capsys, "topics", "delete", "ghost", *bs)
    assert (code, out, err) == (1, "", "ads topics delete: Topic 'ghost' does not exist.\n")
    assert run(capsys, "topics", "delete", "ghost", "--if-exists", *bs) == (0, "", "")


def test_cli_topics_describe(bootstrap: str, capsys: Cap) -> None:
    bs = ("--bootstrap-server", bootstrap)
    assert run(capsys, "topics", "create", "desc", "--partitions", "2", "--config",
               "retention.ms=3600000", "--config", "cleanup.policy=compact", *bs)[0] == 0
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        p.produce("desc", b"v%d" % i, b"k", partition=1)
    assert p.flush(10) == 0

    code, out, err = run(capsys, "topics", "describe", "desc", *bs)
    assert (code, err) == (0, "")
    head, *parts = out.splitlines()
    fields = dict(f.split(": ", 1) for f in head.split("\t"))
    assert fields["Topic"] == "desc"
    assert fields["PartitionCount"] == "2"
    assert fields["ReplicationFactor"] == "1"
    assert fields["Configs"] == "cleanup.policy=compact,retention.ms=3600000"
    assert len(fields["TopicId"]) >= 22 and fields["TopicId"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert len(parts) == 2
    rows = [dict(f.split(": ", 1) for f in line.strip().split("\t")) for line in parts]
    assert [r["Partition"] for r in rows] == ["0", "1"]
    assert [(r["LogStartOffset"], r["LogEndOffset"]) for r in rows] == [("0", "0"), ("0", "3")]
    for r in rows:
        assert r["Leader"] == r["Replicas"] == r["Isr"]
        assert r["Leader"].isdigit()

    # With no TOPIC every non-internal topic is described.
    create_topic(bootstrap, "other")
    code, out, _ = run(capsys, "topics", "describe", *bs)
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines() if not line.startswith("\t")] == [
        "Topic: desc", "Topic: other"]


def test_cli_topics_describe_missing(bootstrap: str, capsys: Cap) -> None:
    code, out, err = run(capsys, "topics", "describe", "ghost", "--bootstrap-server", bootstrap)
    assert (code, out, err) == (1, "", "ads topics describe: Topic 'ghost' does not exist.\n")


def test_cli_topics_alter_config(bootstrap: str, capsys: Cap) -> None:
    bs = ("--bootstrap-server", bootstrap)
    create_topic(bootstrap, "cfg", **{"cleanup.policy": "compact"})
    code, out, err = run(capsys, "topics", "alter-config", "cfg", "--set", "retention.ms=1000",
                         "--set", "segment.bytes=1048576", "--delete", "cleanup.policy", *bs)
    assert (code, out, err) == (0, "Completed updating config for topic cfg.\n", "")
    out = run(capsys, "topics", "describe", "cfg", *bs)[1]
    assert "\tConfigs: retention.ms=1000,segment.bytes=1048576\n" in out

    code, out, err = run(capsys, "topics", "alter-config", "cfg", "--set", "retention.ms=soon",
                         *bs)
    assert (code, out) == (1, "")
    assert err.startswith("ads topics alter-config: ") and err.count("\n") == 1


def test_cli_topics_alter_config_usage_errors(capsys: Cap) -> None:
    # Usage is checked before any connection, so no broker is needed.
    bs = ("--bootstrap-server", "127.0.0.1:1")
    code, out, err = run(capsys, "topics", "alter-config", "t", "--set", "retention.ms", *bs)
    assert (code, out) == (2, "")
    assert err == "ads topics alter-config: invalid --set 'retention.ms': expected KEY=VALUE\n"
    assert run(capsys, "topics", "alter-config", "t", *bs)[0] == 2
    assert run(capsys, "topics", "alter-config", "t", "--set", "a=1", "--delete", "a", *bs)[0] == 2
    assert run(capsys, "topics", "create", "t", "--config", "oops", *bs)[0] == 2
    assert run(capsys, "topics", "create", "t", "--partitions", "0", *bs)[0] == 2


def test_cli_topics_add_partitions(bootstrap: str, capsys: Cap) -> None:
    bs = ("--bootstrap-server", bootstrap)
    create_topic(bootstrap, "grow", partitions=1)
    code, out, err = run(capsys, "topics", "add-partitions", "grow", "--partitions", "3", *bs)
    assert (code, out, err) == (0, "Topic grow now has 3 partitions.\n", "")
    assert "PartitionCount: 3" in run(capsys, "topics", "describe", "grow", *bs)[1]

    code, out, err = run(capsys, "topics", "add-partitions", "grow", "--partitions", "2", *bs)
    assert (code, out) == (1, "")
    assert err.startswith("ads topics add-partitions: ") and err.count("\n") == 1


def test_cli_topics_command_config(bootstrap: str, capsys: Cap, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("client.id=ads-cli-test\n")
    assert run(capsys, "topics", "list", "--bootstrap-server", bootstrap,
               "--command-config", str(props)) == (0, "", "")
    props.write_text("no.such.property=1\n")
    code, out, err = run(capsys, "topics", "list", "--bootstrap-server", bootstrap,
                         "--command-config", str(props))
    assert (code, out) == (2, "")
    assert "no.such.property" in err and err.count("\n") == 1


def test_cli_topics_unreachable_broker(capsys: Cap) -> None:
    code, out, err = run(capsys, "topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert (code, out) == (1, "")
    assert err.startswith("ads topics list: cannot connect to 127.0.0.1:1 ")
    assert err.count("\n") == 1
