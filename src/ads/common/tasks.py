"""Supervised background tasks: what one component runs beside the requests it serves.

asyncio keeps only a weak reference to a task, and a task nobody awaits fails silently:
its exception is reported, if at all, when the task is collected. `TaskSet` holds its
tasks until they end, logs the failure of each (with its traceback and what it was), and
cancels what is left when its owner closes it. Unlike `asyncio.TaskGroup`, one task's
failure does not cancel the others: a marker task or an ISR write that fails concerns
its own partition only. Used from one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskSet"]


class TaskSet:
    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._tasks: dict[asyncio.Task[Any], str] = {}

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        """Runs `work` until it ends or `close`; `what` names it in the failure's log."""
        task = asyncio.ensure_future(work)
        self._tasks[task] = what
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        what = self._tasks.pop(task, "a background task")
        if not task.cancelled() and task.exception() is not None:
            self._log.error("%s failed", what, exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    def cancel(self) -> None:
        """Cancels every task still running (they end at their next await)."""
        for task in list(self._tasks):
            task.cancel()

    async def close(self) -> None:
        """Cancels every task still running and waits for them to end."""
        tasks = list(self._tasks)
        self.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
