"""The cleaner's offset map: a fixed-memory key -> last offset table (not a dict)."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ads.storage.cleaner.offset_map import SLOT_BYTES, OffsetMap, largest_prime_at_most


def test_offset_map_latest_offset_wins() -> None:
    m = OffsetMap(10_000)
    m.clear(100)
    assert m.put_many([b"a", b"b", b"a"], [100, 101, 105]) == 3
    assert m.get(b"a") == 105
    assert m.get(b"b") == 101
    assert m.get(b"zz") == -1
    assert m.get_many([b"a", None, b"c"]) == [105, -1, -1]
    assert m.size == 2
    assert m.latest_offset == 105


def test_offset_map_memory_within_buffer_and_24_bytes_per_entry() -> None:
    for budget in (1 << 10, 1 << 16, 10_000_019, 134217728):
        m = OffsetMap(budget, load_factor=0.9)
        assert m.memory_bytes <= budget
        assert m.memory_bytes / m.capacity == SLOT_BYTES
        assert m.bytes_per_entry <= 24
    # The seed's figure: an 8 GB buffer maps well over 8 GB / 24 bytes of keys.
    slots = largest_prime_at_most((8 << 30) // SLOT_BYTES)
    assert int(slots * 0.9) >= (8 << 30) // 24


def test_offset_map_fills_up_without_growing() -> None:
    m = OffsetMap(2000, load_factor=0.9)
    keys = [b"key-%d" % i for i in range(m.max_entries + 10)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        stored = m.put_many(keys, list(range(len(keys))))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert stored == m.max_entries
    assert m.full
    assert grown < 4096  # no Python object per entry: the table was preallocated
    # Keys already present still update when the map is full.
    assert m.put_many([keys[0]], [len(keys)]) == 1
    assert m.get(keys[0]) == len(keys)
    assert all(m.get(keys[i]) == i for i in range(1, stored))
    assert m.get(keys[-1]) == -1


def test_offset_map_stops_beyond_32_bit_offsets() -> None:
    m = OffsetMap(4096)
    m.clear(10)
    assert m.can_hold(10 + 0xFFFFFFFE)
    assert not m.can_hold(10 + 0xFFFFFFFF)
    assert m.put_many([b"a", b"b"], [10 + 0xFFFFFFFE, 10 + 0xFFFFFFFF]) == 1
    assert m.get(b"a") == 10 + 0xFFFFFFFE
    assert m.put_many([b"c"], [9]) == 0


def test_offset_map_clear_forgets() -> None:
    m = OffsetMap(4096)
    m.put_many([b"a", b"b"], [1, 2])
    m.clear(50)
    assert m.size == 0
    assert m.get(b"a") == -1
    m.put(b"a", 51)
    assert m.get(b"a") == 51


def test_offset_map_rejects_tiny_buffers() -> None:
    with pytest.raises(ValueError, match="at least"):
        OffsetMap(SLOT_BYTES * 2)
    with pytest.raises(ValueError, match="load factor"):
        OffsetMap(4096, load_factor=0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=0, max_size=6), st.integers(0, 5)), max_size=300),
       st.integers(min_value=3 * SLOT_BYTES, max_value=60 * SLOT_BYTES))
def test_offset_map_agrees_with_a_dict(ops: list[tuple[bytes, int]], memory: int) -> None:
    m = OffsetMap(memory, load_factor=0.8)
    m.clear(1000)
    model: dict[bytes, int] = {}
    offset = 1000
    for key, gap in ops:
        offset += gap
        stored = m.put_many([key], [offset])
        if key in model or len(model) < m.max_entries:
            assert stored == 1
            model[key] = offset
        else:
            assert stored == 0
    assert m.size == len(model)
    for key, expected in model.items():
        assert m.get(key) == expected
    assert m.get(b"never-put-this-key") == -1
