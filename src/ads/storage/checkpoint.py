"""Atomic file replacement and Kafka's plain-text checkpoint files.

Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``), one per log directory::

    0                      version
    <count>                number of entries
    <topic> <partition> <offset>
    ...

Leader epoch checkpoint (``leader-epoch-checkpoint``), one per partition directory::

    0
    <count>
    <epoch> <start_offset>
    ...

Lines end with ``\\n``; fields are separated by one space (topic names cannot hold spaces).

Crash rule: files are replaced with ``ads.common.files.atomic_write`` (temporary file,
fsync, rename, directory fsync), so a reader sees either the old or the new content, never a
mix. A leftover ``.tmp`` is ignored (and overwritten next time). A missing file reads
as empty; a malformed one raises ``CheckpointError`` naming the file and the line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ads.common.files import atomic_write
from ads.common.partitions import TopicPartition
from ads.storage.errors import CheckpointError

__all__ = [
    "CHECKPOINT_VERSION",
    "read_epoch_checkpoint",
    "read_offset_checkpoint",
    "write_epoch_checkpoint",
    "write_offset_checkpoint",
]

CHECKPOINT_VERSION = 0


def _encode(lines: list[str]) -> bytes:
    header = f"{CHECKPOINT_VERSION}\n{len(lines)}\n"
    return (header + "".join(line + "\n" for line in lines)).encode("utf-8")


def _read_entries(path: Path, fields: int) -> list[list[str]]:
    try:
        # Bytes then decoded: cheaper than a text file object, and a broker start reads
        # one leader-epoch checkpoint per partition.
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not UTF-8 text") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:  # noqa: PLR2004
        raise CheckpointError(f"{path}: missing version or count line")
    if lines[0] != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    entries = lines[2:]
    if count != len(entries):
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    parsed = []
    for number, line in enumerate(entries, start=3):
        parts = line.split(" ")
        if len(parts) != fields:
            raise CheckpointError(f"{path}:{number}: malformed entry {line!r}")
        parsed.append(parts)
    return parsed


def _int(path: Path, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CheckpointError(f"{path}: {text!r} is not an integer") from None


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    atomic_write(path, _encode(lines))


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    result: dict[TopicPartition, int] = {}
    for topic, partition, offset in _read_entries(path, 3):
        if not topic:
            raise CheckpointError(f"{path}: empty topic name")
        result[TopicPartition(topic, _int(path, partition))] = _int(path, offset)
    return result


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    atomic_write(path, _encode([f"{epoch} {start}" for epoch, start in entries]))


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """``(epoch, start_offset)`` pairs in file order."""
    return [(_int(path, e), _int(path, s)) for e, s in _read_entries(path, 2)]
