"""An in-memory `CoordinatorLog` and helpers for driving the coordinator without a broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from ads.common.clock import ManualClock
from ads.coordinator.group.classic import JoinResult, SyncResult
from ads.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from ads.coordinator.group.rebalance import JoinRequest
from ads.coordinator.log import AppendError
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode


class MemoryLog:
    def __init__(self, partitions: int = 4, topics: dict[str, int] | None = None) -> None:
        self.partitions = partitions
        self.batches: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.created = False
        self.topics = dict(topics or {"t": 6, "u": 2})
        self.ids = {name: uuid.uuid4() for name in self.topics}
        self.fail_with: ErrorCode | None = None

    def partition_count(self) -> int:
        return self.partitions

    def exists(self) -> bool:
        return self.created

    def ensure_created(self) -> None:
        self.created = True

    def append(self, partition: int, batch: bytes) -> int:
        if self.fail_with is not None:
            raise AppendError(self.fail_with)
        self.batches[partition].append(batch)
        return len(self.batches[partition]) - 1

    def read_batches(self, partition: int) -> Iterator[bytes]:
        yield from self.batches[partition]

    def topic_partitions(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.ids.get(topic)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.ids.items() if i == topic_id), None)

    def topic_names(self) -> list[str]:
        return list(self.topics)

    def appended(self) -> int:
        return sum(len(b) for b in self.batches.values())


def make(delay_ms: int = 0, **config: int) -> tuple[GroupCoordinator, MemoryLog, ManualClock]:
    clock = ManualClock()
    mlog = MemoryLog()
    cfg = GroupConfig(initial_rebalance_delay_ms=delay_ms, **config)  # type: ignore[arg-type]
    return GroupCoordinator(mlog, clock, cfg), mlog, clock


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
