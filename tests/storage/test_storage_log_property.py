"""Property: random appends, reads, rolls, truncations and restarts agree with a list model."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ads.common.clock import ManualClock
from ads.records.batch import build_batch, iter_batches, scan_valid_prefix, validate_batches
from ads.storage.config import LogConfig
from ads.storage.log import Log

T0 = 1_700_000_000_000


@dataclass
class Batch:
    base: int
    last: int
    size: int
    max_ts: int


class Model:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.log_start = 0
        self.hwm = 0

    @property
    def leo(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.log_start

    def expected_read(self, offset: int, max_bytes: int, max_offset: int,
                      min_one: bool) -> list[int]:
        out: list[int] = []
        used = 0
        for b in self.batches:
            if b.last < offset:
                continue
            if b.last >= max_offset:
                break
            if used + b.size > max_bytes and not (min_one and not out):
                break
            out.append(b.base)
            used += b.size
        return out

    def expected_timestamp(self, ts: int) -> tuple[int, int] | None:
        for b in self.batches:
            if b.last >= self.log_start and b.max_ts >= ts:
                return max(b.base, self.log_start), b.max_ts
        return None


APPEND = st.tuples(st.just("append"), st.integers(1, 6), st.integers(0, 150),
                   st.integers(-1, 1000))
# max_bytes is random, or (exact >= 0) the size of the next ``exact`` batches plus -1, 0 or 1.
READ = st.tuples(st.just("read"), st.floats(0, 1), st.integers(1, 1500), st.booleans(),
                 st.floats(0, 1), st.sampled_from(["any", "base", "last"]),
                 st.integers(-1, 4), st.integers(-1, 1))
OTHER = st.one_of(
    st.tuples(st.just("roll")),
    st.tuples(st.just("hwm"), st.floats(0, 1)),
    st.tuples(st.just("delete_records"), st.floats(0, 1)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("timestamp"), st.integers(-1, 1001)),
    st.tuples(st.just("reopen"), st.booleans()),
)
# Appends and reads dominate so that most examples read from a multi-segment log.
ops = st.lists(
    st.integers(0, 9).flatmap(lambda k: APPEND if k < 4 else READ if k < 7 else OTHER),
    min_size=10,
    max_size=80,
)


def _pick(low: int, high: int, fraction: float) -> int:
    return low + int((high - low) * fraction)


def _open(path: Path, config: LogConfig, log: Log | None, model: Model, clean: bool) -> Log:
    recovery_point = 0
    if log is not None:
        recovery_point = log.recovery_point
        if clean:
            log.flush()
            log.close()
        else:  # killed: no producer snapshot, no flush, files just closed
            for segment in log.segments:
                segment.close()
    return Log.open(path, "p", 0, config, clock=ManualClock(T0), recovery_point=recovery_point,
                    log_start_offset=model.log_start, clean_shutdown=clean,
                    high_watermark=model.hwm)


def _append(log: Log, model: Model, op: tuple[Any, ...], segment_bytes: int) -> None:
    _, records, size, ts = op
    data = build_batch([(None, b"r" * size)] * records, timestamp=ts)
    if len(data) > segment_bytes:
        return
    info = log.append(memoryview(data), validate_batches(data, max_batch_bytes=1 << 20),
                      leader_epoch=1, now_ms=T0, log_append_time=False)
    assert info.first_offset == model.leo
    model.batches.append(Batch(model.leo, model.leo + records - 1, len(data), ts))


def _read(log: Log, model: Model, op: tuple[Any, ...]) -> None:
    _, where, max_bytes, min_one, cap, aim, exact, delta = op
    offset = _pick(model.log_start, model.leo, where)
    live = [b for b in model.batches if b.last >= model.log_start]
    if aim != "any" and live:
        batch = live[_pick(0, len(live) - 1, where)]
        offset = max(batch.base if aim == "base" else batch.last, model.log_start)
    if exact >= 0:
        following = [b.size for b in model.batches if b.last >= offset][:exact]
        max_bytes = max(sum(following) + delta, 0)
    max_offset = _pick(offset, model.leo, cap)
    result = log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
    data = result.read_bytes()
    assert scan_valid_prefix(data)[0] == len(data)
    got = [h.base_offset for _, h in iter_batches(data)]
    assert got == model.expected_read(offset, max_bytes, max_offset, min_one)
    assert result.first_offset == (got[0] if got else None)


def _truncate(log: Log, model: Model, where: float) -> None:
    bounds = [b.base for b in model.batches if b.base >= model.log_start]
    target = _pick(0, len(bounds), where)
    if target < len(bounds):
        log.truncate_to(bounds[target])
        model.batches = [b for b in model.batches if b.base < bounds[target]]
        model.hwm = min(model.hwm, model.leo)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, segment_bytes=st.sampled_from([400, 900, 100_000]),
       index_interval=st.sampled_from([0, 150, 4096]))
def test_log_property_matches_model(ops: list[tuple], segment_bytes: int,  # type: ignore[type-arg]
                                    index_interval: int) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p-0"
        model = Model()
        log = _open(path, config, None, model, True)
        for op in ops:
            kind = op[0]
            if kind == "append":
                _append(log, model, op, segment_bytes)
            elif kind == "read":
                _read(log, model, op)
            elif kind == "roll":
                log.roll()
            elif kind == "hwm":
                model.hwm = _pick(model.log_start, model.leo, op[1])
                log.high_watermark = model.hwm
            elif kind == "delete_records":
                target = _pick(model.log_start, model.hwm, op[1])
                assert log.delete_records(target) == max(target, model.log_start)
                model.log_start = max(target, model.log_start)
            elif kind == "truncate":
                _truncate(log, model, op[1])
            elif kind == "timestamp":
                found = log.fetch_offset_by_timestamp(op[1]) if op[1] >= 0 else None
                if op[1] >= 0:
                    expected = model.expected_timestamp(op[1])
                    assert (found[:2] if found else None) == expected
            elif kind == "reopen":
                log = _open(path, config, log, model, op[1])
            assert (log.log_start_offset, log.log_end_offset) == (model.log_start, model.leo)
            assert log.high_watermark == max(model.log_start, min(model.hwm, model.leo))
        log.close()
