"""The ACL stores: in the embedded store's file, in ZooKeeper as Kafka lays it out
(`ads.metadata.acl` has the layout), and in a KRaft controller's metadata log.

KRaft: the view is the metadata image's (`kraft_image`: AccessControlEntryRecord and its
removal); a change is CreateAcls or DeleteAcls sent to the active controller, and returns
once the records it wrote have come back through the log.

ZooKeeper: every broker reads all resource znodes at start-up, then follows the change
notifications. A change rewrites one resource znode conditionally on the version it read
(retrying when another broker wrote it meanwhile), then creates a sequential notification
naming the pattern; each broker's watch of the notifications' parent reads every new one
in sequence order and re-reads the resource znode it names. So every broker's cache,
this one's included, changes through the same path, and a change returns once this
broker has processed its own notification. Notifications older than fifteen minutes are
deleted by whoever processes a newer one, as Kafka's `ZkNodeChangeNotificationListener`
does (a broker down longer than that re-reads everything when it starts).

kazoo calls the watches on its own thread; they read ZooKeeper there and hand the result
to the event loop, where the view changes and is read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from ads.metadata import acl
from ads.metadata.acl import AccessControlEntry, AclView, ResourcePattern
from ads.metadata.embedded import EmbeddedMetadataStore
from ads.metadata.kraft import KRaftMetadataStore
from ads.metadata.store import MetadataRequestError, MetadataStore
from ads.metadata.zookeeper import ZkMetadataStore
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_S = 15 * 60.0
CHANGE_TIMEOUT_S = 30.0


def acl_store_for(metadata: MetadataStore, loop: asyncio.AbstractEventLoop) -> acl.AclStore:
    if isinstance(metadata, ZkMetadataStore):
        return ZkAclStore(metadata.zk, loop)
    if isinstance(metadata, KRaftMetadataStore):
        return KRaftAclStore(metadata)
    assert isinstance(metadata, EmbeddedMetadataStore)
    return EmbeddedAclStore(metadata)


class EmbeddedAclStore:
    """ACLs in `ads-metadata.json`, rewritten with the rest of the file. Event loop only."""

    def __init__(self, metadata: EmbeddedMetadataStore) -> None:
        self._metadata = metadata
        self.version = 0

    @property
    def acls(self) -> AclView:
        return self._metadata.acls

    def start(self) -> None:
        pass  # the metadata store read the file

    async def change(self, pattern: ResourcePattern, add: Iterable[AccessControlEntry] = (),
                     remove: Iterable[AccessControlEntry] = ()) -> None:
        current = self._metadata.acls.get(pattern, frozenset())
        new = (current | frozenset(add)) - frozenset(remove)
        if new == current:
            return
        if new:
            self._metadata.acls[pattern] = new
        else:
            self._metadata.acls.pop(pattern, None)
        self._metadata.save()
        self.version += 1


class KRaftAclStore:
    """ACLs in the KRaft metadata log. Event loop only."""

    def __init__(self, metadata: KRaftMetadataStore) -> None:
        self._metadata = metadata

    @property
    def version(self) -> int:
        return self._metadata.image.acl_version

    @property
    def acls(self) -> AclView:
        return self._metadata.image.acls

    def start(self) -> None:
        pass  # the log brings the ACLs in with the rest of the metadata

    async def change(self, pattern: ResourcePattern, add: Iterable[AccessControlEntry] = (),
                     remove: Iterable[AccessControlEntry] = ()) -> None:
        added, removed = frozenset(add), frozenset(remove)
        if added:
            C = m.CreateAclsRequest  # noqa: N806
            created = await self._metadata.controller_request(C.API_KEY, 3, C(creations=[
                C.AclCreation(resource_type=pattern.resource_type,
                              resource_name=pattern.name,
                              resource_pattern_type=pattern.pattern_type,
                              principal=e.principal, host=e.host, operation=e.operation,
                              permission_type=e.permission_type) for e in sorted(added)]))
            assert isinstance(created, m.CreateAclsResponse)
            _raise_first([(r.error_code, r.error_message) for r in created.results])
        if removed:
            D = m.DeleteAclsRequest  # noqa: N806
            deleted = await self._metadata.controller_request(D.API_KEY, 3, D(filters=[
                D.DeleteAclsFilter(resource_type_filter=pattern.resource_type,
                                   resource_name_filter=pattern.name,
                                   pattern_type_filter=pattern.pattern_type,
                                   principal_filter=e.principal, host_filter=e.host,
                                   operation=e.operation, permission_type=e.permission_type)
                for e in sorted(removed)]))
            assert isinstance(deleted, m.DeleteAclsResponse)
            _raise_first([(r.error_code, r.error_message) for r in deleted.filter_results])

        def seen() -> bool:
            entries = self.acls.get(pattern, frozenset())
            return added <= entries and not removed & entries
        await self._metadata.until_seen(seen, f"ACLs of {pattern}")


def _raise_first(results: list[tuple[int, str | None]]) -> None:
    for code, message in results:
        if code != ErrorCode.NONE:
            raise MetadataRequestError(code, message)


def _sequence(child: str) -> int:
    return int(child[len(acl.CHANGE_PREFIX):]) if child.startswith(acl.CHANGE_PREFIX) else -1


class ZkAclStore:
    def __init__(self, zk: KazooClient, loop: asyncio.AbstractEventLoop) -> None:
        self._zk = zk
        self._loop = loop
        self.version = 0
        self._view: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # Per notification parent: the last sequence read (kazoo-side), and the last
        # applied to the view (loop-side) with the changes waiting for it.
        self._read_upto: dict[str, int] = {}
        self._applied: dict[str, int] = {}
        self._waiters: list[tuple[str, int, asyncio.Future[None]]] = []
        self._closed = False

    @property
    def acls(self) -> AclView:
        return self._view

    # -- start-up (blocking) -------------------------------------------------------------
    def start(self) -> None:
        for path in (acl.ACL_PATH, acl.EXTENDED_ACL_PATH, acl.ACL_CHANGES,
                     acl.EXTENDED_ACL_CHANGES):
            self._zk.ensure_path(path)
        # Sequences first: a change made while the znodes are read is then read again.
        for parent in (acl.ACL_CHANGES, acl.EXTENDED_ACL_CHANGES):
            seqs = [_sequence(c) for c in self._zk.get_children(parent)]
            self._read_upto[parent] = self._applied[parent] = max(seqs, default=-1)
        for type_path, rtype, ptype in acl.type_paths():
            try:
                names = self._zk.get_children(type_path)
            except NoNodeError:
                continue
            for name in names:
                pattern = ResourcePattern(rtype, name, ptype)
                entries = self._read(pattern)
                if entries:
                    self._view[pattern] = entries
        for parent in (acl.ACL_CHANGES, acl.EXTENDED_ACL_CHANGES):
            ChildrenWatch(self._zk, parent, self._notified(parent))
        log.info("loaded %d ACLs on %d resource patterns from ZooKeeper",
                 sum(len(e) for e in self._view.values()), len(self._view))

    def close(self) -> None:
        self._closed = True

    def _read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        path = acl.znode_path(pattern)
        try:
            data, _ = self._zk.get(path)
        except NoNodeError:
            return frozenset()
        try:
            return acl.decode_entries(data)
        except ValueError as exc:
            log.warning("ignoring ACL znode %s: %s", path, exc)
            return frozenset()

    # -- notifications (kazoo's thread) --------------------------------------------------
    def _notified(self, parent: str) -> Callable[[list[str]], bool]:
        extended = parent == acl.EXTENDED_ACL_CHANGES

        def watch(children: list[str]) -> bool:
            if self._closed:
                return False
            now = time.time()
            for child in sorted(children, key=_sequence):
                seq = _sequence(child)
                if seq <= self._read_upto[parent]:
                    continue
                path = f"{parent}/{child}"
                try:
                    data, stat = self._zk.get(path)
                except NoNodeError:
                    continue
                try:
                    pattern = acl.decode_change(data, extended)
                except ValueError as exc:
                    log.warning("ignoring ACL change notification %s: %s", path, exc)
                else:
                    self._post(self._set, pattern, self._read(pattern))
                self._read_upto[parent] = seq
                self._post(self._processed, parent, seq)
                if now - stat.ctime / 1000.0 > CHANGE_EXPIRATION_S:
                    self._purge(path)
            return not self._closed

        return watch

    def _purge(self, path: str) -> None:
        try:
            self._zk.delete(path)
        except NoNodeError:
            pass

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        if not self._loop.is_closed() and not self._closed:
            self._loop.call_soon_threadsafe(fn, *args)

    # -- the view (event loop) -----------------------------------------------------------
    def _set(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        if entries:
            self._view[pattern] = entries
        else:
            self._view.pop(pattern, None)
        self.version += 1

    def _processed(self, parent: str, seq: int) -> None:
        self._applied[parent] = max(self._applied[parent], seq)
        still = []
        for wanted_parent, wanted, fut in self._waiters:
            if wanted_parent == parent and wanted <= seq:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((wanted_parent, wanted, fut))
        self._waiters = still

    # -- changes (a worker thread writes) ------------------------------------------------
    async def change(self, pattern: ResourcePattern, add: Iterable[AccessControlEntry] = (),
                     remove: Iterable[AccessControlEntry] = ()) -> None:
        added, removed = frozenset(add), frozenset(remove)
        written = await asyncio.wait_for(
            asyncio.to_thread(self._write, pattern, added, removed), CHANGE_TIMEOUT_S)
        if written is None:
            return
        parent, seq = written
        if self._applied[parent] >= seq:
            return
        fut: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append((parent, seq, fut))
        await asyncio.wait_for(fut, CHANGE_TIMEOUT_S)

    def _write(self, pattern: ResourcePattern, add: frozenset[AccessControlEntry],
               remove: frozenset[AccessControlEntry]) -> tuple[str, int] | None:
        path = acl.znode_path(pattern)
        while True:  # conditional on the version read: another broker may write meanwhile
            try:
                data, stat = self._zk.get(path)
                current, version = acl.decode_entries(data), stat.version
            except NoNodeError:
                current, version = frozenset(), -1
            new = (current | add) - remove
            if new == current:
                return None
            try:
                if version < 0:
                    self._zk.create(path, acl.encode_entries(new), makepath=True)
                elif new:
                    self._zk.set(path, acl.encode_entries(new), version=version)
                else:
                    self._zk.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            break
        parent = acl.changes_path(pattern)
        created = self._zk.create(f"{parent}/{acl.CHANGE_PREFIX}", acl.encode_change(pattern),
                                  sequence=True, makepath=True)
        log.info("ACLs of %s %s (%s) are now %s", pattern.resource_type.camel, pattern.name,
                 pattern.pattern_type.camel, sorted(new))
        return parent, _sequence(created.rsplit("/", 1)[1])
