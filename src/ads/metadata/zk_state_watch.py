"""Watches on the partition state znodes, read in a pipeline.

kazoo's `DataWatch` reads its znode with a blocking get on kazoo's one callback thread, so a
broker watching N state znodes read them one round trip after another: when a failover
rewrote thousands of states, a broker learnt its new roles seconds after the controller had
decided them. It also starts a thread per watch on every reconnection. Here each read is
asynchronous (`get_async` with a watch): thousands are in flight at once, and the answers
come back in order on kazoo's completion thread, which hands each state to `deliver`.

The rules:

- a state znode that does not exist yet is watched with `exists` (ZooKeeper leaves no watch
  after a failed get) and read when it is made; a state that disappears is delivered as
  None, version -1;
- a read that failed because the connection dropped is made again (at once if kazoo
  still counts the connection up, else once it has reconnected); the watches left by the
  reads that succeeded survive the reconnection (kazoo sets them again, and ZooKeeper
  fires those whose znode changed meanwhile);
- an expired session takes every watch with it: every partition is read again on the next
  session;
- a partition whose topic is no longer wanted (`wanted(topic)` False) is dropped when its
  watch next fires; `forget` drops a topic's partitions at once.

Thread-safe: `watch` and `forget` are called from kazoo's threads, the callbacks arrive on
kazoo's completion and connection threads.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import WatchedEvent

from ads.common.partitions import TopicPartition
from ads.metadata import zk_layout as zl

Deliver = Callable[[TopicPartition, zl.LeaderAndIsr | None, int], None]


class StateWatches:
    def __init__(self, zk: KazooClient, deliver: Deliver, wanted: Callable[[str], bool]) -> None:
        """`deliver(partition, state or None, znode version)` hears every state read."""
        self._zk = zk
        self._deliver = deliver
        self._wanted = wanted
        self._lock = threading.Lock()
        self._watched: set[TopicPartition] = set()
        self._failed: set[TopicPartition] = set()  # reads to make again on reconnection
        self._connected = True
        self._lost = False
        zk.add_listener(self._session_changed)

    def watch(self, partitions: Iterable[TopicPartition]) -> None:
        """Reads and watches the partitions not watched yet."""
        with self._lock:
            new = [key for key in partitions if key not in self._watched]
            self._watched.update(new)
        for key in new:
            self._read(key)

    def forget(self, topic: str) -> None:
        with self._lock:
            self._watched = {key for key in self._watched if key.topic != topic}
            self._failed = {key for key in self._failed if key.topic != topic}

    def _still_wanted(self, key: TopicPartition) -> bool:
        if self._wanted(key.topic):
            return True
        with self._lock:
            self._watched.discard(key)
        return False

    def _read(self, key: TopicPartition) -> None:
        if not self._still_wanted(key):
            return
        try:
            result = self._zk.get_async(zl.state_path(*key),
                                        watch=functools.partial(self._fired, key))
        except KazooException:  # the client is closing
            return
        result.rawlink(functools.partial(self._got, key))

    def _fired(self, key: TopicPartition, _: WatchedEvent) -> None:
        self._read(key)

    def _got(self, key: TopicPartition, result: IAsyncResult) -> None:
        try:
            data, stat = result.get()
        except NoNodeError:
            self._await_creation(key)
            return
        except ConnectionLoss:
            self._read_later(key)
            return
        except KazooException:
            # Closed, or the session expired: everything is read on the next session.
            return
        if self._still_wanted(key):
            self._deliver(key, zl.decode_state(data) if data else None, stat.version)

    def _await_creation(self, key: TopicPartition) -> None:
        try:
            result = self._zk.exists_async(zl.state_path(*key),
                                           watch=functools.partial(self._fired, key))
        except KazooException:
            return
        result.rawlink(functools.partial(self._existence, key))

    def _existence(self, key: TopicPartition, result: IAsyncResult) -> None:
        try:
            stat = result.get()
        except ConnectionLoss:
            self._read_later(key)
            return
        except KazooException:
            return
        if stat is not None:  # made between the get and the exists
            self._read(key)
        else:
            self._deliver(key, None, -1)

    def _read_later(self, key: TopicPartition) -> None:
        # While kazoo reconnects it queues new requests, so a read made again at once waits
        # for the connection instead of failing again.
        with self._lock:
            again = self._connected and key in self._watched
            if not again:
                self._failed.add(key)
        if again:
            self._read(key)

    def _session_changed(self, state: str) -> None:
        # kazoo's connection thread: the reads are only queued here.
        with self._lock:
            if state != KazooState.CONNECTED:
                self._connected = False
                self._lost |= state == KazooState.LOST
                return
            self._connected = True
            again = set(self._watched) if self._lost else self._failed & self._watched
            self._failed.clear()
            self._lost = False
        if again:
            # Not on this thread: each request wakes the connection thread through a
            # socket pair, and thousands of wake-ups would fill it with nobody reading.
            threading.Thread(target=self._read_all, args=(sorted(again),), daemon=True,
                             name="ads-zk-state-reads").start()

    def _read_all(self, keys: list[TopicPartition]) -> None:
        for key in keys:
            self._read(key)
