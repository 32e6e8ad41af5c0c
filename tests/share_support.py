"""A share consumer in its own process that acknowledges one poll and holds the next
(`tests/broker/share_worker.py`), for the tests that kill it or a broker under it; and
`share_drain`, one in this process that accepts what it gets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer

from ads.protocol import messages as m

WORKER = str(Path(__file__).parent / "broker" / "share_worker.py")


@dataclass
class WorkerRun:
    proc: subprocess.Popen[str]
    acked: set[tuple[int, int]] = field(default_factory=set)  # (partition, offset)
    held: set[tuple[int, int]] = field(default_factory=set)
    committed: bool = False  # its acknowledgements were answered without error

    def kill(self) -> None:
        """SIGKILL by pid: whatever it holds is not acknowledged."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@contextmanager
def share_worker(bootstrap: str, group: str, topic: str, *settings: str,
                 timeout_s: float = 30.0) -> Iterator[WorkerRun]:
    """Started (`settings`: KEY=VALUE consumer settings), and yielded once it holds its
    second poll's records; killed at the end (and at `timeout_s` if it never gets there)."""
    proc = subprocess.Popen([sys.executable, WORKER, bootstrap, group, topic,  # noqa: S603
                             *settings],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    run = WorkerRun(proc)
    guard = threading.Timer(timeout_s, run.kill)
    guard.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            word, *rest = line.split()
            if word in ("acked", "held"):
                (run.acked if word == "acked" else run.held).add((int(rest[0]), int(rest[1])))
            elif word == "committed":
                run.committed = True
            elif word == "holding":
                break
        guard.cancel()
        assert run.held, "the share worker did not get to hold records"
        yield run
    finally:
        guard.cancel()
        run.kill()
        if proc.stdout is not None:
            proc.stdout.close()


def share_state_request(api: int, group: str, topic_id: uuid.UUID, partition: int,
                        **fields: Any) -> Any:
    """A one-partition request of the share coordinator's APIs (keys 83-87); `fields` are
    the partition's (leader_epoch, state_epoch, start_offset, state_batches as (first,
    last, state, count) tuples)."""
    K = m.ApiKey  # noqa: N806
    if api == K.WRITE_SHARE_GROUP_STATE:
        Q: Any = m.WriteShareGroupStateRequest
        fields["state_batches"] = [Q.WriteStateData.PartitionData.StateBatch(
            first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
            for f, la, s, c in fields.get("state_batches", [])]
        defaults = {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0}
        data, part = Q.WriteStateData, Q.WriteStateData.PartitionData
    elif api == K.INITIALIZE_SHARE_GROUP_STATE:
        Q = m.InitializeShareGroupStateRequest
        defaults = {"state_epoch": 0, "start_offset": 0}
        data, part = Q.InitializeStateData, Q.InitializeStateData.PartitionData
    elif api == K.READ_SHARE_GROUP_STATE:
        Q = m.ReadShareGroupStateRequest
        defaults = {"leader_epoch": 0}
        data, part = Q.ReadStateData, Q.ReadStateData.PartitionData
    elif api == K.DELETE_SHARE_GROUP_STATE:
        Q = m.DeleteShareGroupStateRequest
        defaults = {}
        data, part = Q.DeleteStateData, Q.DeleteStateData.PartitionData
    else:
        Q = m.ReadShareGroupStateSummaryRequest
        defaults = {"leader_epoch": 0}
        data, part = Q.ReadStateSummaryData, Q.ReadStateSummaryData.PartitionData
    return Q(group_id=group, topics=[data(topic_id=topic_id, partitions=[
        part(partition=partition, **{**defaults, **fields})])])


def share_drain(bootstrap: str, group: str, topic: str, want: int, timeout_s: float = 20.0
                ) -> list[tuple[int, int, int]]:
    """(partition, offset, delivery count) of what one ShareConsumer of `group` receives,
    each accepted, until `want` records came or `timeout_s`; it leaves the group then."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    got: list[tuple[int, int, int]] = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            for msg in c.poll(0.3):
                got.append((msg.partition(), msg.offset(), msg.delivery_count()))
                c.acknowledge(msg, AcknowledgeType.ACCEPT)
            c.commit_sync(10)
    finally:
        c.close()
    return sorted(got)
