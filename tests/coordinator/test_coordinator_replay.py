"""Coordinator replay: the state the coordinators hold after live requests equals the state
rebuilt by loading their internal topics.

Real clients drive an in-process broker: a consumer group with static members, plain
offset commits, transactions that commit and abort offsets (`sendOffsetsToTransaction`)
and one left open. Then each coordinator's partition is unloaded and loaded again from
`__consumer_offsets` and `__transaction_state` (as on a move of leadership), and what it
holds is compared with what it held: committed offsets, offsets pending in open
transactions, each group's state, generation, protocol, leader and members, and each
transactional id's every field. A live change not written to the log, or written
differently from how it is replayed, shows here. A second test takes transactional
producers through every transition of the transaction coordinator (commit, abort, epoch
bump, a fenced instance, a timeout) and compares every field of every id before and after
a reload, twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

CONFIG = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
          "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=CONFIG) as b:
        yield b


def _group_state(b: EmbeddedBroker) -> dict[str, Any]:
    assert b.broker is not None
    shard = b.broker.group_coordinator.runtime.shard(0)
    assert shard is not None
    return {
        "offsets": {g: {tp: (c.offset, c.leader_epoch, c.metadata, c.commit_timestamp)
                        for tp, c in shard.offsets.get(g).items()}
                    for g in shard.offsets.groups()},
        "pending": {pid: {k: c.offset for k, c in offsets.items()}
                    for pid, offsets in shard.pending_txn._by_producer.items()},  # noqa: SLF001
        "groups": {gid: (g.state.name, g.generation_id, g.protocol_type, g.protocol_name,
                         g.leader_id, sorted((m.member_id, m.group_instance_id, m.assignment)
                                             for m in g.members.values()))
                   for gid, g in shard.groups.items()},
    }


def _txn_state(b: EmbeddedBroker) -> dict[str, Any]:
    """Every field of every transactional id the coordinator holds, and whether a
    transition of it is on its way (a reload starts with none)."""
    assert b.broker is not None
    shard = b.broker.transaction_coordinator.runtime.shard(0)
    assert shard is not None
    return {tid: {"state": meta.state.name, "pending": meta.pending is not None,
                  "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                  "last_producer_epoch": meta.last_producer_epoch,
                  "partitions": sorted(meta.partitions), "timeout_ms": meta.timeout_ms,
                  "start_ms": meta.start_ms, "last_update_ms": meta.last_update_ms}
            for tid, meta in shard.txns.items()}


def _reload(b: EmbeddedBroker) -> None:
    """Unloads and loads both coordinators' partition 0, as a leadership move does."""
    assert b.broker is not None and b.broker._loop is not None  # noqa: SLF001
    runtimes = [b.broker.group_coordinator.runtime, b.broker.transaction_coordinator.runtime]

    async def reload() -> None:
        for runtime in runtimes:
            epoch = runtime.leader_epoch(0)
            runtime.become_follower(0, epoch + 1)
            runtime.become_leader(0, epoch + 1)
        for runtime in runtimes:
            await runtime.until_loaded(0)

    asyncio.run_coroutine_threadsafe(reload(), b.broker._loop).result(30)  # noqa: SLF001


def _static_member(bootstrap: str, instance: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "static",
                  "group.instance.id": instance, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 45000})
    c.subscribe(["in"])
    return c


def test_coordinator_replay_state_equals_live_state(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "in", 3)
    create_topic(bs, "out", 2)
    feed = Producer({"bootstrap.servers": bs})
    for i in range(30):
        feed.produce("in", value=b"%d" % i, partition=i % 3)
    feed.flush(10)

    # A classic group of two static members that commit; closing a static member does
    # not leave the group, so the members stay in its state.
    members = [_static_member(bs, f"member-{i}") for i in range(2)]
    for _ in range(150):
        for c in members:
            c.poll(0.1)
        if all(c.assignment() for c in members):
            break
    for n, c in enumerate(members):
        c.commit(offsets=[TopicPartition(tp.topic, tp.partition, n + 1)
                          for tp in c.assignment()], asynchronous=False)
        c.close()

    # Offsets committed by a consumer that never joins (no membership).
    plain = Consumer({"bootstrap.servers": bs, "group.id": "plain"})
    plain.commit(offsets=[TopicPartition("in", 0, 7), TopicPartition("in", 2, 3)],
                 asynchronous=False)
    plain.close()

    # Transactions: offsets committed, offsets aborted, and one transaction left open.
    group = Consumer({"bootstrap.servers": bs, "group.id": "txn-group"})
    meta = group.consumer_group_metadata()
    p = Producer({"bootstrap.servers": bs, "transactional.id": "replay-tx"})
    p.init_transactions(15)
    for offset, commit in ((5, True), (9, False)):
        p.begin_transaction()
        p.produce("out", value=b"v", partition=0)
        p.send_offsets_to_transaction([TopicPartition("in", 1, offset)], meta, 15)
        if commit:
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
    open_tx = Producer({"bootstrap.servers": bs, "transactional.id": "open-tx"})
    open_tx.init_transactions(15)
    open_tx.begin_transaction()
    open_tx.produce("out", value=b"open", partition=1)
    open_tx.send_offsets_to_transaction([TopicPartition("in", 0, 2)], meta, 15)
    open_tx.flush(10)
    group.close()

    _wait_states(broker, {"replay-tx": "COMPLETE_ABORT", "open-tx": "ONGOING"})
    live_groups = broker.call(_group_state, broker)
    live_txns = broker.call(_txn_state, broker)
    # The scenario reached every kind of state compared.
    assert live_groups["offsets"]["txn-group"][("in", 1)][0] == 5
    assert live_groups["offsets"]["plain"][("in", 0)][0] == 7
    assert any(live_groups["pending"].values())
    assert live_groups["groups"]["static"][0] == "STABLE"
    assert len(live_groups["groups"]["static"][5]) == 2
    assert {t: s["state"] for t, s in live_txns.items()} == {"replay-tx": "COMPLETE_ABORT",
                                                              "open-tx": "ONGOING"}

    _reload(broker)
    assert broker.call(_group_state, broker) == live_groups
    assert broker.call(_txn_state, broker) == live_txns


