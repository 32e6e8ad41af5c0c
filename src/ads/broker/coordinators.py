"""Wiring of the coordinators into the broker: their internal topics, leadership, timers.

The group coordinator gets `__consumer_offsets` (`internal_topics.InternalTopicLog`), the
topic metadata and the broker's clock. Leadership of internal-topic partitions reaches the
coordinator runtime through `become_leader` / `become_follower`: the replica manager calls
them whenever this broker becomes leader or follower of such a partition, on one broker as
in a cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ads.broker.internal_topics import OFFSETS_TOPIC_SPEC, BrokerTopicMetadata, InternalTopicLog
from ads.broker.settings import group_config
from ads.coordinator.group.coordinator import GroupCoordinator

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext

TICK_MS = 50


def create_group_coordinator(broker: BrokerContext) -> GroupCoordinator:
    return GroupCoordinator(InternalTopicLog(broker, OFFSETS_TOPIC_SPEC),
                            BrokerTopicMetadata(broker), broker.clock,
                            group_config(broker.config))


def start(broker: BrokerContext) -> None:
    """Runs the timers. The coordinators load the partitions this broker leads as the
    replica manager reports leadership (`leadership_changed`)."""
    broker.schedule("group-coordinator", TICK_MS, broker.group_coordinator.tick)


def become_leader(broker: BrokerContext, topic: str, partition: int, leader_epoch: int) -> None:
    """This broker leads the partition of an internal topic now: its coordinator loads it."""
    if topic == OFFSETS_TOPIC_SPEC.name:
        broker.group_coordinator.runtime.become_leader(partition, leader_epoch)


def become_follower(broker: BrokerContext, topic: str, partition: int,
                    leader_epoch: int | None = None) -> None:
    """Another broker leads the partition now (None: the topic is gone): it is unloaded."""
    if topic == OFFSETS_TOPIC_SPEC.name:
        broker.group_coordinator.runtime.become_follower(partition, leader_epoch)


def leadership_changed(broker: BrokerContext, topic: str, partition: int, leader: bool,
                       leader_epoch: int) -> None:
    """The replica manager's listener: leadership of a partition moved to or from here."""
    if leader:
        become_leader(broker, topic, partition, leader_epoch)
    else:
        become_follower(broker, topic, partition, leader_epoch)


def stop(broker: BrokerContext) -> None:
    broker.group_coordinator.shutdown()
