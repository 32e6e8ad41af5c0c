"""`ads share-groups` against an in-process broker: list, describe (start offsets and lag,
from DescribeShareGroupOffsets; members, from ShareGroupDescribe) and delete."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from ads.cli.main import main
from ads.testing import EmbeddedBroker
from conftest import create_topic
from share_support import share_drain

Cap = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    config = {"group.share.enable": "true", "group.share.auto.offset.reset": "earliest",
              "group.share.heartbeat.interval.ms": "300"}
    with EmbeddedBroker(config=config) as b:
        yield b


def run(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_share_groups_list_describe_and_delete(broker: EmbeddedBroker, capsys: Cap
                                                   ) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "jobs", 1)
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("jobs", b"job-%d" % i, partition=0)
    assert p.flush(10) == 0
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": "workers", "client.id": "w1",
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe(["jobs"])
    try:
        seen = 0
        deadline = time.monotonic() + 20
        while seen < 10 and time.monotonic() < deadline:
            for msg in c.poll(0.3):
                # The first six are done; the other four go back for another try.
                done = msg.offset() < 6
                c.acknowledge(msg, AcknowledgeType.ACCEPT if done else AcknowledgeType.RELEASE)
                seen += 1
            c.commit_sync(10)
        assert seen >= 10
        code, out, err = run(capsys, "share-groups", "list", "--bootstrap-server", bs)
        assert (code, out.split()) == (0, ["workers"]), err
        code, out, err = run(capsys, "share-groups", "describe", "workers",
                             "--bootstrap-server", bs)
        assert code == 0, err
        assert [line.split() for line in out.strip().splitlines()] == [
            ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
            ["workers", "jobs", "0", "6", "4"]]
        code, out, err = run(capsys, "share-groups", "describe", "workers", "--members",
                             "--bootstrap-server", bs)
        assert code == 0, err
        [header, member] = [line.split() for line in out.strip().splitlines()]
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"]
        assert (member[0], member[3], member[4]) == ("workers", "w1", "jobs:0")
        code, _, err = run(capsys, "share-groups", "delete", "workers", "--bootstrap-server", bs)
        assert code == 1 and "NON_EMPTY_GROUP" in err  # a member is there
    finally:
        c.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        code, out, err = run(capsys, "share-groups", "delete", "workers",
                             "--bootstrap-server", bs)
        if code == 0:
            break
        time.sleep(0.3)
    assert (code, out.strip()) == (0, "Deleted share group 'workers'."), err
    code, out, err = run(capsys, "share-groups", "describe", "missing",
                         "--bootstrap-server", bs)
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err


def _drain(bs: str, group: str, topic: str, want: int, timeout_s: float = 20.0
           ) -> list[tuple[int, int]]:
    """(offset, delivery count) of what one share consumer gets (one partition)."""
    return [(o, n) for _, o, n in share_drain(bs, group, topic, want, timeout_s)]


def _described(capsys: Cap, bs: str, group: str) -> list[list[str]]:
    code, out, err = run(capsys, "share-groups", "describe", group, "--bootstrap-server", bs)
    assert code == 0, err
    return [line.split() for line in out.strip().splitlines()[1:]]


def test_cli_share_groups_reset_and_delete_offsets(broker: EmbeddedBroker, capsys: Cap
                                                   ) -> None:
    """AlterShareGroupOffsets and DeleteShareGroupOffsets through `ads share-groups`: the
    next member of the group gets the records from the new start, though the partition's
    leader had the former state in memory."""
    bs = broker.bootstrap_servers
    create_topic(bs, "redo", 1)
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("redo", b"r-%d" % i, partition=0)
    assert p.flush(10) == 0
    reset = ("share-groups", "reset-offsets", "--group", "redoers", "--topic", "redo",
             "--bootstrap-server", bs)
    holder = ShareConsumer({"bootstrap.servers": bs, "group.id": "redoers"})
    holder.subscribe(["redo"])
    try:
        deadline = time.monotonic() + 20
        while not holder.poll(0.3) and time.monotonic() < deadline:
            pass
        code, _, err = run(capsys, *reset, "--to-earliest", "--execute")
        assert code == 1 and "is not empty" in err  # a member is there
    finally:
        holder.commit_sync(10)  # its records accepted: the start moves past them
        holder.close()
    assert _drain(bs, "redoers", "redo", 10, timeout_s=3) == []  # all were accepted
    assert _described(capsys, bs, "redoers") == [["redoers", "redo", "0", "10", "0"]]

    code, out, err = run(capsys, *reset, "--to-earliest", "--dry-run")
    assert (code, out.split()[-4:]) == (0, ["redoers", "redo", "0", "0"]), err
    assert _described(capsys, bs, "redoers")[0][3] == "10"  # a plan changes nothing
    code, out, err = run(capsys, *reset, "--to-earliest", "--execute")
    assert (code, out.split()[-4:]) == (0, ["redoers", "redo", "0", "0"]), err
    assert _described(capsys, bs, "redoers") == [["redoers", "redo", "0", "0", "10"]]
    assert _drain(bs, "redoers", "redo", 10) == [(o, 1) for o in range(10)]

    code, out, err = run(capsys, *reset, "--shift-by", "-3", "--execute")
    assert (code, out.split()[-1]) == (0, "7"), err
    assert _drain(bs, "redoers", "redo", 3) == [(7, 1), (8, 1), (9, 1)]

    code, out, err = run(capsys, "share-groups", "delete-offsets", "--group", "redoers",
                         "--topic", "redo", "--topic", "absent", "--bootstrap-server", bs)
    assert code == 1, err  # the unknown topic
    assert [line.split() for line in out.strip().splitlines()] == [
        ["TOPIC", "STATUS"], ["absent", "Error:", "UNKNOWN_TOPIC_OR_PARTITION"],
        ["redo", "Successful"]]
    assert _described(capsys, bs, "redoers") == []  # no topic has state
    # Without state the group starts at group.share.auto.offset.reset (earliest here).
    assert _drain(bs, "redoers", "redo", 10) == [(o, 1) for o in range(10)]
    code, _, err = run(capsys, "share-groups", "delete-offsets", "--group", "nobody",
                       "--topic", "redo", "--bootstrap-server", bs)
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err
