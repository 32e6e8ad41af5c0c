"""The broker process's garbage collection: long-lived objects kept out of full collections.

Why: CPython's full (generation 2) collection walks every object the collector tracks,
and the event loop stops while it does. A fresh `ads broker` tracks about 47,000 objects
(modules, the generated message classes, metadata), one with 6,000 partitions about
330,000: its full collections took up to 105 ms here (`tools/gc_pauses.py`). CPython
starts one whenever the objects promoted into the oldest generation since the last reach a
quarter of it: new partitions, and a large request's objects, alive across the young
collections that run while it is handled.

What `GcPolicy` does with `freeze`: after start-up and after every full collection, the
survivors are frozen (`gc.freeze()`): moved to the permanent generation, which no
collection walks, so a full collection walks only what became long-lived since the last.
Frozen objects are still freed by reference counting; only cyclic garbage among them (a
cycle that was alive when frozen, such as a closed connection's) waits. So `collect_all`,
which `ads broker` runs every `gc.full.collection.interval.ms`, thaws the permanent
generation and collects the whole heap once: a full pause at a known rate.

Either way it times each generation's collections, for `/metrics`. The collector is the
process's: `ads broker` installs a policy; an embedded broker leaves its host process's
collector alone.
"""

from __future__ import annotations

import gc
import time
from typing import Any

__all__ = ["GcPolicy", "installed"]

_FULL = 2  # the oldest generation: a collection of it is a full collection

_installed: GcPolicy | None = None


class GcPolicy:
    def __init__(self, freeze: bool) -> None:
        self.freeze = freeze
        self.pause_s = [0.0, 0.0, 0.0]  # per generation: time spent in its collections
        self.longest_s = [0.0, 0.0, 0.0]
        self._started = 0.0

    def install(self) -> None:
        """Times collections from now on; with `freeze`, collects and freezes what exists."""
        global _installed  # noqa: PLW0603 - the collector is one per process
        if _installed is not None:
            raise RuntimeError("a GcPolicy is already installed in this process")
        _installed = self
        gc.callbacks.append(self._on_collection)
        if self.freeze:
            gc.collect()  # frozen by the callback

    def uninstall(self) -> None:
        global _installed  # noqa: PLW0603 - the collector is one per process
        if _installed is self:
            _installed = None
            gc.callbacks.remove(self._on_collection)
            gc.unfreeze()

    def collect_all(self) -> None:
        """Thaws the permanent generation and collects the whole heap (frozen again after)."""
        gc.unfreeze()
        gc.collect()

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        # Collections do not nest and run under the interpreter lock, whichever thread
        # started one, so one start time serves.
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        took = time.perf_counter() - self._started
        self.pause_s[generation] += took
        self.longest_s[generation] = max(self.longest_s[generation], took)
        if generation == _FULL and self.freeze:
            gc.freeze()  # the survivors of a full collection are the long-lived objects


def installed() -> GcPolicy | None:
    """The policy installed in this process, if any."""
    return _installed
