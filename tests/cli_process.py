"""The `ads` command run as a user runs it: a subprocess of this interpreter, so it runs the
code under test, with the broker address and profile variables of the test's choosing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

# Variables through which a user's own settings could reach the command under test.
_USER_SETTINGS = ("ADS_BOOTSTRAP_SERVERS", "ADS_CONFIG")


def ads(*args: str, stdin: str | None = None, env: Mapping[str, str] | None = None,
        timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Runs `ads ARGS...` to completion (at most `timeout` seconds)."""
    full = {k: v for k, v in os.environ.items() if k not in _USER_SETTINGS}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "ads.cli.main", *args],  # noqa: S603
                          input=stdin, capture_output=True, text=True, timeout=timeout,
                          env=full, check=False)
