"""`ads produce` and `ads consume` against an in-process broker, in-process through
`ads.cli.main.main`, plus one pipeline through the installed `ads` executable."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from ads.cli.main import main
from ads.testing import EmbeddedBroker
from conftest import create_topic

Cap = pytest.CaptureFixture[str]
ADS = str(Path(sys.executable).with_name("ads"))


def run(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def feed(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def read_all(bootstrap: str, topic: str, partition: int, count: int) -> list[tuple]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    got = []
    while len(got) < count:
        msg = c.poll(10)
        assert msg is not None, f"only {len(got)} of {count} records"
        assert msg.error() is None, msg.error()
        got.append((msg.key(), msg.value(), msg.headers()))
    c.close()
    return got


def test_cli_produce_keys_and_headers_then_consume(
        bootstrap: str, capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    bs = ("--bootstrap-server", bootstrap)
    create_topic(bootstrap, "lines", partitions=2)
    feed(monkeypatch, b"k1:v1\nk2:v2:more\n:empty-key\r\nk4:\xffraw\nk5:last")
    code, out, err = run(capsys, "produce", "lines", "--key-separator", ":", "--header",
                         "src=cli", "--header", "n=1", "--partition", "1", "--acks", "1",
                         "--compression", "zstd", *bs)
    assert (code, out, err) == (0, "", "")
    headers = [("src", b"cli"), ("n", b"1")]
    assert read_all(bootstrap, "lines", 1, 5) == [
        (b"k1", b"v1", headers), (b"k2", b"v2:more", headers), (b"", b"empty-key", headers),
        (b"k4", b"\xffraw", headers), (b"k5", b"last", headers)]

    code, out, err = run(capsys, "consume", "lines", "--from-beginning", "--max-messages", "5",
                         "--format", r"%t %p %o %k=%v [%h]\n", *bs)
    assert code == 0
    assert out.splitlines() == [
        "lines 1 0 k1=v1 [src=cli,n=1]", "lines 1 1 k2=v2:more [src=cli,n=1]",
        "lines 1 2 =empty-key [src=cli,n=1]", "lines 1 3 k4=\ufffdraw [src=cli,n=1]",
        "lines 1 4 k5=last [src=cli,n=1]"]
    assert err == "Processed a total of 5 messages\n"


def test_cli_consume_default_format_offsets_and_idle_timeout(
        bootstrap: str, capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    bs = ("--bootstrap-server", bootstrap)
    create_topic(bootstrap, "plain", partitions=1)
    feed(monkeypatch, b"a\n\nc\n")
    assert run(capsys, "produce", "plain", *bs)[0] == 0

    # Without --max-messages the command stops after --timeout-ms without a record.
    code, out, err = run(capsys, "consume", "plain", "--from-beginning", "--timeout-ms", "1500",
                         *bs)
    assert (code, out, err) == (0, "a\n\nc\n", "Processed a total of 3 messages\n")
    code, out, _ = run(capsys, "consume", "plain", "--partition", "0", "--offset", "2",
                       "--timeout-ms", "1500", "--format", r"%o:%k:%v\n", *bs)
    assert (code, out) == (0, "2:null:c\n")
    # The default start is the end of the log.
    code, out, _ = run(capsys, "consume", "plain", "--timeout-ms", "1000", *bs)
    assert (code, out) == (0, "")


def test_cli_consume_group_commits(
        bootstrap: str, capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    bs = ("--bootstrap-server", bootstrap)
    create_topic(bootstrap, "grouped", partitions=2)
    feed(monkeypatch, b"".join(b"%d\n" % i for i in range(6)))
    assert run(capsys, "produce", "grouped", *bs)[0] == 0
    code, out, _ = run(capsys, "consume", "grouped", "--group", "g1", "--from-beginning",
                       "--max-messages", "6", "--timeout-ms", "10000", *bs)
    assert code == 0 and sorted(out.split()) == [str(i) for i in range(6)]
    # The group's position was committed, so a second run finds nothing new.
    code, out, _ = run(capsys, "consume", "grouped", "--group", "g1", "--from-beginning",
                       "--timeout-ms", "2000", *bs)
    assert (code, out) == (0, "")


def test_cli_produce_missing_key_separator(
        bootstrap: str, capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    create_topic(bootstrap, "keyed")
    feed(monkeypatch, b"a=1\nb=2\nno separator\nc=3\n")
    code, out, err = run(capsys, "produce", "keyed", "--key-separator", "=",
                         "--bootstrap-server", bootstrap)
    assert (code, out, err) == (1, "", "ads produce: No key separator found on line 3\n")
    # Kafka's console producer also sends what it read before the bad line.
    assert [k for k, _, _ in read_all(bootstrap, "keyed", 0, 2)] == [b"a", b"b"]


def test_cli_produce_consume_errors(
        capsys: Cap, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Kafka's default auto.create.topics.enable would create 'ghost' on the first lookup.
    with EmbeddedBroker(data_dir=tmp_path / "data",
                        config={"auto.create.topics.enable": "false"}) as broker:
        _check_errors(broker.bootstrap_servers, capsys, monkeypatch)


def _check_errors(bootstrap: str, capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    bs = ("--bootstrap-server", bootstrap)
    create_topic(bootstrap, "one", partitions=1)
    feed(monkeypatch, b"x\n")
    assert run(capsys, "produce", "ghost", *bs) == (
        1, "", "ads produce: Topic 'ghost' does not exist.\n")
    code, out, err = run(capsys, "produce", "one", "--partition", "5", *bs)
    assert (code, out) == (1, "") and err.startswith("ads produce: Partition 5 of topic 'one'")
    assert run(capsys, "consume", "ghost", "--timeout-ms", "100", *bs) == (
        1, "", "ads consume: Topic 'ghost' does not exist.\n")
    for argv in (["--format", "%q"], ["--offset", "3"], ["--offset", "soon", "--partition", "0"],
                 ["--from-beginning", "--offset", "earliest"], ["--group", "g", "--partition", "0"],
                 ["--max-messages", "0"]):
        code, out, err = run(capsys, "consume", "one", *argv, *bs)
        assert (code, out) == (2, ""), argv
        assert err.startswith("ads consume: ") and err.count("\n") == 1, argv
    assert run(capsys, "produce", "one", "--header", "novalue", *bs)[0] == 2


@pytest.mark.slow
def test_cli_produce_consume_through_executable(bootstrap: str) -> None:
    bs = ["--bootstrap-server", bootstrap]
    subprocess.run([ADS, "topics", "create", "piped", "--partitions", "1", *bs], check=True,
                   capture_output=True, timeout=60)
    produced = subprocess.run([ADS, "produce", "piped", "--key-separator", r"\t", *bs],
                              input=b"k\tv1\nk\tv2\n", capture_output=True, timeout=60)
    assert (produced.returncode, produced.stderr) == (0, b"")
    consumed = subprocess.run([ADS, "consume", "piped", "--from-beginning", "--max-messages",
                               "2", "--format", r"%k %v\n", *bs], capture_output=True,
                              timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == b"k v1\nk v2\n"
    failed = subprocess.run([ADS, "topics", "create", "piped", *bs], capture_output=True,
                            timeout=60)
    assert failed.returncode == 1
    assert failed.stderr == b"ads topics create: Topic 'piped' already exists.\n"


def test_cli_produce_delivery_error(
        bootstrap: str, capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    create_topic(bootstrap, "small", **{"max.message.bytes": "200"})
    feed(monkeypatch, b"ok\n" + b"x" * 1000 + b"\n")
    code, out, err = run(capsys, "produce", "small", "--bootstrap-server", bootstrap)
    assert (code, out) == (1, "")
    # Both lines may share one batch, which the broker refuses as a whole.
    assert re.match(r"ads produce: [12] of 2 records not delivered: ", err)
    assert "MSG_SIZE_TOO_LARGE" in err and err.count("\n") == 1


def test_cli_produce_refused_by_client(
        bootstrap: str, capsys: Cap, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    create_topic(bootstrap, "local")
    props = tmp_path / "client.properties"
    props.write_text("message.max.bytes=1000\n")
    feed(monkeypatch, b"ok\n" + b"x" * 2000 + b"\nnever\n")
    code, out, err = run(capsys, "produce", "local", "--bootstrap-server", bootstrap,
                         "--command-config", str(props))
    assert (code, out) == (1, "")
    assert err.startswith("ads produce: line 2: ") and err.count("\n") == 1
    assert read_all(bootstrap, "local", 0, 1) == [(None, b"ok", None)]
