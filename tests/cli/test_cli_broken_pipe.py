"""Every `ads` command ends quietly when the reader of its output goes away
(`ads ... | head`), as Unix tools do: no traceback, the status a shell shows for SIGPIPE."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ads.cli.main import EXIT_BROKEN_PIPE
from ads.testing import EmbeddedBroker
from conftest import create_topic


def _with_reader_gone(*argv: str) -> tuple[int, str]:
    """Runs `ads ARGV` with a standard output whose read end is already closed."""
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "ads.cli.main", *argv],  # noqa: S603
                            stdout=write_end, stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    os.close(read_end)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.parametrize("argv", [["topics", "list"], ["topics", "describe"],
                                  ["topics", "describe", "--include-internal"],
                                  ["log", "describe", "--data-dir", "{data_dir}"]])
def test_cli_output_closed_ends_quietly(ads_broker: EmbeddedBroker, argv: list[str]) -> None:
    bootstrap = ads_broker.bootstrap_servers
    for i in range(40):
        create_topic(bootstrap, f"piped-{i:02d}", partitions=2)
    argv = [a.format(data_dir=ads_broker.data_dir) for a in argv]
    if argv[0] != "log":
        argv += ["--bootstrap-server", bootstrap]
    assert _with_reader_gone(*argv) == (EXIT_BROKEN_PIPE, "")
