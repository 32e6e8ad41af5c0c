"""The cleaner's offset map: key digest -> last offset, in one preallocated table.

Kafka's ``SkimpyOffsetMap`` idea with a tighter slot. The table is open addressing with
double hashing over a prime number of slots, held in three flat ``array`` columns allocated
once (no Python object per entry)::

    slot i:  digest_lo[i]  uint64   first 8 bytes of the key's 16-byte BLAKE2b digest
             digest_hi[i]  uint64   last 8 bytes
             offset[i]     uint32   offset - base_offset + 1; 0 marks an empty slot

So a slot costs 20 bytes, and with the table filled to ``load_factor`` (Kafka's
``log.cleaner.io.buffer.load.factor``, 0.9) an entry costs 20 / 0.9 = 22.2 bytes of
``log.cleaner.dedupe.buffer.size``: under the 24 bytes the design allows, so one 8 GB pass maps
about 387 million keys. Offsets are stored relative to the map's ``base_offset`` (the first
dirty offset of the pass) in 32 bits, so one pass maps at most 2**32 - 2 offsets; the cleaner
stops the pass there as it stops when the table is full.

Two different keys with the same 128-bit digest would make the older one's last value look
superseded; at 2**-128 per pair this is Kafka's accepted risk (it uses MD5 the same way).

The probe sequence starts at ``lo % capacity`` and steps by ``1 + hi % (capacity - 1)``; with a
prime capacity every step visits every slot, so a lookup ends at the key or an empty slot.

Not thread-safe: each cleaner thread owns one map and reuses it pass after pass.
"""

from __future__ import annotations

import hashlib
import struct
from array import array
from collections.abc import Iterable, Sequence

__all__ = ["SLOT_BYTES", "OffsetMap", "largest_prime_at_most"]

SLOT_BYTES = 20
_MAX_RELATIVE = 0xFFFFFFFF - 1  # the stored value is relative + 1 and must fit uint32
_DIGEST = struct.Struct("<QQ").unpack
_MIN_SLOTS = 3


def _is_prime(n: int) -> bool:
    if n < 2:  # noqa: PLR2004
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in small:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in small:  # deterministic for n < 3.3e24
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def largest_prime_at_most(n: int) -> int:
    if n < _MIN_SLOTS:
        raise ValueError(f"an offset map needs at least {_MIN_SLOTS} slots, not {n}")
    while not _is_prime(n):
        n -= 1
    return n


class OffsetMap:
    """A fixed-memory map from key digests to the last offset seen for each key."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load factor must be in (0, 1], not {load_factor}")
        self.capacity = largest_prime_at_most(memory_bytes // SLOT_BYTES)
        self.max_entries = max(int(self.capacity * load_factor), 1)
        self.load_factor = load_factor
        self._lo = array("Q", bytes(8 * self.capacity))
        self._hi = array("Q", bytes(8 * self.capacity))
        self._off = array("I", bytes(4 * self.capacity))
        self.size = 0
        self.base_offset = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    # ------------------------------------------------------------------------ accounting

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the table (what ``log.cleaner.dedupe.buffer.size`` pays for)."""
        return sum(a.itemsize * len(a) for a in (self._lo, self._hi, self._off))

    @property
    def bytes_per_entry(self) -> float:
        """Table bytes divided by the most keys the table may hold."""
        return self.memory_bytes / self.max_entries

    @property
    def utilization(self) -> float:
        return self.size / self.max_entries

    @property
    def full(self) -> bool:
        return self.size >= self.max_entries

    def can_hold(self, offset: int) -> bool:
        """Whether ``offset`` is inside the 32-bit range relative to ``base_offset``."""
        return 0 <= offset - self.base_offset <= _MAX_RELATIVE

    # --------------------------------------------------------------------------- updates

    def clear(self, base_offset: int = 0) -> None:
        """Forget every entry; offsets put from now on must be >= ``base_offset``."""
        if self.size:
            # Only the offset column marks occupancy; stale digests are overwritten on insert.
            self._off = array("I", bytes(4 * self.capacity))
        self.size = 0
        self.base_offset = base_offset
        self.latest_offset = -1
        self.lookups = self.probes = 0

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Record ``offset`` as the latest offset of ``key``."""
        self.put_many((key,), (offset,))

    def put_many(
        self, keys: Sequence[bytes | bytearray | memoryview | None], offsets: Sequence[int]
    ) -> int:
        """Put ``keys[i] -> offsets[i]`` in order, stopping before the first that does not fit.

        Offsets must not decrease; ``None`` keys are skipped. Returns how many pairs were
        consumed: ``len(keys)`` unless a new key found the map full or an offset lay beyond
        the 32-bit range, in which case the caller ends its dirty range before that pair.
        """
        lo_col, hi_col, off_col = self._lo, self._hi, self._off
        capacity = self.capacity
        step_mod = capacity - 1
        size, limit = self.size, self.max_entries
        base = self.base_offset - 1
        blake2b, unpack = hashlib.blake2b, _DIGEST
        stored = 0
        probes = 0
        for key, offset in zip(keys, offsets, strict=True):
            relative = offset - base
            if relative > _MAX_RELATIVE + 1 or relative < 1:
                break
            if key is None:
                stored += 1
                continue
            lo, hi = unpack(blake2b(key, digest_size=16).digest())
            slot = lo % capacity
            taken = off_col[slot]
            if taken and (lo_col[slot] != lo or hi_col[slot] != hi):
                step = 1 + hi % step_mod
                while True:
                    probes += 1
                    slot += step
                    if slot >= capacity:
                        slot -= capacity
                    taken = off_col[slot]
                    if not taken or (lo_col[slot] == lo and hi_col[slot] == hi):
                        break
            if not taken:
                if size >= limit:
                    break
                lo_col[slot] = lo
                hi_col[slot] = hi
                size += 1
            off_col[slot] = relative
            stored += 1
        if stored:
            self.latest_offset = max(self.latest_offset, offsets[stored - 1])
        self.size = size
        self.lookups += stored
        self.probes += probes + stored
        return stored

    # --------------------------------------------------------------------------- lookups

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The latest offset put for ``key``, or -1."""
        return self.get_many((key,))[0]

    def get_many(self, keys: Iterable[bytes | bytearray | memoryview | None]) -> list[int]:
        """``get`` for each key; a ``None`` key gives -1."""
        lo_col, hi_col, off_col = self._lo, self._hi, self._off
        capacity = self.capacity
        step_mod = capacity - 1
        base = self.base_offset - 1
        blake2b, unpack = hashlib.blake2b, _DIGEST
        out: list[int] = []
        append = out.append
        for key in keys:
            if key is None:
                append(-1)
                continue
            lo, hi = unpack(blake2b(key, digest_size=16).digest())
            slot = lo % capacity
            taken = off_col[slot]
            if taken and (lo_col[slot] != lo or hi_col[slot] != hi):
                step = 1 + hi % step_mod
                while True:
                    slot += step
                    if slot >= capacity:
                        slot -= capacity
                    taken = off_col[slot]
                    if not taken or (lo_col[slot] == lo and hi_col[slot] == hi):
                        break
            append(taken + base if taken else -1)
        return out
