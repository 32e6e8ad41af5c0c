"""Entity configs (users' and client ids' configs): paths as Kafka names them, kept by the
embedded store across restarts and shared by every broker through ZooKeeper."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from ads.metadata import zk_layout as zl
from ads.metadata.embedded import EmbeddedMetadataStore
from ads.metadata.entity_config import entity_path, parse_entity_path, sanitize
from ads.metadata.model import BrokerEndpoint
from ads.metadata.store import TopicExistsError
from ads.metadata.zookeeper import ZkMetadataStore
from ads.testing.zookeeper import ZooKeeperServer


def test_paths_are_kafkas_with_names_sanitized() -> None:
    assert entity_path(user="alice") == "users/alice"
    assert entity_path(client="<default>") == "clients/<default>"
    assert entity_path(user="<default>", client="app 1") == "users/<default>/clients/app%201"
    # Kafka's Sanitizer: Java's URLEncoder, with "*" and " " percent-encoded.
    assert sanitize("CN=a/b*c~d.e-f_g") == "CN%3Da%2Fb%2Ac%7Ed.e-f_g"
    for user, client in [("a/b", None), (None, "x y"), ("<default>", "c*")]:
        assert parse_entity_path(entity_path(user, client)) == (user, client)
    with pytest.raises(ValueError, match="not a user or client"):
        parse_entity_path("topics/t")


def test_embedded_store_keeps_entity_configs_across_restarts(tmp_path: Path) -> None:
    async def run() -> None:
        store = EmbeddedMetadataStore(tmp_path, 1)
        store.load()
        seen: list[str] = []
        store.add_entity_listener(seen.append)
        await store.alter_entity_configs("users/alice", {"producer_byte_rate": "1024",
                                                         "SCRAM-SHA-256": "salt=x"})
        await store.alter_entity_configs("users/alice", {"producer_byte_rate": None})
        await store.alter_entity_configs("clients/c", {"request_percentage": "50"})
        await store.alter_entity_configs("clients/c", {"request_percentage": None})
        assert seen == ["users/alice", "users/alice", "clients/c", "clients/c"]
        again = EmbeddedMetadataStore(tmp_path, 1)
        again.load()
        assert again.entity_configs == {"users/alice": {"SCRAM-SHA-256": "salt=x"}}

    asyncio.run(run())


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer) -> str:
    return zookeeper_server.connect


@asynccontextmanager
async def _brokers(zk_connect: str) -> AsyncIterator[list[ZkMetadataStore]]:
    """Brokers 1 and 2's stores, registered; closed after (with any a test appends)."""
    stores: list[ZkMetadataStore] = []
    try:
        for node in (1, 2):
            stores.append(await _registered(zk_connect, node))
        yield stores
    finally:
        for store in stores:
            store.close()


async def _registered(zk_connect: str, node: int) -> ZkMetadataStore:
    """A broker's store, loaded and registered (broker `node` on port 9000 + node)."""
    store = ZkMetadataStore(zk_connect, node, 10_000)
    await asyncio.to_thread(store.load)
    store.register(BrokerEndpoint(node, "127.0.0.1", 9000 + node))
    return store


def test_zookeeper_entity_configs_reach_every_broker(zk_connect: str) -> None:
    async def run() -> None:
        async with _brokers(zk_connect) as stores:
            one, two = stores
            changed: list[str] = []
            two.add_entity_listener(changed.append)
            # Written on different brokers, each keeps the other's keys.
            await one.alter_entity_configs("users/alice", {"producer_byte_rate": "100"})
            await two.alter_entity_configs("users/alice", {"SCRAM-SHA-512": "salt=y"})
            await one.alter_entity_configs("users/alice/clients/app", {"consumer_byte_rate": "7"})
            await one.alter_entity_configs("clients/<default>", {"request_percentage": "20"})
            expected = {
                "users/alice": {"producer_byte_rate": "100", "SCRAM-SHA-512": "salt=y"},
                "users/alice/clients/app": {"consumer_byte_rate": "7"},
                "clients/<default>": {"request_percentage": "20"},
            }
            for store in stores:
                assert await store.wait(lambda s=store: s.entity_configs == expected, 10.0)
            assert "users/alice/clients/app" in changed
            await two.alter_entity_configs("clients/<default>", {"request_percentage": None})
            del expected["clients/<default>"]
            assert await one.wait(lambda: one.entity_configs == expected, 10.0)
            # Kafka's layout: an operator reading ZooKeeper finds the same znodes.
            client = KazooClient(hosts=zk_connect)
            client.start(timeout=10)
            try:
                data, _ = client.get("/config/users/alice/clients/app")
                assert zl.decode_config(data) == {"consumer_byte_rate": "7"}
            finally:
                client.stop()
                client.close()
            # A broker started later reads what exists.
            late = await _registered(zk_connect, 3)
            stores.append(late)
            assert await late.wait(lambda: late.entity_configs == expected, 10.0)

    asyncio.run(run())


