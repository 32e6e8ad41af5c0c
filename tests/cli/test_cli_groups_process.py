"""`ads groups` run as a subprocess against an in-process broker: what Kafka's
kafka-consumer-groups.sh says about groups that do not exist and plans not executed."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from cli_process import ads
from conftest import create_topic


def _commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=offsets, asynchronous=False)
    finally:
        c.close()


def _committed(bootstrap: str, group: str, partitions: list[TopicPartition]) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed(partitions, timeout=10)]
    finally:
        c.close()


def test_cli_groups_describe_missing_group_fails(bootstrap: str) -> None:
    bs = ("--bootstrap-server", bootstrap)
    for extra in ([], ["--members"]):
        done = ads("groups", "describe", "NO-SUCH-GROUP", *extra, *bs)
        assert (done.returncode, done.stdout, done.stderr) == (
            1, "", "Error: Consumer group 'NO-SUCH-GROUP' does not exist.\n"), extra

    create_topic(bootstrap, "t")
    _commit(bootstrap, "real", [TopicPartition("t", 0, 0)])
    done = ads("groups", "describe", "NO-SUCH-GROUP", "real", *bs)
    assert done.returncode == 1
    assert done.stderr == "Error: Consumer group 'NO-SUCH-GROUP' does not exist.\n"
    assert done.stdout.startswith("Consumer group 'real' has no active members.\nGROUP ")
    assert ads("groups", "describe", "real", *bs).returncode == 0


def test_cli_groups_reset_offsets_without_mode_warns_and_changes_nothing(
        bootstrap: str) -> None:
    create_topic(bootstrap, "resettable")
    p = Producer({"bootstrap.servers": bootstrap})
    for _ in range(5):
        p.produce("resettable", b"x")
    assert p.flush(10) == 0
    tp = [TopicPartition("resettable", 0)]
    _commit(bootstrap, "g", [TopicPartition("resettable", 0, 4)])
    reset = ("groups", "reset-offsets", "--group", "g", "--topic", "resettable",
             "--to-earliest", "--bootstrap-server", bootstrap)
    plan = "GROUP TOPIC      PARTITION NEW-OFFSET\ng     resettable 0         0\n"

    done = ads(*reset)
    assert (done.returncode, done.stdout) == (0, plan)
    assert done.stderr.startswith("WARN: nothing was changed") and "--execute" in done.stderr
    assert _committed(bootstrap, "g", tp) == [4]

    done = ads(*reset, "--dry-run")
    assert (done.returncode, done.stdout, done.stderr) == (0, plan, "")
    assert _committed(bootstrap, "g", tp) == [4]

    done = ads(*reset, "--execute")
    assert (done.returncode, done.stdout, done.stderr) == (0, plan, "")
    assert _committed(bootstrap, "g", tp) == [0]
