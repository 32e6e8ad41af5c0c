"""An in-memory `__consumer_offsets` and topic metadata, and helpers for driving the group
coordinator without a broker."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator

from ads.common.clock import ManualClock
from ads.coordinator.group.api import GroupConfig, JoinRequest, JoinResult, SyncResult
from ads.coordinator.group.coordinator import GroupCoordinator
from ads.coordinator.topic import AppendError
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode


class MemoryLog:
    """`InternalTopic` and `TopicMetadata` over in-memory lists.

    `fail_with` makes appends raise; `hold` keeps appended batches uncommitted (as if they
    waited for replicas) until `commit_held`; `gate`, while set, holds every load.
    """

    name = "__consumer_offsets"

    def __init__(self, partitions: int = 4, topics: dict[str, int] | None = None) -> None:
        self.partitions = partitions
        self.batches: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.created = False
        self.topics = dict(topics or {"t": 6, "u": 2})
        self.ids = {name: uuid.uuid4() for name in self.topics}
        self.fail_with: ErrorCode | None = None
        self.hold = False
        self.held: list[tuple[asyncio.Future[int], int]] = []
        self.gate: asyncio.Event | None = None
        self.log_start: dict[int, int] = {}

    def partition_count(self) -> int:
        return self.partitions

    def ready(self) -> bool:
        return self.created

    async def create(self) -> None:
        self.created = True

    def append(self, partition: int, batch: bytes, guard: object | None = None
               ) -> asyncio.Future[int]:
        if self.fail_with is not None:
            raise AppendError(self.fail_with)
        self.created = True
        self.batches[partition].append(batch)
        committed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        offset = len(self.batches[partition]) - 1
        if self.hold:
            self.held.append((committed, offset))
        else:
            committed.set_result(offset)
        return committed

    def commit_held(self, error: ErrorCode | None = None) -> None:
        """Completes the held appends: committed, or failed with `error`."""
        held, self.held = self.held, []
        for fut, offset in held:
            if error is None:
                fut.set_result(offset)
            else:
                fut.set_exception(AppendError(error))

    async def read_batches(self, partition: int) -> AsyncIterator[bytes]:
        if self.gate is not None:
            await self.gate.wait()
        start = self.log_start.get(partition, 0)
        for batch in list(self.batches[partition])[start:]:
            yield batch

    def delete_records(self, partition: int, offset: int) -> None:
        """Batches below `offset` (their index: one offset a batch here) are not read."""
        self.log_start[partition] = max(self.log_start.get(partition, 0), offset)

    def topic_partitions(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.ids.get(topic)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.ids.items() if i == topic_id), None)

    def topic_names(self) -> list[str]:
        return list(self.topics)

    def topics_matching(self, regex: str) -> tuple[str, ...]:
        return tuple(sorted(t for t in self.topics if re.fullmatch(regex, t)))

    def appended(self) -> int:
        return sum(len(b) for b in self.batches.values())


async def lead_all(coord: GroupCoordinator, epoch: int = 0) -> None:
    """Leads every partition of the topic (as one broker does) and waits for the loads."""
    count = coord.topic.partition_count()
    for p in range(count):
        coord.runtime.become_leader(p, epoch)
    for p in range(count):
        await coord.runtime.until_loaded(p)


async def make(delay_ms: int = 0, **config: int
               ) -> tuple[GroupCoordinator, MemoryLog, ManualClock]:
    clock = ManualClock()
    mlog = MemoryLog()
    cfg = GroupConfig(initial_rebalance_delay_ms=delay_ms, **config)  # type: ignore[arg-type]
    coord = GroupCoordinator(mlog, mlog, clock, cfg)
    await lead_all(coord)
    return coord, mlog, clock


def subscription(*topics: str) -> bytes:
    return b"\x00\x01" + m.ConsumerProtocolSubscription(topics=list(topics)).encode(1)


def join_request(group: str = "g", member_id: str = "", instance: str | None = None,
                 session_ms: int = 10_000, rebalance_ms: int = 30_000,
                 protocols: list[tuple[str, bytes]] | None = None, v4: bool = True,
                 client_id: str = "c") -> JoinRequest:
    return JoinRequest(group, member_id, instance, client_id, "/127.0.0.1", session_ms,
                       rebalance_ms, "consumer",
                       protocols if protocols is not None else [("range", subscription("t"))],
                       require_known_member_id=v4, supports_skip_assignment=False)


class Answers:
    """Collects callback answers; `last` is the latest one."""

    def __init__(self) -> None:
        self.got: list[JoinResult | SyncResult] = []

    def __call__(self, result: JoinResult | SyncResult) -> None:
        self.got.append(result)

    @property
    def last(self) -> JoinResult | SyncResult:
        assert self.got, "no answer yet"
        return self.got[-1]


def join(coord: GroupCoordinator, **kw: object) -> Answers:
    answers = Answers()
    coord.join_group(join_request(**kw), answers)  # type: ignore[arg-type]
    return answers


def join_new(coord: GroupCoordinator, **kw: object) -> tuple[str, Answers]:
    """KIP-394: first join gets MEMBER_ID_REQUIRED, the second one joins."""
    first = join(coord, **kw)
    assert first.last.error == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.last.member_id
    return member_id, join(coord, member_id=member_id, **kw)


def sync(coord: GroupCoordinator, member_id: str, generation: int,
         assignments: dict[str, bytes] | None = None, group: str = "g",
         instance: str | None = None) -> Answers:
    answers = Answers()
    coord.sync_group(group, generation, member_id, instance, None, None, assignments or {},
                     answers)
    return answers
