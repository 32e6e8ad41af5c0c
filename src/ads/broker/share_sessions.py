"""Share sessions (KIP-932): the partitions a share consumer fetches from this broker.

A share session is keyed by (group id, member id) and numbered by its epoch, as a fetch
session is (`fetch_sessions.py`) but chosen by the client:

    ShareFetch epoch 0     opens a session (a member's previous one is replaced); it may not
                           carry acknowledgements (INVALID_REQUEST).
    epoch n > 0            the session's next epoch: its partitions change by the request's
                           topics (added) and forgotten topics; SHARE_SESSION_NOT_FOUND
                           without a session, INVALID_SHARE_SESSION_EPOCH for another epoch.
    epoch -1 (final)       acknowledges, then closes the session; the member's records
                           are released.
    ShareAcknowledge       n > 0 or -1 as above; epoch 0 is INVALID_SHARE_SESSION_EPOCH.

After each accepted request the expected epoch moves to n + 1 (past int32 max: 1).
A session unused for `idle_ms` (the share group session timeout: its member is gone from
the group by then) is dropped when another session opens, so that consumers that died
without closing theirs do not accumulate. Sessions are in memory; a broker restart forgets
them and clients open new ones. When a session goes (closed, or dropped idle) the
share-partition manager is told (`member_left`): it releases the member's records and, when
that was the group's last session here, drops the group's share-partitions from memory, so
that offsets altered while the group was empty count. Used from the broker's event loop
only.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ads.common.clock import Clock
from ads.protocol.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_MAX_EPOCH = 2**31 - 1

# (topic id, partition index): how the share APIs name a partition.
SessionPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[SessionPartition, None] = field(default_factory=dict)  # ordered set
    last_used_ms: int = 0


class ShareSessionCache:
    def __init__(self, clock: Clock, idle_ms: int,
                 member_left: Callable[[str, str, bool], None] = lambda _g, _m, _last: None
                 ) -> None:
        self.clock = clock
        self.idle_ms = idle_ms
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # Told (group id, member id, whether it was the group's last session here) when a
        # session goes, closed or dropped idle.
        self.member_left = member_left
        self._per_group: Counter[str] = Counter()

    def fetch(self, group_id: str, member_id: str, epoch: int,
              added: Iterable[SessionPartition], forgotten: Iterable[SessionPartition]
              ) -> ShareSession | ErrorCode:
        """The session of a ShareFetch, opened or moved to its next epoch."""
        if epoch == INITIAL_EPOCH:
            now = self.clock.time_ms()
            self._drop_idle(now)
            session = ShareSession(group_id, member_id, last_used_ms=now)
            if self.sessions.get((group_id, member_id)) is None:
                self._per_group[group_id] += 1
            self.sessions[(group_id, member_id)] = session
        else:
            found = self._checked(group_id, member_id, epoch)
            if isinstance(found, ErrorCode):
                return found
            session = found
        for key in forgotten:
            session.partitions.pop(key, None)
        for key in added:
            session.partitions[key] = None
        return session

    def acknowledge(self, group_id: str, member_id: str, epoch: int
                    ) -> ShareSession | ErrorCode:
        """The session of a ShareAcknowledge, moved to its next epoch."""
        if epoch == INITIAL_EPOCH:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return self._checked(group_id, member_id, epoch)

    def _checked(self, group_id: str, member_id: str, epoch: int) -> ShareSession | ErrorCode:
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        session.epoch = 1 if epoch >= _MAX_EPOCH else epoch + 1
        session.last_used_ms = self.clock.time_ms()
        return session

    def _drop_idle(self, now: int) -> None:
        idle = [key for key, s in self.sessions.items() if now - s.last_used_ms > self.idle_ms]
        for key in idle:
            self._remove(key)

    def close(self, session: ShareSession) -> None:
        if self.sessions.get((session.group_id, session.member_id)) is session:
            self._remove((session.group_id, session.member_id))

    def _remove(self, key: tuple[str, str]) -> None:
        del self.sessions[key]
        group_id, member_id = key
        self._per_group[group_id] -= 1
        last = self._per_group[group_id] <= 0
        if last:
            del self._per_group[group_id]
        self.member_left(group_id, member_id, last)
