"""`ads log`: look at partition data on disk, like Kafka's `kafka-dump-log.sh`.

- `ads log dump --segment FILE...` prints each batch of a segment (`.log`, also a
  `.cleaned`, `.swap` or `.deleted` copy) with its header fields, and with `--print-data`
  every record; `.index` and `.timeindex` files print their entries. A torn or corrupt tail
  is reported, not fatal.
- `ads log describe --data-dir DIR` prints, per partition directory, the segments, the first
  dirty offset from `cleaner-offset-checkpoint` and the cleanable ratio the log cleaner
  compares with `min.cleanable.dirty.ratio`. It reads the files only, so it works on a
  stopped broker's data or next to a running one; offline it cannot know the high watermark
  or `min.compaction.lag.ms`, so the dirty section ends at the active segment.

Both only read files; neither talks to a broker.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ads.cli.common import UsageError, run_command
from ads.common.partitions import TopicPartition
from ads.records import batch as rb
from ads.records.batch import BatchHeader
from ads.records.crc import crc32c
from ads.records.errors import RecordError
from ads.storage.checkpoint import read_offset_checkpoint
from ads.storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from ads.storage.cleaner.cleaner import cleanable_ratio
from ads.storage.errors import CheckpointError
from ads.storage.manager import LOG_START_OFFSET_CHECKPOINT, parse_partition_dir

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CHUNK = 1 << 20
_MAX_INFLATED = 1 << 28


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    top = sub.add_parser("log", help=help_text)
    verbs = top.add_subparsers(dest="log_command", required=True, metavar="VERB")

    p = verbs.add_parser("dump", help="print the batches and records of segment files")
    p.add_argument("--segment", "--files", dest="segments", action="append", required=True,
                   metavar="FILE", help="a .log, .index or .timeindex file (repeatable; "
                   "commas separate several, as kafka-dump-log.sh --files does)")
    p.add_argument("--print-data", "--print-data-log", dest="print_data",
                   action="store_true", help="also print each record's key and value")
    p.set_defaults(func=run_command("log dump", dump), bootstrap_server="-")

    p = verbs.add_parser("describe", help="segments and cleanable ratio per partition")
    p.add_argument("--data-dir", required=True, type=Path, metavar="DIR",
                   help="a log directory (the broker's log.dirs entry)")
    p.add_argument("--topic", help="only this topic's partitions")
    p.set_defaults(func=run_command("log describe", describe), bootstrap_server="-")


# -------------------------------------------------------------------------------- dump


def dump(args: argparse.Namespace) -> int:
    out = sys.stdout
    for name in (n for arg in args.segments for n in arg.split(",") if n):
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"{path} is not a file")
        out.write(f"Dumping {path}\n")
        stem = path.name.split(".")[0]
        if path.name.startswith(stem + ".index"):
            _dump_index(path, int(stem))
        elif path.name.startswith(stem + ".timeindex"):
            _dump_time_index(path, int(stem))
        else:
            out.write(f"Log starting offset: {int(stem) if stem.isdigit() else '?'}\n")
            _dump_log(path, args.print_data)
    return 0


def _iter_file_batches(fd: int, size: int) -> Iterator[tuple[int, bytes, BatchHeader]]:
    position = 0
    while position < size:
        head = os.pread(fd, rb.BATCH_OVERHEAD, position)
        header = rb.read_batch_header(head)
        data = os.pread(fd, header.size, position)
        if len(data) < header.size:
            raise RecordError(f"incomplete batch of {header.size} bytes")
        yield position, data, header
        position += header.size


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _dump_log(path: Path, print_data: bool) -> None:
    out = sys.stdout
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        end = 0
        try:
            for position, data, h in _iter_file_batches(fd, size):
                crc_valid = crc32c(memoryview(data)[rb.ATTRIBUTES_OFFSET:]) == h.crc
                horizon = h.delete_horizon_ms
                ts_type = "LogAppendTime" if h.timestamp_type == 1 else "CreateTime"
                out.write(
                    f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} "
                    f"count: {h.records_count} baseSequence: {h.base_sequence} "
                    f"lastSequence: {h.last_sequence} producerId: {h.producer_id} "
                    f"producerEpoch: {h.producer_epoch} "
                    f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                    f"isTransactional: {_bool(h.is_transactional)} "
                    f"isControl: {_bool(h.is_control)} "
                    f"deleteHorizonMs: {'none' if horizon is None else horizon} "
                    f"position: {position} {ts_type}: {h.max_timestamp} size: {h.size} "
                    f"magic: {h.magic} compresscodec: {_codec(h.compression)} "
                    f"crcValid: {_bool(crc_valid)}\n"
                )
                if print_data:
                    _dump_records(data, h)
                end = position + h.size
        except RecordError as exc:
            out.write(f"Found {size - end} invalid bytes at position {end}: {exc}\n")
    finally:
        os.close(fd)


def _codec(codec: int) -> str:
    return _CODECS[codec] if codec < len(_CODECS) else str(codec)


def _show(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data.hex()


def _dump_records(data: bytes, h: BatchHeader) -> None:
    out = sys.stdout
    ts_type = "LogAppendTime" if h.timestamp_type == 1 else "CreateTime"
    for i, rec in enumerate(rb.decode_records(data, max_uncompressed_bytes=_MAX_INFLATED,
                                              check_crc=False)):
        if h.is_control:
            kind, epoch = rb.parse_control_record(rec.key, rec.value)
            name = kind.name if isinstance(kind, rb.ControlRecordType) else str(kind)
            out.write(f"| offset: {rec.offset} {ts_type}: {rec.timestamp} "
                      f"endTxnMarker: {name} coordinatorEpoch: {epoch}\n")
            continue
        sequence = h.base_sequence + i if h.base_sequence >= 0 else -1
        out.write(
            f"| offset: {rec.offset} {ts_type}: {rec.timestamp} "
            f"keySize: {-1 if rec.key is None else len(rec.key)} "
            f"valueSize: {-1 if rec.value is None else len(rec.value)} "
            f"sequence: {sequence} headerKeys: [{','.join(k for k, _ in rec.headers)}] "
            f"key: {_show(rec.key)} payload: {_show(rec.value)}\n"
        )


def _dump_index(path: Path, base: int) -> None:
    data = path.read_bytes()
    usable = len(data) - len(data) % _OFFSET_ENTRY.size
    for relative, position in _OFFSET_ENTRY.iter_unpack(data[:usable]):
        sys.stdout.write(f"offset: {base + relative} position: {position}\n")


def _dump_time_index(path: Path, base: int) -> None:
    data = path.read_bytes()
    usable = len(data) - len(data) % _TIME_ENTRY.size
    for timestamp, relative in _TIME_ENTRY.iter_unpack(data[:usable]):
        sys.stdout.write(f"timestamp: {timestamp} offset: {base + relative}\n")


# ---------------------------------------------------------------------------- describe


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_offset_checkpoint(path)
    except CheckpointError:
        return {}


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    """What a partition directory shows about its log and its cleaning."""

    segments: int
    size: int
    log_start_offset: int
    active_segment: int
    first_dirty_offset: int | None
    cleanable_ratio: float


def scan_data_dir(data_dir: Path, topic: str | None = None
                  ) -> dict[TopicPartition, PartitionFiles]:
    """Per partition of a broker's log directory: segments, size and cleanable ratio (the
    figure the log cleaner compares with `min.cleanable.dirty.ratio`), from the files only."""
    dirty = _read_checkpoint(data_dir / CLEANER_OFFSET_CHECKPOINT)
    starts = _read_checkpoint(data_dir / LOG_START_OFFSET_CHECKPOINT)
    found: dict[TopicPartition, PartitionFiles] = {}
    for part_dir in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        tp = parse_partition_dir(part_dir.name)
        if tp is None or (topic and tp[0] != topic):
            continue
        logs = sorted(
            (int(p.name[:20]), p.stat().st_size)
            for p in part_dir.iterdir()
            if p.name.endswith(".log") and len(p.name) == 24 and p.name[:20].isdigit()  # noqa: PLR2004
        )
        if not logs:
            continue
        bases = [b for b, _ in logs]
        sealed = [(b, bases[i + 1], size) for i, (b, size) in enumerate(logs[:-1])]
        start = max(starts.get(tp, bases[0]), bases[0])
        first_dirty = max(dirty.get(tp, start), start)
        clean, cleanable = cleanable_ratio(sealed, start, first_dirty, bases[-1])
        found[tp] = PartitionFiles(
            segments=len(logs), size=sum(size for _, size in logs), log_start_offset=start,
            active_segment=bases[-1], first_dirty_offset=first_dirty if tp in dirty else None,
            cleanable_ratio=cleanable / (clean + cleanable) if clean + cleanable else 0.0)
    # Directory names sort as text (t-10 before t-2); partitions sort as numbers.
    return dict(sorted(found.items()))


def describe(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    if not data_dir.is_dir():
        raise UsageError(f"{data_dir} is not a directory")
    out = sys.stdout
    for (topic, partition), f in scan_data_dir(data_dir, args.topic).items():
        first_dirty = "none" if f.first_dirty_offset is None else f.first_dirty_offset
        out.write(
            f"Topic: {topic}\tPartition: {partition}\tSegments: {f.segments}\t"
            f"Size: {f.size}\tLogStartOffset: {f.log_start_offset}\t"
            f"ActiveSegment: {f.active_segment}\tFirstDirtyOffset: {first_dirty}\t"
            f"CleanableRatio: {f.cleanable_ratio:.3f}\n"
        )
    return 0