def test_zookeeper_entity_configs_read_through_see_every_write_at_once(
        zk_connect: str) -> None:
    """What the describe requests answer (DescribeClientQuotas, DescribeUserScramCredentials)
    reads ZooKeeper itself, as Kafka's ZooKeeper mode does: a change made through one broker
    is there on another without waiting for its watch, and so is a znode written by a tool
    that sends no change notification."""
    async def run() -> None:
        async with _brokers(zk_connect) as stores:
            one, two = stores
            for n in range(20):
                await one.alter_entity_configs(f"users/u{n}", {"producer_byte_rate": str(n)})
                configs = await two.read_entity_configs()
                assert configs.get(f"users/u{n}") == {"producer_byte_rate": str(n)}
            client = KazooClient(hosts=zk_connect)
            client.start(timeout=10)
            try:
                client.create("/config/clients/quiet",
                              zl.encode_config({"request_percentage": "5"}), makepath=True)
            finally:
                client.stop()
                client.close()
            assert (await two.read_entity_configs())["clients/quiet"] == {
                "request_percentage": "5"}
            await one.alter_entity_configs("users/u0", {"producer_byte_rate": None})
            assert "users/u0" not in await two.read_entity_configs()

    asyncio.run(run())


def test_zookeeper_topic_configs_read_through_see_every_write_at_once(
        zk_connect: str) -> None:
    """DescribeConfigs of a topic reads ZooKeeper itself, as Kafka's ZooKeeper mode does:
    the Java Admin client describes through whichever broker it likes, and a broker's view
    follows an alter made through another one a moment later (seen as the old
    `max.message.bytes` right after incrementalAlterConfigs SET). The embedded store reads
    its own topics."""
    async def run() -> None:
        async with _brokers(zk_connect) as stores:
            one, two = stores
            await one.create_topic("t", {"retention.ms": "1000"}, {0: [1]})
            assert await two.wait(lambda: "t" in two.topics, 10.0)
            for n in range(20):
                configs = {"retention.ms": "1000", "max.message.bytes": str(2_000_000 + n)}
                await one.set_topic_configs("t", configs)
                assert await two.read_topic_configs("t") == configs
            # Written by a tool straight into ZooKeeper: there at once.
            client = KazooClient(hosts=zk_connect)
            client.start(timeout=10)
            try:
                client.set(zl.config_path("t"), zl.encode_config({"cleanup.policy": "compact"}))
            finally:
                client.stop()
                client.close()
            assert await two.read_topic_configs("t") == {"cleanup.policy": "compact"}
            assert await two.read_topic_configs("missing") is None

    asyncio.run(run())


def test_embedded_store_reads_its_topic_configs(tmp_path: Path) -> None:
    async def run() -> None:
        store = EmbeddedMetadataStore(tmp_path, 1)
        store.load()
        await store.create_topic("t", {"retention.ms": "5"}, {0: [1]})
        assert await store.read_topic_configs("t") == {"retention.ms": "5"}
        assert await store.read_topic_configs("missing") is None

    asyncio.run(run())


def test_zookeeper_topic_created_twice_is_topic_exists(zk_connect: str) -> None:
    # Two brokers creating the same internal topic at once: the second one's write finds
    # the config and the topic there, and must say the topic exists, not fail otherwise.
    async def run() -> None:
        async with _brokers(zk_connect) as stores:
            one, two = stores
            await one.create_topic("t", {"cleanup.policy": "compact"}, {0: [1]})
            with pytest.raises(TopicExistsError):
                await two.create_topic("t", {"cleanup.policy": "compact"}, {0: [2]})

    asyncio.run(run())


def test_zookeeper_new_topic_is_never_seen_without_its_configs(zk_connect: str) -> None:
    """Every broker first sees a new topic with its configs: the state a listener is told
    of is never one with the topic and without them (DescribeConfigs would then answer
    the defaults, e.g. a compacted topic's `cleanup.policy=delete`)."""
    async def run() -> None:
        async with _brokers(zk_connect) as stores:
            one, two = stores
            first_seen: dict[str, dict[str, str]] = {}

            def seen(name: str | None) -> None:
                topic = two.topics.get(name) if name is not None else None
                if topic is not None and name not in first_seen:
                    first_seen[name] = dict(topic.configs)

            two.add_listener(seen)
            names = [f"compacted-{i}" for i in range(10)]
            for name in names:
                await one.create_topic(name, {"cleanup.policy": "compact"}, {0: [1, 2]})
            assert await two.wait(lambda: all(n in first_seen for n in names), 20)
            assert first_seen == dict.fromkeys(names, {"cleanup.policy": "compact"})

    asyncio.run(run())
