"""Property: random keyed workloads with deletes, cleaned at random points (some passes
killed between two file renames, some restarts unclean), always satisfy the four guarantees
against a model of every write."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ads.common.clock import ManualClock
from ads.storage.cleaner import OffsetMap, clean_log
from compaction_support import T0, Harness, check_guarantees, compact_config


class Crash(BaseException):
    pass


records = st.lists(st.tuples(st.integers(0, 11), st.booleans(), st.integers(1, 80)),
                   min_size=1, max_size=4)
appends = st.tuples(st.just("append"), st.lists(records, min_size=1, max_size=8))
operations = st.lists(
    st.one_of(
        appends, appends, appends,
        st.tuples(st.just("advance"), st.integers(1, 4_000)),
        st.tuples(st.just("clean"), st.booleans()),
        st.tuples(st.just("crash_clean"), st.integers(0, 40)),
        st.tuples(st.just("restart"), st.booleans()),
        st.tuples(st.just("roll"), st.none()),
    ),
    min_size=5,
    max_size=40,
)


def crashing_pass(h: Harness, after_renames: int) -> None:
    renames = 0
    real = Path.rename

    def rename(self: Path, target: Path) -> Path:
        nonlocal renames
        if renames >= after_renames:
            raise Crash
        renames += 1
        return real(self, target)

    plan = h.cleaner.plan(h.log)
    with mock.patch.object(Path, "rename", rename):
        try:
            clean_log(plan, OffsetMap(1 << 14), clock=h.clock, run_on_owner=lambda f: f(),
                      io_buffer_size=512)
        except Crash:
            pass
    h.restart(clean=False)


# ADS_PROPERTY_EXAMPLES raises the example count for a longer local run.
@settings(max_examples=int(os.environ.get("ADS_PROPERTY_EXAMPLES", "30")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations,
       segment_bytes=st.sampled_from([400, 1200]),
       min_lag=st.sampled_from([0, 3_000]),
       retention=st.sampled_from([1_000, 8_000]),
       codec=st.sampled_from([0, 1]))
def test_compaction_property_guarantees_hold(ops: list[tuple[str, object]], segment_bytes: int,
                                             min_lag: int, retention: int, codec: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(os, "fsync", lambda fd: None):
        clock = ManualClock(T0)
        h = Harness(Path(tmp), clock, compact_config(
            segment_bytes=segment_bytes, min_compaction_lag_ms=min_lag,
            delete_retention_ms=retention))
        # Every example ends with everything sealed, cleaned, and cleaned again after the
        # tombstones' delete horizon.
        ops = [*ops, ("clean", True), ("advance", retention + 1), ("clean", True)]
        for op, arg in ops:
            if op == "append":
                assert isinstance(arg, list)
                for batch in arg:
                    h.append([(b"key-%d" % k, None if delete else b"v" * size)
                              for k, delete, size in batch], compression=codec)
            elif op == "advance":
                assert isinstance(arg, int)
                clock.advance(arg)
            elif op == "clean":
                if arg:
                    h.log.roll()
                stats = h.clean()
                if stats is not None:
                    event("a pass removed records" if stats.messages_written
                          < stats.messages_read else "a pass removed nothing")
            elif op == "crash_clean":
                assert isinstance(arg, int)
                crashing_pass(h, arg)
            elif op == "restart":
                h.restart(clean=bool(arg))
            else:
                h.log.roll()
            now = clock.time_ms()
            seen = h.read()
            check_guarantees(
                h.writes, seen,
                keep_from_offset=h.log.active_segment.base_offset,
                keep_tombstones_after_ms=now - retention + 1,
            )
            young = {w[0] for w in h.writes if w[3] > now - min_lag}
            assert young <= {s[0] for s in seen}, "a record younger than the lag was removed"
        if not min_lag:
            # Fully compacted: exactly the last value of each key whose last write is a value.
            last = {w[1]: w for w in h.writes}
            assert sorted(o for o, _, _ in seen) == sorted(
                w[0] for w in last.values() if w[2] is not None)
        h.manager.shutdown()
