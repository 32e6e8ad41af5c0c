"""The parallel run's scheduling (tests/file_lanes.py): the longest file first, and a Spark
file never handed to a worker while another worker still runs one."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

from file_lanes import FileLanes, read_times


def lanes(queue: list[str], times: dict[str, float]) -> FileLanes:
    # The scheduler's state alone: its constructor wants pytest-xdist's running session.
    s = FileLanes.__new__(FileLanes)
    s.workqueue = OrderedDict((scope, {f"{scope}::t": False}) for scope in queue)
    s.assigned_work = {}
    s.times = times
    return s


def test_file_lanes_longest_file_first_unknown_ones_last() -> None:
    s = lanes(["tests/a.py", "tests/b.py", "tests/c.py"], {"tests/b.py": 90.0,
                                                           "tests/c.py": 5.0})
    worker: Any = object()
    s.assigned_work[worker] = {}
    assert s._next_scope(worker) == "tests/b.py"
    s.workqueue.pop("tests/b.py")
    assert s._next_scope(worker) == "tests/c.py"


def test_file_lanes_one_spark_file_at_a_time() -> None:
    s = lanes(["tests/spark/test_x.py", "tests/broker/test_y.py"],
              {"tests/spark/test_x.py": 200.0, "tests/broker/test_y.py": 10.0})
    running, idle = object(), object()
    # `running` still has a test of a Spark file to run, `idle` has finished its file.
    s.assigned_work = {running: {"tests/spark/test_w.py": {"tests/spark/test_w.py::t": False}},
                       idle: {}}
    assert s._next_scope(idle) == "tests/broker/test_y.py"  # not the longer Spark file
    assert s._next_scope(running) == "tests/spark/test_x.py"  # its own lane: it may
    s.assigned_work[running]["tests/spark/test_w.py"]["tests/spark/test_w.py::t"] = True
    assert s._next_scope(idle) == "tests/spark/test_x.py"  # the lane is free again


def test_file_lanes_times_table_names_files_that_exist() -> None:
    root = Path(__file__).parent.parent
    times = read_times()
    assert times and all((root / name).is_file() for name in times)
