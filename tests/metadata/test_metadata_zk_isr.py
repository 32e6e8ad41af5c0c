"""A leader's ISR change written to ZooKeeper: only replicas the partition is assigned to now
may be in it, checked against the assignment znode in the same transaction (a replica a
completed reassignment removed may still fetch under the current leader epoch)."""

from __future__ import annotations

import asyncio
import uuid

from kazoo.client import KazooClient

from ads.metadata import zk_layout as zl
from ads.metadata.model import BrokerEndpoint
from ads.metadata.zookeeper import ZkMetadataStore
from ads.testing.zookeeper import ZooKeeperServer

TOPIC_ID = uuid.uuid4()


def _write_topic(zk: KazooClient, replicas: list[int], create: bool) -> None:
    data = zl.encode_assignment(zl.TopicAssignment(TOPIC_ID, {0: replicas}))
    if create:
        zk.create(zl.topic_path("t"), data, makepath=True)
        state = zl.LeaderAndIsr(1, 4, [1], 1)
        zk.create(zl.state_path("t", 0), zl.encode_state(state), makepath=True)
    else:
        zk.set(zl.topic_path("t"), data)


def _isr(zk: KazooClient) -> list[int]:
    return zl.decode_state(zk.get(zl.state_path("t", 0))[0]).isr


def test_zookeeper_isr_change_refused_for_a_replica_outside_the_assignment(
        zookeeper_server: ZooKeeperServer, zk: KazooClient) -> None:
    async def run() -> None:
        store = ZkMetadataStore(zookeeper_server.connect, 1, 10_000)
        await asyncio.to_thread(store.load)
        store.register(BrokerEndpoint(1, "127.0.0.1", 9001))
        try:
            _write_topic(zk, [1, 2], create=True)

            def led() -> bool:
                topic = store.topics.get("t")
                return topic is not None and topic.partitions[0].leader_epoch == 4
            assert await store.wait(led, 10.0)

            # Broker 3 is no replica of the partition: the change is not written.
            assert not await store.update_isr("t", 0, 4, [1, 3])
            assert _isr(zk) == [1]
            assert await store.update_isr("t", 0, 4, [1, 2])
            assert _isr(zk) == [1, 2]

            # A reassignment completed behind the leader's view (the epoch unchanged):
            # broker 2 left the replicas, so an ISR naming it is refused although the
            # state znode's version is the one the leader knows.
            _write_topic(zk, [1], create=False)
            assert not await store.update_isr("t", 0, 4, [1, 2])
            assert _isr(zk) == [1, 2]
            assert await store.update_isr("t", 0, 4, [1])
            assert _isr(zk) == [1]
        finally:
            store.close()

    asyncio.run(run())
