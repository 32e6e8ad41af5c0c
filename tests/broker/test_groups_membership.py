"""Static membership (KIP-345) and the KIP-848 consumer protocol with librdkafka."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from ads.coordinator.group.classic import ClassicGroup
from ads.testing import EmbeddedBroker
from conftest import create_topic

CONFIG = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
          "group.consumer.heartbeat.interval.ms": "500"}


def poll_until(consumers: list[Consumer], done, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0.1)
        if done():
            return
    raise AssertionError("condition not reached")


def partitions(c: Consumer) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


def test_groups_static_member_gets_its_partitions_back_without_rebalance(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "data", config=CONFIG) as embedded:
        bs = embedded.bootstrap_servers
        create_topic(bs, "static", partitions=4)
        events: list[str] = []

        def make(instance: str, record: bool = False) -> Consumer:
            c = Consumer({"bootstrap.servers": bs, "group.id": "st",
                          "group.instance.id": instance, "session.timeout.ms": 10000,
                          "heartbeat.interval.ms": 500})
            if record:
                c.subscribe(["static"], on_assign=lambda _c, p: events.append("assign"),
                            on_revoke=lambda _c, p: events.append("revoke"))
            else:
                c.subscribe(["static"])
            return c

        keeper, leaver = make("keeper", record=True), make("leaver")
        poll_until([keeper, leaver],
                   lambda: len(partitions(keeper)) == 2 and len(partitions(leaver)) == 2)
        coordinator = embedded.broker.group_coordinator  # type: ignore[union-attr]
        group = embedded.call(lambda: coordinator.groups["st"])  # read on the broker's loop
        assert isinstance(group, ClassicGroup)
        generation, before = group.generation_id, partitions(leaver)
        events.clear()
        leaver.close()  # a static member does not leave the group on close
        comeback = make("leaver")
        poll_until([keeper, comeback], lambda: partitions(comeback) == before)
        for _ in range(10):
            keeper.poll(0.1)
        assert group.generation_id == generation and group.state.value == "Stable"
        assert events == []  # the other member saw no rebalance
        keeper.close()
        comeback.close()


def test_groups_consumer_protocol_kip848_with_librdkafka(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "data", config=CONFIG) as embedded:
        bs = embedded.bootstrap_servers
        create_topic(bs, "next", partitions=6)
        p = Producer({"bootstrap.servers": bs})
        for i in range(60):
            p.produce("next", b"%d" % i, partition=i % 6)
        p.flush(10)

        def make() -> Consumer:
            c = Consumer({"bootstrap.servers": bs, "group.id": "kip848",
                          "group.protocol": "consumer", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False})
            c.subscribe(["next"])
            return c

        a, b = make(), make()
        # Nothing is committed yet, so a partition that moves from a to b when b joins is
        # read again from the earliest offset: count distinct records, not deliveries.
        seen: set[tuple[int, int]] = set()

        def drain() -> bool:
            for c in (a, b):
                msg = c.poll(0.1)
                if msg is not None and msg.error() is None:
                    seen.add((msg.partition(), msg.offset()))
            return (len(seen) == 60 and len(partitions(a)) == 3 and len(partitions(b)) == 3
                    and all(tp.offset == 10 for c in (a, b) for tp in c.position(c.assignment())))

        poll_until([], drain)
        assert sorted(set(partitions(a)) | set(partitions(b))) == list(range(6))
        assert seen == {(p, o) for p in range(6) for o in range(10)}
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
        admin = AdminClient({"bootstrap.servers": bs})
        d = admin.describe_consumer_groups(["kip848"])["kip848"].result(timeout=10)
        assert len(d.members) == 2
        b.close()  # leaves with epoch -1: a takes everything
        poll_until([a], lambda: partitions(a) == list(range(6)))
        committed = a.committed(a.assignment(), timeout=10)
        assert sorted(tp.offset for tp in committed) == [10] * 6
        a.close()


def test_groups_kip848_regex_follows_topics_made_and_deleted(tmp_path: Path) -> None:
    """A regex subscription is resolved again once the topics change, and only then: the
    broker keeps each resolution until its metadata moves (`BrokerTopicMetadata`)."""
    with EmbeddedBroker(data_dir=tmp_path / "data", config=CONFIG) as embedded:
        bs = embedded.bootstrap_servers
        create_topic(bs, "rx-a", partitions=2)
        create_topic(bs, "other", partitions=1)
        c = Consumer({"bootstrap.servers": bs, "group.id": "rx", "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "topic.metadata.refresh.interval.ms": 500})
        try:
            c.subscribe(["^rx-.*"])

            def topics() -> set[str]:
                return {tp.topic for tp in c.assignment()}

            poll_until([c], lambda: topics() == {"rx-a"})
            assert embedded.broker is not None
            resolve = embedded.broker.group_coordinator.topics.topics_matching
            assert resolve("rx-.*") is resolve("rx-.*")  # kept while nothing changes
            create_topic(bs, "rx-b", partitions=1)
            poll_until([c], lambda: topics() == {"rx-a", "rx-b"})
            assert resolve("rx-.*") == ("rx-a", "rx-b")
            admin = AdminClient({"bootstrap.servers": bs})
            admin.delete_topics(["rx-a"])["rx-a"].result(15)
            poll_until([c], lambda: topics() == {"rx-b"})
            assert resolve("rx-.*") == ("rx-b",)
        finally:
            c.close()
