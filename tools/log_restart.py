"""What a restart of many partition logs costs in the log manager alone, phase by phase.

    python tools/log_restart.py [--partitions 20000] [--dir DIR] [--idempotent]
        [--profile OUT.prof]

In one process, with ``ads.storage.manager.LogManager`` and no broker around it: makes
`--partitions` logs in a fresh directory (under `--dir`, default the system's temporary
directory; it is removed at the end) and appends one batch of one record to each (with
`--idempotent`, a batch of an idempotent producer, so each log has producer state to
snapshot), then times:

1. the clean shutdown with one unflushed batch in every log;
2. the start after it (clean);
3. a clean shutdown of logs unchanged since they were opened;
4. the start after it, one more batch appended to every log and the offset checkpoints
   written (as the broker's checkpoint task does), then no shutdown at all: the process
   "dies" (the directories are unlocked, nothing is flushed or closed; the page cache
   keeps what was written, as after a SIGKILL);
5. the start after that crash (unclean: every log has a batch past its recovery point);
6. the start after a second crash with nothing written since the previous start.

Every start checks that each log ends where it should. `--profile` writes a cProfile of
phases 1, 2, 5 and 6 to OUT.prof.<phase>.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ads.common.clock import SystemClock
from ads.records.batch import build_batch, validate_batches
from ads.storage.config import LogConfig
from ads.storage.manager import LogManager

T = TypeVar("T")
TOPICS = 20


def _manager(data: Path) -> LogManager:
    m = LogManager([data], clock=SystemClock(), default_config=LogConfig())
    m.lock_dirs()
    return m


def _append_all(m: LogManager, idempotent: bool, sequence: int) -> None:
    now = int(time.time() * 1000)
    for i, log in enumerate(m.logs()):
        if idempotent:
            data = build_batch([(None, b"v")], timestamp=now, producer_id=1000 + i,
                               producer_epoch=0, base_sequence=sequence)
        else:
            data = build_batch([(None, b"v")], timestamp=now)
        log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                   leader_epoch=0, now_ms=now, log_append_time=False)
        log.high_watermark = log.log_end_offset


def _check(m: LogManager, partitions: int, end: int) -> None:
    logs = m.logs()
    wrong = [lg for lg in logs if lg.log_end_offset != end]
    if len(logs) != partitions or wrong:
        raise SystemExit(f"{len(logs)} logs, {len(wrong)} not ending at {end}")


def _timed(results: list[tuple[str, float]], name: str, step: Callable[[], T],
           profile: Path | None = None) -> T:
    gc.collect()
    profiler = cProfile.Profile() if profile is not None else None
    began = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = step()
    if profiler is not None:
        profiler.disable()
    results.append((name, time.perf_counter() - began))
    if profiler is not None and profile is not None:
        profiler.dump_stats(f"{profile}.{len(results)}")
    return result


def _start(data: Path) -> LogManager:
    m = _manager(data)
    m.startup()
    return m


def run(data: Path, partitions: int, idempotent: bool, profile: Path | None
        ) -> list[tuple[str, float]]:
    results: list[tuple[str, float]] = []
    m = _manager(data)
    m.startup()
    for p in range(partitions):
        m.create_log(f"restart-{p % TOPICS:02d}", p // TOPICS)
    _append_all(m, idempotent, 0)
    _timed(results, "clean shutdown, one unflushed batch in every log", m.shutdown, profile)
    m = _timed(results, "start after the clean shutdown", lambda: _start(data), profile)
    _check(m, partitions, 1)
    if m.recovered_logs:
        raise SystemExit(f"{m.recovered_logs} logs recovered after a clean shutdown")
    _timed(results, "clean shutdown, every log unchanged", m.shutdown)
    m = _timed(results, "start after the second clean shutdown", lambda: _start(data))
    _check(m, partitions, 1)
    _append_all(m, idempotent, 1)
    m.checkpoint()
    m.unlock_dirs()  # the process dies: nothing flushed or closed
    del m
    m = _timed(results, "start after a crash, one batch past every recovery point",
               lambda: _start(data), profile)
    _check(m, partitions, 2)
    m.unlock_dirs()
    del m
    m = _timed(results, "start after a second crash, nothing written since the last start",
               lambda: _start(data), profile)
    _check(m, partitions, 2)
    m.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="log-restart-", dir=args.dir) as tmp:
        data = Path(tmp) / "data"
        results = run(data, args.partitions, args.idempotent, args.profile)
        shutil.rmtree(data, ignore_errors=True)
    print(f"{args.partitions:,} logs{' (idempotent producers)' if args.idempotent else ''}:")
    for name, seconds in results:
        print(f"  {name}: {seconds:.2f} s ({seconds / args.partitions * 1e6:.0f} us a log)")


if __name__ == "__main__":
    main()
