"""Wiring of the coordinators into the broker: their internal topics, leadership, timers.

The group coordinator gets `__consumer_offsets` (`internal_topics.InternalTopicLog`), the
topic metadata and the broker's clock; the transaction coordinator `__transaction_state`,
the topic metadata, the clock, the broker's producer ids and the marker writer
(`markers.py`); the share coordinator `__share_group_state` (its timers prune it).
Leadership of internal-topic partitions reaches the coordinator runtime through
`become_leader` / `become_follower`: the replica manager calls them whenever this broker
becomes leader or follower of such a partition, on one broker as in a cluster.

Coordinator timers (sessions, rebalances, KIP-848 heartbeats and revocations, offset
expiry) fire at their deadline: `DeadlineTimer` keeps one event-loop timer armed at the
earliest deadline the coordinator has, moves it earlier when a sooner one is scheduled, and
after each `tick` arms it at the next. Nothing polls: before, a 50 ms tick removed a member
whose session ended at T somewhere in [T, T+50 ms), so a client that waited exactly its
session timeout and then deleted its group could still find the member there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ads.broker import group_configs
from ads.broker.internal_topics import (
    OFFSETS_TOPIC_SPEC,
    SHARE_GROUP_STATE_TOPIC_SPEC,
    TRANSACTION_STATE_TOPIC_SPEC,
    BrokerTopicMetadata,
    InternalTopicLog,
)
from ads.broker.settings import group_config, txn_config
from ads.coordinator.group.api import GroupTimeouts
from ads.coordinator.group.coordinator import GroupCoordinator
from ads.coordinator.share.coordinator import ShareCoordinator
from ads.coordinator.share.shard import ShareCoordinatorConfig
from ads.coordinator.transaction.coordinator import TransactionCoordinator

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext
    from ads.common.clock import Clock
    from ads.coordinator.runtime import CoordinatorRuntime

log = logging.getLogger("ads.broker")


class DeadlineTimer:
    """Calls `tick` when the earliest coordinator deadline comes. Used from the broker's
    event loop only (the coordinator schedules its timers there)."""

    def __init__(self, clock: Clock, tick: Callable[[], None],
                 next_deadline_ms: Callable[[], int | None]) -> None:
        self._clock = clock
        self._tick = tick
        self._next = next_deadline_ms
        self._handle: asyncio.TimerHandle | None = None
        self.armed_ms: int | None = None  # the deadline the loop timer is armed for
        self._ticking = False
        self._stopped = False

    def request(self, deadline_ms: int) -> None:
        """A timer due at `deadline_ms` was scheduled: wake up then at the latest."""
        if self._ticking or self._stopped:
            return  # `_fire` arms for the earliest deadline once the tick is over
        if self.armed_ms is None or deadline_ms < self.armed_ms:
            self._arm(deadline_ms)

    def _arm(self, deadline_ms: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        delay_s = max(deadline_ms - self._clock.time_ms(), 0) / 1000
        self._handle = asyncio.get_running_loop().call_later(delay_s, self._fire)
        self.armed_ms = deadline_ms

    def _fire(self) -> None:
        self._handle = self.armed_ms = None
        self._ticking = True
        try:
            self._tick()
        except Exception:
            log.exception("coordinator timers failed")
        finally:
            self._ticking = False
        following = self._next()
        if following is not None and not self._stopped:
            # The loop's clock may run a hair ahead of the wall clock: a deadline not yet
            # due is simply armed again.
            self._arm(following)

    def stop(self) -> None:
        self._stopped = True
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self.armed_ms = None


def create_group_coordinator(broker: BrokerContext) -> GroupCoordinator:
    own_settings = group_configs.own_settings(broker.config,
                                              lambda: broker.metadata.entity_configs)

    def group_timeouts(group_id: str) -> GroupTimeouts | None:
        own = own_settings(group_id)
        if own is None:
            return None
        return GroupTimeouts(own.consumer_session_timeout_ms,
                             own.consumer_heartbeat_interval_ms,
                             own.share_session_timeout_ms, own.share_heartbeat_interval_ms)

    return GroupCoordinator(InternalTopicLog(broker, OFFSETS_TOPIC_SPEC),
                            BrokerTopicMetadata(broker), broker.clock,
                            replace(group_config(broker.config), group_timeouts=group_timeouts))


def create_transaction_coordinator(broker: BrokerContext) -> TransactionCoordinator:
    return TransactionCoordinator(InternalTopicLog(broker, TRANSACTION_STATE_TOPIC_SPEC),
                                  BrokerTopicMetadata(broker), broker.clock,
                                  broker.next_producer_id, broker.txn_requests,
                                  txn_config(broker.config))


def create_share_coordinator(broker: BrokerContext) -> ShareCoordinator:
    get = broker.config.get_int
    config = ShareCoordinatorConfig(
        get("share.coordinator.snapshot.update.records.per.snapshot"),
        get("share.coordinator.state.topic.prune.interval.ms"))
    return ShareCoordinator(InternalTopicLog(broker, SHARE_GROUP_STATE_TOPIC_SPEC),
                            BrokerTopicMetadata(broker), broker.clock, config)


def start(broker: BrokerContext) -> DeadlineTimer:
    """Runs the timers at their deadlines; returns what wakes them (`stop` it at shutdown).
    The coordinators load the partitions this broker leads as the replica manager reports
    leadership (`leadership_changed`)."""
    groups, txns = broker.group_coordinator, broker.transaction_coordinator
    shares = broker.share_coordinator

    def tick() -> None:
        groups.tick()
        txns.tick()
        shares.tick()

    def next_deadline_ms() -> int | None:
        deadlines = [d for d in (groups.next_deadline_ms(), txns.next_deadline_ms(),
                                 shares.next_deadline_ms()) if d is not None]
        return min(deadlines, default=None)

    deadlines = DeadlineTimer(broker.clock, tick, next_deadline_ms)
    groups.runtime.wakeup = txns.runtime.wakeup = shares.runtime.wakeup = deadlines.request
    return deadlines


def _runtime(broker: BrokerContext, topic: str) -> CoordinatorRuntime[Any] | None:
    if topic == OFFSETS_TOPIC_SPEC.name:
        return broker.group_coordinator.runtime
    if topic == TRANSACTION_STATE_TOPIC_SPEC.name:
        return broker.transaction_coordinator.runtime
    if topic == SHARE_GROUP_STATE_TOPIC_SPEC.name:
        return broker.share_coordinator.runtime
    return None


def become_leader(broker: BrokerContext, topic: str, partition: int, leader_epoch: int) -> None:
    """This broker leads the partition of an internal topic now: its coordinator loads it."""
    runtime = _runtime(broker, topic)
    if runtime is not None:
        runtime.become_leader(partition, leader_epoch)


def become_follower(broker: BrokerContext, topic: str, partition: int,
                    leader_epoch: int | None = None) -> None:
    """Another broker leads the partition now (None: the topic is gone): it is unloaded."""
    runtime = _runtime(broker, topic)
    if runtime is not None:
        runtime.become_follower(partition, leader_epoch)


def leadership_changed(broker: BrokerContext, topic: str, partition: int, leader: bool,
                       leader_epoch: int | None) -> None:
    """The replica manager's listener: leadership of a partition moved to or from here
    (epoch None: the replica is gone)."""
    if leader and leader_epoch is not None:
        become_leader(broker, topic, partition, leader_epoch)
    else:
        become_follower(broker, topic, partition, leader_epoch)


def stop(broker: BrokerContext, deadlines: DeadlineTimer | None) -> None:
    if deadlines is not None:
        deadlines.stop()
    broker.group_coordinator.shutdown()
    broker.transaction_coordinator.shutdown()
    broker.share_coordinator.shutdown()
