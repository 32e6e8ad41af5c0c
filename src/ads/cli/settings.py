"""Where the client commands find their cluster, so that a user sets it once, as with rpk's
profiles or kcat's configuration file; light enough for `ads --help` to show it.

The bootstrap servers come from, first found:

1. the command's `--bootstrap-server`;
2. the environment variable `ADS_BOOTSTRAP_SERVERS`;
3. `bootstrap.servers` in the profile;
4. the default, 127.0.0.1:9092.

The profile is a `.properties` file (Java's rules, as `--command-config`): the file
`ADS_CONFIG` names, else `$XDG_CONFIG_HOME/ads/client.properties` (by default
`~/.config/ads/client.properties`). Besides `bootstrap.servers` it holds client
properties (`security.protocol`, `sasl.*`, `ssl.*`, ...), which a command's
`--command-config` overrides key by key. A profile named by `ADS_CONFIG` must exist; the
default one may not.
"""

from __future__ import annotations

import os
from pathlib import Path

BOOTSTRAP_ENV = "ADS_BOOTSTRAP_SERVERS"
PROFILE_ENV = "ADS_CONFIG"
BOOTSTRAP_KEY = "bootstrap.servers"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# How long a command tries to reach its bootstrap servers before it says it cannot.
CONNECT_TIMEOUT_S = 2.0


def profile_path() -> tuple[Path, bool]:
    """The profile's path, and whether the user named it (`ADS_CONFIG`)."""
    named = os.environ.get(PROFILE_ENV)
    if named:
        return Path(named).expanduser(), True
    base = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(base).expanduser() / "ads" / "client.properties", False


def settings_help() -> str:
    """The epilog of `ads --help`."""
    path, _ = profile_path()
    return f"""client settings (topics, produce, consume, groups and the other client commands):
  the cluster's address is the first of --bootstrap-server, ${BOOTSTRAP_ENV},
  {BOOTSTRAP_KEY} in the profile, and {DEFAULT_BOOTSTRAP}. The profile is the
  properties file ${PROFILE_ENV} names, else {path}; besides
  {BOOTSTRAP_KEY} it may hold client properties (security.protocol, sasl.*, ssl.*),
  which --command-config FILE overrides. For example:

    mkdir -p {path.parent} && echo {BOOTSTRAP_KEY}=broker1:9092 > {path}
    ads topics list"""
