"""Offset and time indexes: byte layout, lookups, truncation, sanity checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ads.storage.errors import CorruptIndexError
from ads.storage.index import OffsetIndex, TimeIndex
from ads.storage.open_files import OpenFiles

FILES = OpenFiles()


def test_index_offset_layout_and_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024, FILES)
    index.reset()
    for offset, position in ((109, 4100), (125, 8300), (140, 12500)):
        index.append(offset, position)
    raw = (tmp_path / "00000000000000000100.index").read_bytes()
    assert raw == struct.pack(">iiiiii", 9, 4100, 25, 8300, 40, 12500)
    assert index.lookup(100) == (100, 0)
    assert index.lookup(109) == (109, 4100)
    assert index.lookup(124) == (109, 4100)
    assert index.lookup(10_000) == (140, 12500)
    assert index.lookup_position(8299) == (109, 4100)
    assert index.lookup_position(8300) == (125, 8300)
    with pytest.raises(ValueError, match="not past"):
        index.append(140, 13000)
    index.truncate_to(125)
    assert index.entries == 1 and len(raw) // 8 == 3
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 8
    index.close_writer()


def test_index_offset_reload_and_full(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 24, FILES)
    index.reset()
    for i in range(3):
        index.append(i * 10 + 5, i * 100 + 50)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(99, 999)
    index.close_writer()
    again = OffsetIndex(path, 0, 24, FILES)
    again.load(log_size=1000)
    assert again.lookup(17) == (15, 150) and again.entries == 3


@pytest.mark.parametrize("raw", [
    b"\x00" * 7,
    struct.pack(">iiii", 5, 100, 3, 200),  # offsets go backwards
    struct.pack(">iiii", 5, 100, 6, 90),  # positions go backwards
    struct.pack(">ii", 5, 5000),  # past the end of the log
])
def test_index_offset_sanity_check(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(raw)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 1024, FILES).load(log_size=1000)


def test_index_time_layout_lookup_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, 1200, FILES)
    index.reset()
    index.maybe_append(-1, 50)  # no timestamp: never indexed
    index.maybe_append(1000, 52)
    index.maybe_append(1000, 55)  # not larger: skipped
    index.maybe_append(2000, 60)
    index.maybe_append(1500, 61)  # smaller: skipped
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)
    assert index.lookup(999) == (-1, 50)
    assert index.lookup(1000) == (1000, 52)
    assert index.lookup(1999) == (1000, 52)
    assert index.lookup(5000) == (2000, 60)
    index.close_writer()
    cold = TimeIndex(path, 50, 1200, FILES)
    assert cold.last_entry() == (2000, 60)  # read without loading
    cold.load(log_size=100)
    cold.truncate_to(60)
    assert cold.last_entry() == (1000, 52)
    cold.close_writer()
    path.write_bytes(struct.pack(">qiqi", 2000, 1, 1000, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 50, 1200, FILES).load(log_size=100)


def test_index_missing_file_with_data_is_corrupt(tmp_path: Path) -> None:
    OffsetIndex(tmp_path / "x.index", 0, 64, FILES).load(log_size=0)
    with pytest.raises(CorruptIndexError, match="missing"):
        OffsetIndex(tmp_path / "x.index", 0, 64, FILES).load(log_size=10)
