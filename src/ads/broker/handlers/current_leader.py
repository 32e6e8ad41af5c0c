"""KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the partition's current leader.

Produce (v10+) and Fetch (v16+, FENCED_LEADER_EPOCH too) fill the failed partition's
`current_leader` (leader id and leader epoch, as this broker's metadata has them) and add
the leader's endpoint to the response's `node_endpoints`, so a client goes to the new
leader without a Metadata round trip. Only failed partitions are looked at: nothing here
runs on a request that succeeded.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from ads.metadata.store import MetadataStore


class _Endpoint(Protocol):
    def __init__(self, *, node_id: int, host: str, port: int, rack: str | None) -> None: ...


E = TypeVar("E", bound=_Endpoint)


def current_leader(metadata: MetadataStore, topic: str, partition: int) -> tuple[int, int]:
    """The partition's leader id and leader epoch; (-1, -1) when the cluster has neither."""
    state = metadata.topics.get(topic)
    if state is None or not 0 <= partition < len(state.partitions):
        return -1, -1
    p = state.partitions[partition]
    return p.leader, p.leader_epoch


class LeaderEndpoints:
    """Collects the endpoints of the leaders named in one response (each once)."""

    def __init__(self, metadata: MetadataStore, listener_name: str) -> None:
        self.metadata = metadata
        self.listener_name = listener_name
        self._ids: dict[int, None] = {}

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        leader, epoch = current_leader(self.metadata, topic, partition)
        if leader in self.metadata.brokers:
            self._ids[leader] = None
        return leader, epoch

    def endpoints(self, cls: type[E]) -> list[E]:
        brokers = self.metadata.brokers
        out = []
        for n in self._ids:
            b = brokers.get(n)
            e = b.on(self.listener_name) if b is not None else None
            if b is not None and e is not None:
                out.append(cls(node_id=n, host=e.host, port=e.port, rack=b.rack))
        return out
