"""Each replica's log end offset, asked of the broker that holds it.

A ListOffsets (latest) with Kafka's debugging replica id (-2) is answered by any replica,
leader or follower, with its own log end offset, so a follower's lag is the difference to
its leader's. One request per broker covers every partition it holds; a broker that does
not answer leaves its replicas out (shown as '?').
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ads.client import ClientError, Connection
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

DEBUGGING_REPLICA_ID = -2
LO = m.ListOffsetsRequest

# (node id, host, port, topic, partition) of one replica.
Replica = tuple[int, str, int, str, int]


def log_end_offsets(connect: Callable[[str, int], Connection], replicas: Iterable[Replica]
                    ) -> dict[tuple[int, str, int], int]:
    """(node id, topic, partition) -> that replica's log end offset, asked over connections
    made by ``connect(host, port)``."""
    hosted: dict[tuple[int, str, int], dict[str, list[int]]] = {}
    for node, host, port, topic, partition in replicas:
        hosted.setdefault((node, host, port), {}).setdefault(topic, []).append(partition)
    found: dict[tuple[int, str, int], int] = {}
    for (node, host, port), topics in hosted.items():
        req = LO(replica_id=DEBUGGING_REPLICA_ID, isolation_level=0, topics=[
            LO.ListOffsetsTopic(name=t, partitions=[
                LO.ListOffsetsTopic.ListOffsetsPartition(partition_index=i, timestamp=-1)
                for i in ps]) for t, ps in topics.items()])
        try:
            with connect(host, port) as conn:
                resp = conn.request(m.ApiKey.LIST_OFFSETS, 5, req)
        except ClientError:
            continue
        assert isinstance(resp, m.ListOffsetsResponse)
        for t in resp.topics:
            for part in t.partitions:
                if part.error_code == ErrorCode.NONE:
                    found[(node, t.name, part.partition_index)] = part.offset
    return found


def format_ends(ends: dict[tuple[int, str, int], int], nodes: Iterable[int], topic: str,
                partition: int) -> str:
    return ",".join(f"{n}={ends.get((n, topic, partition), '?')}" for n in nodes)
