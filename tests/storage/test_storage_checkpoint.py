"""Checkpoint files: Kafka's text format, atomic replacement, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads.common.files import atomic_write
from ads.storage.checkpoint import (
    read_epoch_checkpoint,
    read_offset_checkpoint,
    write_epoch_checkpoint,
    write_offset_checkpoint,
)
from ads.storage.errors import CheckpointError


def test_checkpoint_offsets_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders", 0): 17, ("my.topic-with-dash", 12): 0, ("__consumer_offsets", 49): 5}
    write_offset_checkpoint(path, offsets)
    assert read_offset_checkpoint(path) == offsets
    assert path.read_text().splitlines()[:3] == ["0", "3", "orders 0 17"]
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_checkpoint_epochs_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_epoch_checkpoint(path, [(0, 0), (4, 120)])
    assert path.read_text() == "0\n2\n0 0\n4 120\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (4, 120)]


def test_checkpoint_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_offset_checkpoint(tmp_path / "nope") == {}
    assert read_epoch_checkpoint(tmp_path / "nope") == []


@pytest.mark.parametrize(("text", "message"), [
    ("", "missing version"),
    ("1\n0\n", "unsupported version"),
    ("0\nx\n", "bad entry count"),
    ("0\n2\nt 0 1\n", "expected 2 entries"),
    ("0\n1\nt 0\n", "malformed entry"),
    ("0\n1\nt zero 1\n", "not an integer"),
])
def test_checkpoint_malformed_file_raises(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=message) as info:
        read_offset_checkpoint(path)
    assert str(path) in str(info.value)


def test_checkpoint_atomic_write_replaces_and_ignores_leftover_tmp(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    write_offset_checkpoint(path, {("a", 0): 1})
    (tmp_path / "log-start-offset-checkpoint.tmp").write_text("garbage from a crash")
    assert read_offset_checkpoint(path) == {("a", 0): 1}
    write_offset_checkpoint(path, {("a", 0): 2})
    assert read_offset_checkpoint(path) == {("a", 0): 2}
    atomic_write(path, b"0\n0\n")
    assert read_offset_checkpoint(path) == {}
