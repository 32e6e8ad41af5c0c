"""`Later`: answers handed on by synchronous callbacks (a parked fetch's path)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ads.common.later import Later


def test_later_callbacks_run_in_the_completers_step() -> None:
    later: Later[int] = Later()
    doubled = later.then(lambda v: v * 2)
    seen: list[int] = []
    doubled.add_callback(lambda d: seen.append(d.result()))
    assert not doubled.done and seen == []
    later.resolve(21)
    assert seen == [42]  # no loop pass in between
    later.resolve(5)  # set once
    assert later.result() == 21
    late: list[int] = []
    doubled.add_callback(lambda d: late.append(d.result()))  # already done: called now
    assert late == [42]


def test_later_then_hands_errors_on() -> None:
    later: Later[int] = Later()
    failing = later.then(lambda v: 1 // v)
    after = failing.then(lambda v: v + 1)
    later.resolve(0)
    assert after.done
    with pytest.raises(ZeroDivisionError):
        after.result()
    source: Later[int] = Later()
    chained = source.then(lambda v: v)
    source.fail(KeyError("gone"))
    with pytest.raises(KeyError):
        chained.result()


def test_later_cancel_stops_the_work_behind_the_chain() -> None:
    stopped: list[str] = []
    source: Later[int] = Later()
    source.on_cancel = lambda: stopped.append("parked operation withdrawn")
    end = source.then(lambda v: v).then(lambda v: v)
    called: list[int] = []
    end.add_callback(lambda e: called.append(1))
    end.cancel()
    assert stopped == ["parked operation withdrawn"]
    source.resolve(1)  # too late: nobody waits
    assert called == []


def test_later_a_failing_callback_does_not_reach_the_completer(
        caplog: pytest.LogCaptureFixture) -> None:
    later: Later[int] = Later()
    after: list[int] = []

    def broken(_: Later[int]) -> None:
        raise RuntimeError("a waiter's bug")

    later.add_callback(broken)
    later.add_callback(lambda v: after.append(v.result()))
    with caplog.at_level(logging.ERROR, logger="ads.later"):
        later.resolve(7)  # the completer (an append) carries on
    assert after == [7]
    assert "a callback of a deferred answer failed" in caplog.text


async def test_later_awaited_by_a_coroutine() -> None:
    later: Later[str] = Later()
    asyncio.get_running_loop().call_later(0.01, later.resolve, "answered")
    assert await asyncio.wait_for(later, 1) == "answered"
    withdrawn: list[bool] = []
    waiting: Later[str] = Later()
    waiting.on_cancel = lambda: withdrawn.append(True)
    task = asyncio.ensure_future(waiting)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert withdrawn == [True]  # the waiter gone, the work behind it is withdrawn
