"""A follower's cost per replicated append, in process: the replica manager's one append
path (origin REPLICATION) against the partition's own follower append it wraps.

    python tools/replicated_append_cost.py [--appends N] [--rounds R]

Appends N one-record batches (100-byte values) to a followed partition each way, the ways
alternating R times, and prints the microseconds per append of each round. Which build it
measures is the one `import ads` finds (`ADS_PURE_PYTHON=1`: the sources).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import ads
from ads.common.clock import ManualClock
from ads.common.partitions import TopicPartition
from ads.records.batch import build_batch
from ads.replication.partition import AppendOrigin
from ads.replication.replica_manager import ReplicaManager
from ads.storage.config import LogConfig
from ads.storage.log import Log

T0 = 1_700_000_000_000
KEY = TopicPartition("t", 0)


def run(way: str, appends: int) -> float:
    batches = [memoryview(build_batch([(None, b"x" * 100)], timestamp=T0, base_offset=i))
               for i in range(appends)]
    with tempfile.TemporaryDirectory() as folder:
        clock = ManualClock(T0)
        rm = ReplicaManager(2, clock=clock)
        log = Log.open(Path(folder) / "t-0", "t", 0, LogConfig(), clock=clock,
                       recovery_point=0, log_start_offset=0, clean_shutdown=True)
        part = rm.add_partition("t", uuid.uuid4(), 0, log, 0, LogConfig(), leader=False)
        rm.become_follower("t", 0, 0, 1)
        start = time.perf_counter()
        if way == "partition":
            for i, batch in enumerate(batches):
                part.append_replicated(batch, i, 0)
        else:
            for i, batch in enumerate(batches):
                rm.append_records({KEY: batch}, AppendOrigin.REPLICATION, 1, 0,
                                  leader_offsets={KEY: (i, 0)})
        elapsed = time.perf_counter() - start
        assert part.log_end_offset == appends
        log.close()
    return elapsed / appends * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"compiled modules: {len(ads.COMPILED)}")
    for _ in range(args.rounds):
        for way in ("partition", "replica-manager"):
            print(f"{way:16} {run(way, args.appends):6.2f} us per append")


if __name__ == "__main__":
    main()
