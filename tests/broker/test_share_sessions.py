"""Share sessions (KIP-932): epochs, the partitions of incremental requests, final
requests, and the idle sessions dropped (manual clock)."""

from __future__ import annotations

import uuid

from ads.broker.share_sessions import ShareSession, ShareSessionCache
from ads.common.clock import ManualClock
from ads.protocol.errors import ErrorCode

T = uuid.UUID(int=7)


def test_share_sessions_epochs_and_partitions() -> None:
    cache = ShareSessionCache(ManualClock(), idle_ms=1000)
    assert cache.fetch("g", "m", 1, [], []) == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.acknowledge("g", "m", 0) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    session = cache.fetch("g", "m", 0, [(T, 0), (T, 1)], [])
    assert isinstance(session, ShareSession) and session.epoch == 1
    assert cache.fetch("g", "m", 2, [], []) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.fetch("g", "m", 1, [(T, 2)], [(T, 0)]) is session
    assert list(session.partitions) == [(T, 1), (T, 2)] and session.epoch == 2
    assert cache.acknowledge("g", "m", 2) is session and session.epoch == 3
    assert cache.acknowledge("g", "m", -1) is session  # final: the epoch does not matter
    cache.close(session)
    assert cache.fetch("g", "m", -1, [], []) == ErrorCode.SHARE_SESSION_NOT_FOUND
    # Epoch 0 replaces a member's session.
    first = cache.fetch("g", "m", 0, [(T, 0)], [])
    second = cache.fetch("g", "m", 0, [], [])
    assert first is not second and cache.sessions[("g", "m")] is second


def test_share_sessions_idle_ones_are_dropped_when_another_opens() -> None:
    clock = ManualClock()
    cache = ShareSessionCache(clock, idle_ms=1000)
    cache.fetch("g", "dead", 0, [(T, 0)], [])
    live = cache.fetch("g", "live", 0, [(T, 0)], [])
    clock.advance(800)
    assert cache.fetch("g", "live", 1, [], []) is live  # used: kept
    clock.advance(500)
    cache.fetch("g", "new", 0, [], [])
    assert set(cache.sessions) == {("g", "live"), ("g", "new")}


def test_share_sessions_tell_who_left_and_whether_the_group_is_empty_here() -> None:
    """Closed or dropped idle, a session's member is reported gone (its records are then
    released), with whether it was its group's last session on this broker."""
    clock = ManualClock()
    left: list[tuple[str, str, bool]] = []
    cache = ShareSessionCache(clock, idle_ms=1000,
                              member_left=lambda g, m, last: left.append((g, m, last)))
    a = cache.fetch("g", "a", 0, [(T, 0)], [])
    cache.fetch("g", "b", 0, [(T, 0)], [])
    cache.fetch("h", "c", 0, [(T, 0)], [])
    cache.fetch("g", "a", 0, [], [])  # a replaced session is no departure
    assert left == []
    assert isinstance(a, ShareSession)
    cache.close(a)  # the replaced one: not in the cache any more, nothing to tell
    assert left == []
    cache.close(cache.sessions[("g", "a")])
    assert left == [("g", "a", False)]
    clock.advance(1500)
    cache.fetch("h", "d", 0, [], [])  # drops b and c, idle
    assert sorted(left[1:]) == [("g", "b", True), ("h", "c", True)]
    assert set(cache.sessions) == {("h", "d")}
