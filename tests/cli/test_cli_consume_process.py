"""`ads consume` run as a subprocess and stopped as a user stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

from conftest import create_topic


def test_cli_consume_interrupted_reports_records_printed(bootstrap: str,
                                                          tmp_path: Path) -> None:
    create_topic(bootstrap, "counted", partitions=2)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(2003):
        p.produce("counted", b"r%d" % i, partition=i % 2)
    assert p.flush(15) == 0

    out_path = tmp_path / "out.txt"
    with out_path.open("w") as out:
        proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "ads.cli.main", "consume", "counted", "--from-beginning",
             "--bootstrap-server", bootstrap],
            stdout=out, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while out_path.read_text().count("\n") < 2003 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert out_path.read_text().count("\n") == 2003
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)  # reaped, and its stderr pipe closed
    assert proc.returncode == 0
    assert err == "Processed a total of 2003 messages\n"