def _wait_states(b: EmbeddedBroker, states: dict[str, str]) -> None:
    """Waits until each id is in its state with nothing on its way (a commit is answered
    once PREPARE_COMMIT is written; COMPLETE_COMMIT follows its markers)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = b.call(_txn_state, b)
        if all(found.get(t, {}).get("state") == s and not found[t]["pending"]
               for t, s in states.items()):
            return
        time.sleep(0.05)
    raise AssertionError(f"{found} is not {states}")


def _txn_producer(bootstrap: str, txn_id: str, timeout_ms: int = 30000) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": timeout_ms})
    p.init_transactions(15)
    return p


def _one_transaction(p: Producer, commit: bool, *partitions: tuple[str, int]) -> None:
    p.begin_transaction()
    for topic, partition in partitions:
        p.produce(topic, value=b"v", partition=partition)
    p.flush(10)
    if commit:
        p.commit_transaction(15)
    else:
        p.abort_transaction(15)


def test_coordinator_replay_transactions_every_field(broker: EmbeddedBroker) -> None:
    """Real transactional producers through every transition the coordinator makes: begin
    and add partitions, commit, abort, an epoch bump, a fenced instance, a timeout; every
    field of every id is the same after the partition is loaded again, and a producer whose
    transaction timed out may still go on after the reload (KIP-360: it names the epoch it
    had, which the coordinator knows as the one before its last bump)."""
    bs = broker.bootstrap_servers
    create_topic(bs, "a", 2)
    create_topic(bs, "b", 1)

    committed = _txn_producer(bs, "commit-tx")
    _one_transaction(committed, True, ("a", 0), ("a", 1), ("b", 0))
    aborted = _txn_producer(bs, "abort-tx")
    _one_transaction(aborted, False, ("a", 1))
    _txn_producer(bs, "bump-tx")
    bumped = _txn_producer(bs, "bump-tx")  # epoch 1: EMPTY after a bump
    _one_transaction(bumped, True, ("b", 0))

    zombie = _txn_producer(bs, "fence-tx")
    zombie.begin_transaction()
    zombie.produce("a", value=b"zombie", partition=0)
    zombie.flush(10)
    successor = _txn_producer(bs, "fence-tx")  # fences the zombie, aborts what it left open
    with pytest.raises(KafkaException):
        _one_transaction(zombie, True, ("a", 1))

    timed_out = _txn_producer(bs, "timeout-tx", timeout_ms=1000)
    timed_out.begin_transaction()
    timed_out.produce("b", value=b"late", partition=0)
    timed_out.flush(10)
    _wait_states(broker, {"timeout-tx": "COMPLETE_ABORT"})  # aborted by the coordinator

    open_tx = _txn_producer(bs, "open-tx")
    open_tx.begin_transaction()
    open_tx.produce("a", value=b"open", partition=1)
    open_tx.produce("b", value=b"open", partition=0)
    open_tx.flush(10)

    states = {"commit-tx": "COMPLETE_COMMIT", "abort-tx": "COMPLETE_ABORT",
              "bump-tx": "COMPLETE_COMMIT", "fence-tx": "EMPTY",
              "timeout-tx": "COMPLETE_ABORT", "open-tx": "ONGOING"}
    _wait_states(broker, states)
    live = broker.call(_txn_state, broker)
    assert {t: s["state"] for t, s in live.items()} == states
    assert live["bump-tx"]["producer_epoch"] == 1
    assert live["fence-tx"]["producer_epoch"] == 2  # one bump to fence, one to hand out
    assert live["timeout-tx"]["producer_epoch"] == 1  # bumped by the timeout's abort
    assert live["open-tx"]["partitions"] == [("a", 1), ("b", 0)]

    _reload(broker)
    assert broker.call(_txn_state, broker) == live

    # After the reload, the producer whose transaction timed out asks for the next epoch
    # naming the one it had (KIP-360, as the Java client does after a timeout; librdkafka
    # treats the fencing as fatal): the epoch before the coordinator's bump.
    pid = live["timeout-tx"]["producer_id"]
    with RawConnection(bs) as conn:
        init = conn.request(m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
            transactional_id="timeout-tx", transaction_timeout_ms=30000, producer_id=pid,
            producer_epoch=0))
    assert (init.error_code, init.producer_id, init.producer_epoch) == (ErrorCode.NONE, pid, 2)
    _one_transaction(successor, True, ("b", 0))
    _wait_states(broker, {"timeout-tx": "EMPTY", "fence-tx": "COMPLETE_COMMIT"})
    after = broker.call(_txn_state, broker)
    _reload(broker)
    assert broker.call(_txn_state, broker) == after


def _consumer_groups(b: EmbeddedBroker) -> dict[str, Any]:
    """Every persisted field of every KIP-848 group the coordinator holds."""
    assert b.broker is not None
    shard = b.broker.group_coordinator.runtime.shard(0)
    assert shard is not None
    return {gid: {"epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                  "state": g.state_name, "target": g.target,
                  "regexes": {r: v.topics for r, v in g.resolved_regexes.items()},
                  "members": {mid: (mem.metadata(), mem.current())
                              for mid, mem in g.members.items()}}
            for gid, g in shard.groups.items() if g.group_type == "consumer"}


def _kip848_consumer(bootstrap: str, group: str, topics: list[str],
                     instance: str | None = None) -> Consumer:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group,
                              "group.protocol": "consumer", "auto.offset.reset": "earliest",
                              "enable.auto.commit": False}
    if instance is not None:
        config["group.instance.id"] = instance
    c = Consumer(config)
    c.subscribe(topics)
    return c


@pytest.fixture
def kip848_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={**CONFIG, "group.consumer.heartbeat.interval.ms": "500"}) as b:
        yield b


def test_coordinator_replay_consumer_groups_equal_live_state(kip848_broker: EmbeddedBroker
                                                             ) -> None:
    """KIP-848 groups of librdkafka consumers (`group.protocol=consumer`): two members that
    share a topic, a member that left, a static member gone for now (epoch -2) and a
    regex subscription; after the partition is loaded again, every member is there with
    its id, epochs, state and partitions, and the target assignment and epochs are those
    the live heartbeats wrote. Then the consumers go on heartbeating with the epochs they
    have: none of them is fenced or told it is unknown, and the group stays as it was."""
    broker = kip848_broker
    bs = broker.bootstrap_servers
    create_topic(bs, "in", 4)
    create_topic(bs, "re-1", 1)
    a = _kip848_consumer(bs, "kip848", ["in"])
    b = _kip848_consumer(bs, "kip848", ["in"])
    gone = _kip848_consumer(bs, "kip848", ["in"])
    static = _kip848_consumer(bs, "static848", ["in"], instance="s-1")
    regex = _kip848_consumer(bs, "regex848", ["^re-.*"])
    everyone = [a, b, gone, static, regex]

    def stable(groups: dict[str, int]) -> bool:
        for c in everyone:
            c.poll(0.1)
        found = broker.call(_consumer_groups, broker)
        return all(g in found and found[g]["state"] == "Stable"
                   and len(found[g]["members"]) == n for g, n in groups.items())

    _until(lambda: stable({"kip848": 3, "static848": 1, "regex848": 1}))
    gone.close()  # leaves: epoch -1
    static.close()  # a static member leaves for now: epoch -2
    everyone = [a, b, regex]
    _until(lambda: stable({"kip848": 2, "regex848": 1}))
    live = broker.call(_consumer_groups, broker)
    (left,) = live["static848"]["members"].values()
    assert left[1].member_epoch == -2
    assert list(live["regex848"]["regexes"].values()) == [("re-1",)]  # "(^re-.*)"
    assert sorted(p for m in live["kip848"]["members"].values()
                  for parts in m[1].assigned.values() for p in parts) == [0, 1, 2, 3]

    _reload(broker)
    assert broker.call(_consumer_groups, broker) == live

    for _ in range(30):  # 3 s: several heartbeats each
        for c in everyone:
            c.poll(0.1)
    assert broker.call(_consumer_groups, broker) == live
    for c in everyone:
        c.close()


def _until(done: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
