"""Purgatories: requests that wait for something to happen to a partition.

A delayed operation watches one or more partitions (by `TopicPartition` key) and completes
when an event on one of them lets it, or when its deadline passes, whichever comes first.
Two kinds exist, as in Kafka:

- `DelayedFetch`: a fetch that found fewer than `min_bytes`. Any append to one of its
  partitions (or a change of leadership) wakes it; the waiting request then reads again and
  either answers or parks once more until its deadline.
- `DelayedProduce`: an acks=all produce whose batches are appended but not yet below the high
  watermark. It completes when the high watermark of every partition it wrote reaches the
  offset after its batch with the ISR still at `min.insync.replicas` (capped at its
  replicas), answers NOT_ENOUGH_REPLICAS_AFTER_APPEND for a partition whose ISR fell below
  it meanwhile (even if that shrink is what moved the high watermark past the batch),
  NOT_LEADER_OR_FOLLOWER for one this broker no longer leads, and REQUEST_TIMED_OUT for the
  partitions still waiting at the request's timeout. On one broker the high watermark
  follows every append, so no produce waits.

An operation parks in the same loop step that found it incomplete (`watch` is synchronous):
an append handled later in the same loop pass must find it, or the request would sleep
through that append until its deadline.

Not thread-safe: used from the event loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ads.common.partitions import TopicPartition
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.replication.partition import Partition


class DelayedOperation:
    """Base of delayed operations: a future that completes once, by an event or a deadline."""

    __slots__ = ("future", "keys", "deadline", "_timer", "_purgatory")

    def __init__(self, keys: list[TopicPartition]) -> None:
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.keys = keys
        self.deadline = 0.0  # the loop's time at which it expires, once armed
        self._timer: asyncio.TimerHandle | None = None
        self._purgatory: Purgatory | None = None  # where it is watched, until completed

    def try_complete(self) -> bool:
        """Called on an event for one of the keys: completes the operation if it can."""
        raise NotImplementedError

    def on_expire(self) -> None:
        """Called once at the deadline if nothing completed the operation before."""

    def arm(self, timeout_s: float) -> None:
        """Starts the deadline: `on_expire` runs then unless an event completed it first."""
        # The future's loop, not get_running_loop(): on Python 3.11 that costs a getpid
        # system call, and a parked fetch used to pay four of them.
        loop = self.future.get_loop()
        self.deadline = loop.time() + max(timeout_s, 0.0)
        self._timer = loop.call_at(self.deadline, self._expire)

    def complete(self) -> None:
        """Completes the operation (if its future is not done yet, cancelled or answered)
        and forgets it in the purgatory at once: a done-callback would cost a loop callback
        per parked fetch, and every way out (an event, the deadline, a cancelled request's
        `finally`) comes through here."""
        if not self.future.done():
            self.future.set_result(None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory.forget(self)
            self._purgatory = None

    def _expire(self) -> None:
        self._timer = None
        if not self.future.done():
            self.on_expire()
        self.complete()


class DelayedFetch(DelayedOperation):
    """A fetch waiting for data: any event on its partitions wakes it to read again.

    `woken` is called once, synchronously, by whatever completes it (an append's event, the
    deadline, a change of leadership): the fetch reads again and answers within that
    same step (`ads.common.later`), as Kafka completes a delayed fetch in the appending
    thread. `cancel` (its request gone) completes it without calling `woken`."""

    __slots__ = ("woken",)

    def __init__(self, keys: list[TopicPartition],
                 woken: Callable[[], None] | None = None) -> None:
        super().__init__(keys)
        self.woken = woken

    def try_complete(self) -> bool:
        self.complete()
        return True

    def complete(self) -> None:
        first = not self.future.done()
        super().complete()
        woken, self.woken = self.woken, None
        if first and woken is not None:
            woken()

    def cancel(self) -> None:
        self.woken = None
        self.complete()


class DelayedProduce(DelayedOperation):
    """An acks=all produce waiting until the high watermark passes what it appended."""

    __slots__ = ("_waiting", "errors")

    def __init__(self, waiting: dict[TopicPartition, tuple[Partition, int]]) -> None:
        super().__init__(list(waiting))
        self._waiting = waiting  # partition -> (replica, offset the HW must reach)
        self.errors: dict[TopicPartition, ErrorCode] = {}

    def try_complete(self) -> bool:
        for key, (part, required) in list(self._waiting.items()):
            # The ISR is read before the high watermark: a shrink to the leader alone lets
            # the high watermark jump to the leader's log end offset, and a write that only
            # the leader holds must not be acknowledged by it (Kafka's rule too).
            if not part.is_leader:
                self.errors[key] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif len(part.isr) < part.effective_min_isr:
                self.errors[key] = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            elif part.high_watermark < required:
                continue
            del self._waiting[key]
        if self._waiting:
            return False
        self.complete()
        return True

    def on_expire(self) -> None:
        for key in self._waiting:
            self.errors[key] = ErrorCode.REQUEST_TIMED_OUT
        self._waiting.clear()


class Purgatory:
    """Delayed operations watched by partition key."""

    __slots__ = ("name", "_watchers")

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[TopicPartition, list[DelayedOperation]] = {}

    def watch(self, op: DelayedOperation, timeout_s: float) -> None:
        """Parks `op` on its keys now and arms its deadline."""
        for key in op.keys:
            self._watchers.setdefault(key, []).append(op)
        op._purgatory = self
        op.arm(timeout_s)

    def check_and_complete(self, key: TopicPartition) -> None:
        """An event on `key`: every operation watching it tries to complete."""
        ops = self._watchers.get(key)
        if not ops:
            return
        for op in list(ops):
            if op.future.done():
                op.complete()  # its request was cancelled: only forget it
            else:
                op.try_complete()

    def complete_all(self, keys: Iterable[TopicPartition]) -> None:
        """Leadership moved or the partitions went away: wake whatever watches them."""
        for key in keys:
            self.check_and_complete(key)

    def watched(self) -> int:
        """Number of operations waiting (an operation on two partitions counts twice)."""
        return sum(len(ops) for ops in self._watchers.values())

    def forget(self, op: DelayedOperation) -> None:
        """Unwatches `op` (its `complete` does, once)."""
        for key in op.keys:
            ops = self._watchers.get(key)
            if ops is None:
                continue
            try:
                ops.remove(op)
            except ValueError:
                pass
            if not ops:
                del self._watchers[key]

