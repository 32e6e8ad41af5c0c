"""Entity configs in ZooKeeper (`ads.metadata.entity_config`), watched the way Kafka does.

A change writes the entity's znode, then a sequential notification
`/config/changes/config_change_<n>` holding `{"version":2,"entity_path":"users/alice"}`.
Every broker watches the notifications' parent and re-reads the entities the new ones name;
at start it reads every entity once. Watching the notifications instead of every entity
znode keeps one watch however many users and client ids exist, and covers the nested
`users/<user>/clients/<id>` paths. Notifications older than `NOTIFICATION_TTL_S` are deleted
by whoever writes the next change (Kafka keeps them 15 minutes).

kazoo calls the watch on its own thread; what it reads is handed to the event loop through
`post`, as every other watch of the store does.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from ads.metadata import zk_layout as zl
from ads.metadata.entity_config import BROKERS, CLIENTS, GROUPS, USERS, apply_changes

log = logging.getLogger(__name__)

CONFIG_CHANGES = "/config/changes"
_NOTIFICATION = "config_change_"
NOTIFICATION_TTL_S = 15 * 60
Post = Callable[..., None]


def znode(path: str) -> str:
    return f"/config/{path}"


class ZkEntityConfigs:
    """Keeps `view` (entity path → configs; entities without configs absent) current."""

    def __init__(self, zk: KazooClient, post: Post, closed: Callable[[], bool]) -> None:
        self.zk = zk
        self._post = post
        self._closed = closed
        self.view: dict[str, dict[str, str]] = {}
        self._seen: set[str] | None = None  # kazoo-side: notifications already read
        self._lock = threading.Lock()
        # Told (on the loop) after each change of the view.
        self.on_change: Callable[[str], None] = lambda path: None

    def start(self) -> None:
        for path in (znode(USERS), znode(CLIENTS), znode(BROKERS), znode(GROUPS),
                     CONFIG_CHANGES):
            self.zk.ensure_path(path)
        ChildrenWatch(self.zk, CONFIG_CHANGES, self._notified)

    # -- kazoo's thread --------------------------------------------------------------------
    def _notified(self, children: list[str]) -> bool:
        names = {c for c in children if c.startswith(_NOTIFICATION)}
        with self._lock:
            first = self._seen is None
            new = names if first else names - (self._seen or set())
            self._seen = names
        try:
            paths = self._all_paths() if first else self._named_paths(sorted(new))
            for path in paths:
                self._post(self._set, path, self._read(path))
        except Exception:
            # The watch stays armed; the next notification reads again.
            log.exception("reading entity configs from ZooKeeper failed")
        return not self._closed()

    def _named_paths(self, notifications: list[str]) -> list[str]:
        paths = []
        for name in notifications:
            try:
                data, _ = self.zk.get(f"{CONFIG_CHANGES}/{name}")
            except NoNodeError:
                continue
            path = _notification_path(data)
            if path is not None and path.split("/")[0] in (USERS, CLIENTS, BROKERS, GROUPS):
                paths.append(path)
        return list(dict.fromkeys(paths))

    def _all_paths(self) -> list[str]:
        paths = [f"{CLIENTS}/{c}" for c in self._children(znode(CLIENTS))]
        paths += [f"{BROKERS}/{b}" for b in self._children(znode(BROKERS))]
        paths += [f"{GROUPS}/{g}" for g in self._children(znode(GROUPS))]
        for user in self._children(znode(USERS)):
            paths.append(f"{USERS}/{user}")
            clients = self._children(f"{znode(USERS)}/{user}/{CLIENTS}")
            paths.extend(f"{USERS}/{user}/{CLIENTS}/{c}" for c in clients)
        return paths

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def _read(self, path: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(znode(path))
        except NoNodeError:
            return {}
        return zl.decode_config(data)

    def read_all(self) -> dict[str, dict[str, str]]:
        """Every entity's configs read from ZooKeeper now (any thread but the loop's)."""
        read = ((path, self._read(path)) for path in self._all_paths())
        return {path: configs for path, configs in read if configs}

    # -- the loop --------------------------------------------------------------------------
    def _set(self, path: str, configs: dict[str, str]) -> None:
        if configs:
            self.view[path] = configs
        elif self.view.pop(path, None) is None:
            return
        self.on_change(path)

    # -- writes (a worker thread) ----------------------------------------------------------
    def write(self, path: str, changes: Mapping[str, str | None]) -> dict[str, str]:
        """Read-modify-write of the entity's znode, conditional on the version read, then
        the notification. Returns the configs written."""
        target = znode(path)
        while True:
            try:
                data, stat = self.zk.get(target)
            except NoNodeError:
                configs = apply_changes({}, dict(changes))
                try:
                    self.zk.create(target, zl.encode_config(configs), makepath=True)
                except NodeExistsError:
                    continue  # made meanwhile: read it
                break
            configs = apply_changes(zl.decode_config(data), dict(changes))
            try:
                self.zk.set(target, zl.encode_config(configs), version=stat.version)
            except BadVersionError:
                continue  # changed meanwhile: apply the changes to what it holds now
            break
        self.zk.create(f"{CONFIG_CHANGES}/{_NOTIFICATION}", _notification(path), sequence=True)
        self._expire_notifications()
        return configs

    def _expire_notifications(self) -> None:
        cutoff_ms = (time.time() - NOTIFICATION_TTL_S) * 1000
        for name in self._children(CONFIG_CHANGES):
            try:
                stat = self.zk.exists(f"{CONFIG_CHANGES}/{name}")
                if stat is not None and stat.ctime < cutoff_ms:
                    self.zk.delete(f"{CONFIG_CHANGES}/{name}")
            except NoNodeError:
                pass


def _notification(path: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": path}).encode()


def _notification_path(raw: bytes | None) -> str | None:
    if not raw:
        return None
    try:
        data: Any = json.loads(raw)
    except ValueError:
        return None
    path = data.get("entity_path") if isinstance(data, dict) else None
    return str(path) if path else None
