"""What the operations endpoints read of the broker, and snapshots of it taken on its loop.

Everything here runs on the broker's event loop (the HTTP server's handlers do), which owns
the replica manager, the coordinators and the metadata view; nothing is changed. Partitions
are read through their public attributes (`size_bytes`, `isr`, `is_leader`, the offsets);
groups through the group coordinator's listing and offset fetch, as OffsetFetch does;
share-partitions through the share-partition manager's loaded ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ads.broker.context import BrokerContext
from ads.broker.metrics import BrokerMetrics
from ads.net.limits import ConnectionLimits
from ads.net.server import KafkaListener
from ads.replication.share_partition import ShareCounts
from ads.storage.cleaner import LogCleaner
from ads.storage.manager import LogManager


class ObservedBroker(BrokerContext, Protocol):
    metrics: BrokerMetrics
    listeners: list[KafkaListener]
    connection_limits: ConnectionLimits
    log_cleaner: LogCleaner | None
    log_manager: LogManager
    started: bool


@dataclass(frozen=True, slots=True)
class PartitionView:
    topic: str
    partition: int
    leader: int  # -1: offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]  # as the metadata says
    local: bool  # a replica is on this broker
    leads: bool  # this broker serves it as leader
    size_bytes: int = 0
    segments: int = 0
    log_start_offset: int = -1
    log_end_offset: int = -1
    high_watermark: int = -1


@dataclass(frozen=True, slots=True)
class GroupOffset:
    topic: str
    partition: int
    committed: int
    high_watermark: int | None  # None: the partition is not led here
    lag: int | None


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    group_type: str
    offsets: tuple[GroupOffset, ...]
    # When a group without members became empty (its state's timestamp, ms); None while it
    # has members, or when the coordinator keeps no group, only its offsets.
    empty_since_ms: int | None = None

    @property
    def total_lag(self) -> int:
        return sum(o.lag for o in self.offsets if o.lag is not None)


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    group_id: str
    topic: str
    partition: int
    counts: ShareCounts


def partitions(broker: BrokerContext, topic: str | None = None) -> list[PartitionView]:
    """Every partition of the metadata (or of one topic), with its log's figures where a
    replica lives here."""
    rm = broker.replica_manager
    node = broker.node_id
    out = []
    topics = broker.metadata.topics
    names = [topic] if topic is not None else sorted(topics)
    for name in names:
        state = topics.get(name)
        if state is None:
            continue
        for p in state.partitions:
            part = rm.get(name, p.partition)
            if part is None:
                out.append(PartitionView(name, p.partition, p.leader, tuple(p.replicas),
                                         tuple(p.isr), node in p.replicas, False))
                continue
            out.append(PartitionView(
                name, p.partition, p.leader, tuple(p.replicas), tuple(p.isr), True,
                part.is_leader, part.size_bytes, part.num_segments, part.log_start_offset,
                part.log_end_offset, part.high_watermark))
    return out


def groups(broker: BrokerContext) -> list[GroupView]:
    """The groups of this broker's loaded `__consumer_offsets` partitions, with each
    committed offset and its lag (high watermark minus committed) where the partition is
    led here."""
    coordinator = broker.group_coordinator
    rm = broker.replica_manager
    _, listed = coordinator.list_groups()
    out = []
    for listing in sorted(listed, key=lambda g: g.group_id):
        error, fetched = coordinator.fetch_offsets(listing.group_id, None)
        offsets = []
        if not error:
            for (topic, index), committed in fetched:
                if committed is None:
                    continue
                part = rm.get(topic, index)
                hw = part.high_watermark if part is not None and part.is_leader else None
                lag = max(hw - committed.offset, 0) if hw is not None else None
                offsets.append(GroupOffset(topic, index, committed.offset, hw, lag))
        group = coordinator.groups.get(listing.group_id)
        since = group.current_state_timestamp if group is not None and group.is_empty else -1
        out.append(GroupView(listing.group_id, listing.state, listing.protocol_type,
                             listing.group_type, tuple(offsets),
                             since if since >= 0 else None))
    return out


def share_partitions(broker: BrokerContext, group_id: str | None = None
                     ) -> list[SharePartitionView]:
    """The share-partitions loaded on this broker (those it leads and a share consumer has
    fetched from since it became their leader), of every group or of one, sorted."""
    out = [SharePartitionView(group, tp.topic, tp.partition, sp.counts())
           for (group, tp), sp in broker.share_partitions.partitions.items()
           if group_id is None or group == group_id]
    out.sort(key=lambda v: (v.group_id, v.topic, v.partition))
    return out
