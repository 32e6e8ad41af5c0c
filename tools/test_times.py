"""Write tests/file_times.txt from a JUnit report of a whole run of the suite.

    pytest -q -p no:xdist --junitxml=/tmp/suite.xml
    python tools/test_times.py /tmp/suite.xml > tests/file_times.txt

The parallel run (tests/file_lanes.py) starts the longest files first; it reads their times
from that table. Files under MIN_SECONDS are left out: they fill the gaps at the end in any
order.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET  # noqa: S405 - our own pytest report
from collections import Counter

MIN_SECONDS = 5.0


def file_times(report: str) -> Counter[str]:
    """Seconds per test file, summed over its test cases (set-up and teardown included)."""
    times: Counter[str] = Counter()
    for case in ET.parse(report).iter("testcase"):  # noqa: S314 - our own pytest report
        parts = case.get("classname", "").split(".")
        last = max(i for i, part in enumerate(parts) if part.startswith("test_"))
        times["/".join(parts[: last + 1]) + ".py"] += float(case.get("time", "0"))
    return times


def main() -> None:
    times = file_times(sys.argv[1])
    print("# seconds per test file in a serial run (tools/test_times.py); longest first")
    for path, seconds in times.most_common():
        if seconds >= MIN_SECONDS:
            print(f"{seconds:7.1f} {path}")


if __name__ == "__main__":
    main()
