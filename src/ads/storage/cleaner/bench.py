"""Cleaner throughput: ``python -m ads.storage.cleaner.bench [--size-mb 2048] [--dir DIR]``.

Writes a compacted log of ``--size-mb`` of 1 KB values whose keys are drawn from a space of
10% of the record count (so about 90% of the records are superseded), then runs one cleaning
pass over it and prints MB/s of log read (the log's size over the pass's wall time, offset
map building included; also over its CPU time, which a busy machine does not distort) and
the offset map's bytes per entry. The log is written through
``Log.append`` in 16-record uncompressed batches (about a producer's ``batch.size`` of 16 KB)
with 16-byte keys.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from ads.common.clock import SystemClock
from ads.records.batch import ATTRIBUTES_OFFSET, build_batch, validate_batches
from ads.records.crc import crc32c
from ads.storage.cleaner.cleaner import clean_log, plan_cleaning
from ads.storage.cleaner.offset_map import OffsetMap
from ads.storage.config import LogConfig
from ads.storage.log import Log

__all__ = ["main", "run"]

_RECORDS_PER_BATCH = 16


def _write_log(directory: Path, size_bytes: int, value_bytes: int, unique: float,
               segment_bytes: int, seed: int) -> tuple[Log, int]:
    clock = SystemClock()
    config = LogConfig(segment_bytes=segment_bytes, cleanup_policy=("compact",))
    log = Log.open(directory, "bench", 0, config, clock=clock, recovery_point=0,
                   log_start_offset=0, clean_shutdown=True)
    rng = random.Random(seed)
    approx_records = max(size_bytes // (value_bytes + 30), _RECORDS_PER_BATCH)
    key_space = max(int(approx_records * unique), 1)
    value = rng.randbytes(value_bytes)
    now = clock.time_ms()
    # Encoding records in Python is slower than cleaning them, so one batch is encoded with
    # placeholder keys of fixed width and each appended batch is that template with fresh
    # keys written in place and its CRC recomputed.
    placeholder = [b"k%015d" % i for i in range(_RECORDS_PER_BATCH)]
    template = bytearray(build_batch([(k, value) for k in placeholder], timestamp=now))
    slots = [template.index(k) for k in placeholder]
    headers = validate_batches(template, max_batch_bytes=1 << 30)
    written = 0
    while written < size_bytes:
        for pos in slots:
            template[pos : pos + 16] = b"k%015d" % rng.randrange(key_space)
        crc = crc32c(memoryview(template)[ATTRIBUTES_OFFSET:])
        template[17:21] = crc.to_bytes(4, "big")
        log.append(memoryview(template), headers, leader_epoch=0, now_ms=now,
                   log_append_time=False)
        written += len(template)
    log.roll()
    log.high_watermark = log.log_end_offset
    return log, key_space


def run(size_mb: int, *, directory: Path | None = None, value_bytes: int = 1000,
        unique: float = 0.1, segment_bytes: int = 1 << 30,
        dedupe_buffer_size: int = 134217728, seed: int = 1) -> dict[str, float]:
    """Build the log, clean it once, return the figures."""
    base = Path(tempfile.mkdtemp(prefix="ads-cleaner-bench-", dir=directory))
    try:
        started = time.monotonic()
        log, key_space = _write_log(base / "bench-0", size_mb << 20, value_bytes, unique,
                                    segment_bytes, seed)
        write_s = time.monotonic() - started
        size = log.size_bytes
        offset_map = OffsetMap(dedupe_buffer_size)
        plan = plan_cleaning(log, None, SystemClock().time_ms())
        cpu = time.process_time()
        _, stats = clean_log(plan, offset_map, clock=SystemClock(), run_on_owner=lambda f: f(),
                             io_buffer_size=1 << 20)
        cpu = time.process_time() - cpu
        result = {
            "log_mb": size / 1e6,
            "records": stats.messages_read,
            "keys": stats.keys,
            "key_space": key_space,
            "write_s": write_s,
            "clean_s": stats.duration_s,
            "map_s": stats.map_duration_s,
            "clean_cpu_s": cpu,
            "clean_mb_per_s": size / 1e6 / stats.duration_s,
            "clean_mb_per_cpu_s": size / 1e6 / cpu,
            "map_mb_per_s": stats.map_bytes_read / 1e6 / stats.map_duration_s,
            "bytes_read_mb": stats.bytes_read / 1e6,
            "written_mb": stats.bytes_written / 1e6,
            "map_memory_bytes": offset_map.memory_bytes,
            "map_bytes_per_entry": offset_map.bytes_per_entry,
            "map_slot_bytes": offset_map.memory_bytes / offset_map.capacity,
        }
        log.close()
        return result
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ads.storage.cleaner.bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=2048)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--unique", type=float, default=0.1, help="distinct keys / records")
    parser.add_argument("--segment-bytes", type=int, default=1 << 30)
    parser.add_argument("--dedupe-buffer-size", type=int, default=134217728)
    parser.add_argument("--dir", type=Path, help="where to write the log (default: /tmp)")
    args = parser.parse_args(argv)
    result = run(args.size_mb, directory=args.dir, value_bytes=args.value_bytes,
                 unique=args.unique, segment_bytes=args.segment_bytes,
                 dedupe_buffer_size=args.dedupe_buffer_size)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
