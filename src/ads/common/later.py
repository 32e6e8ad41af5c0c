"""`Later`: an answer that comes after the call that promised it, handed on by plain calls.

A parked fetch is answered when an append (or its deadline) completes it. As a coroutine
awaiting a future that answer costs two event-loop passes: the task's first step, and its
resumption once the future's result is set, each with its own `epoll_wait`. Kafka
completes a delayed fetch in the thread of the append that satisfied it. A `Later` does
the same here: whoever completes it (the produce's append, the deadline's timer) runs the
callbacks at once, so the woken fetch reads, is encoded and is written to its connection
within the produce's own pass.

Callbacks run synchronously, in the completer's stack: they must not raise (`then`
catches what its function raises and fails the next `Later` with it) and must not block.
Not thread-safe: the event loop's thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
U = TypeVar("U")

__all__ = ["Later"]

log = logging.getLogger("ads.later")


class Later(Generic[T]):
    """A value or an error set once; `cancel` withdraws the interest in it."""

    __slots__ = ("_callbacks", "_done", "_error", "_value", "on_cancel")

    def __init__(self) -> None:
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Later[T]], None]] = []
        # What stops the work behind it (a parked fetch leaving its purgatory).
        self.on_cancel: Callable[[], None] | None = None

    @property
    def done(self) -> bool:
        return self._done

    def resolve(self, value: T) -> None:
        if not self._done:
            self._value = value
            self._finish()

    def fail(self, error: BaseException) -> None:
        if not self._done:
            self._error = error
            self._finish()

    def result(self) -> T:
        """The value, or the error raised; only once done."""
        if self._error is not None:
            raise self._error
        return cast(T, self._value)  # None only before it is done, or a value of None

    def add_callback(self, fn: Callable[[Later[T]], None]) -> None:
        """Calls `fn(self)` once done: at once if it is already."""
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def then(self, fn: Callable[[T], U]) -> Later[U]:
        """A `Later` of `fn` applied to this one's value; an error (this one's, or raised by
        `fn`) fails it instead. Cancelling it cancels this one."""
        out: Later[U] = Later()
        out.on_cancel = self.cancel

        def step(src: Later[T]) -> None:
            try:
                value = fn(src.result())
            except Exception as exc:  # handed on: the end of the chain reports it
                out.fail(exc)
                return
            out.resolve(value)

        self.add_callback(step)
        return out

    def __await__(self) -> Generator[Any, None, T]:
        """For a coroutine that waits for it (tests, tools; the broker's shutdown waits
        through `KafkaConnection.answered` instead, which also ends when the connection
        goes): through a future of the running loop; cancelling the waiter cancels this."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def settle(src: Later[T]) -> None:
            if future.done():
                return
            if src._error is not None:
                future.set_exception(src._error)
            else:
                future.set_result(cast(T, src._value))

        def withdrawn(done: asyncio.Future[T]) -> None:
            if done.cancelled():
                self.cancel()

        self.add_callback(settle)
        future.add_done_callback(withdrawn)
        return future.__await__()

    def cancel(self) -> None:
        """Nobody waits for it any more: no callback runs, the work behind it stops."""
        if self._done:
            return
        self._done = True
        self._callbacks.clear()
        on_cancel, self.on_cancel = self.on_cancel, None
        if on_cancel is not None:
            on_cancel()

    def _finish(self) -> None:
        self._done = True
        self.on_cancel = None
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:
                # A waiter's bug is its own: the completer (an append) carries on.
                log.exception("a callback of a deferred answer failed")
