"""Helpers for replication tests: a partition's state as ZooKeeper holds it, and the
batches each replica has on disk."""

from __future__ import annotations

import json
from pathlib import Path

from ads.records.batch import iter_batches
from cluster_support import Cluster


def partition_state(c: Cluster, topic: str, partition: int) -> dict:
    with c.zk() as zk:
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        if not zk.exists(path):
            return {"leader": -1, "leader_epoch": -1, "isr": []}
        return json.loads(zk.get(path)[0])


def replica_batches(data_dir: Path, topic: str, partition: int) -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, bytes) of every batch in the replica's segment files."""
    found = []
    for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        for pos, header in iter_batches(data):
            found.append((header.base_offset, header.partition_leader_epoch,
                          data[pos:pos + header.size]))
    return found


def identical_logs(c: Cluster, topic: str, partitions: int, nodes: list[int]) -> bool:
    """Whether every replica on `nodes` holds the same batches, byte for byte."""
    for p in range(partitions):
        logs = [replica_batches(c.brokers[n].data_dir, topic, p) for n in nodes]
        if not logs[0] or any(other != logs[0] for other in logs[1:]):
            return False
    return True
