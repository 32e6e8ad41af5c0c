"""Where `ads` client commands find their cluster (flag, `ADS_BOOTSTRAP_SERVERS`, the
profile file, the default), how fast they give up on an address where nothing listens,
and what `ads --help` and a client command import; run as subprocesses, as a user runs
them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from broker_process import free_port
from cli_process import ads
from conftest import create_topic


def test_cli_bootstrap_from_environment_and_flag(bootstrap: str) -> None:
    create_topic(bootstrap, "found")
    nowhere = f"127.0.0.1:{free_port()}"
    done = ads("topics", "list", env={"ADS_BOOTSTRAP_SERVERS": bootstrap})
    assert (done.returncode, done.stdout, done.stderr) == (0, "found\n", "")
    # The flag wins over the environment.
    done = ads("topics", "list", "--bootstrap-server", bootstrap,
               env={"ADS_BOOTSTRAP_SERVERS": nowhere})
    assert (done.returncode, done.stdout) == (0, "found\n")
    done = ads("topics", "list", "--bootstrap-server", nowhere,
               env={"ADS_BOOTSTRAP_SERVERS": bootstrap})
    assert done.returncode == 1
    assert f"cannot connect to {nowhere} (from --bootstrap-server)" in done.stderr


def test_cli_bootstrap_and_client_properties_from_profile(bootstrap: str,
                                                          tmp_path: Path) -> None:
    create_topic(bootstrap, "found")
    nowhere = f"127.0.0.1:{free_port()}"
    # The default profile, under XDG_CONFIG_HOME.
    (tmp_path / "ads").mkdir()
    (tmp_path / "ads" / "client.properties").write_text(f"bootstrap.servers={bootstrap}\n")
    done = ads("topics", "list", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert (done.returncode, done.stdout, done.stderr) == (0, "found\n", "")
    # The environment wins over the profile.
    done = ads("topics", "list", env={"XDG_CONFIG_HOME": str(tmp_path),
                                      "ADS_BOOTSTRAP_SERVERS": nowhere})
    assert done.returncode == 1 and "(from ADS_BOOTSTRAP_SERVERS)" in done.stderr

    # A profile named by ADS_CONFIG, whose client properties the clients use: SASL against
    # a PLAINTEXT listener fails, until --command-config sets the protocol back.
    profile = tmp_path / "work.properties"
    profile.write_text(f"bootstrap.servers={bootstrap}\nsecurity.protocol=SASL_PLAINTEXT\n"
                       "sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n"
                       "socket.timeout.ms=3000\n")
    done = ads("topics", "list", env={"ADS_CONFIG": str(profile)})
    assert done.returncode == 1 and done.stdout == ""
    override = tmp_path / "plain.properties"
    override.write_text("security.protocol=PLAINTEXT\n")
    done = ads("topics", "list", "--command-config", str(override),
               env={"ADS_CONFIG": str(profile)})
    assert (done.returncode, done.stdout, done.stderr) == (0, "found\n", "")

    missing = tmp_path / "missing.properties"
    done = ads("topics", "list", env={"ADS_CONFIG": str(missing)})
    assert done.returncode == 2
    assert done.stderr.startswith(f"ads topics list: cannot read the profile (ADS_CONFIG) "
                                  f"{str(missing)!r}")


def test_cli_help_shows_where_settings_come_from(tmp_path: Path) -> None:
    done = ads("--help", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert done.returncode == 0
    for text in ("ADS_BOOTSTRAP_SERVERS", "ADS_CONFIG", "--command-config",
                 str(tmp_path / "ads" / "client.properties"), "topics", "consume", "top"):
        assert text in done.stdout, text


def test_cli_no_broker_fails_fast_with_address_and_hint() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    for argv in (["topics", "list"], ["groups", "describe", "g"],
                 ["consume", "t", "--max-messages", "1"], ["produce", "t"]):
        # The message is the connection check's, made before the client library's wait
        # (how long each takes is for `docs/benchmarks.md`, not a test).
        done = ads(*argv, "--bootstrap-server", nowhere, stdin="x\n")
        assert (done.returncode, done.stdout) == (1, ""), argv
        assert done.stderr.count("\n") == 1, done.stderr
        assert f"cannot connect to {nowhere} (from --bootstrap-server)" in done.stderr
        assert "ADS_BOOTSTRAP_SERVERS" in done.stderr
    done = ads("topics", "list", env={"ADS_BOOTSTRAP_SERVERS": nowhere})
    assert f"cannot connect to {nowhere} (from ADS_BOOTSTRAP_SERVERS)" in done.stderr


def test_cli_bootstrap_list_needs_one_server_listening(bootstrap: str) -> None:
    create_topic(bootstrap, "found")
    servers = f"127.0.0.1:{free_port()},{bootstrap}"
    done = ads("topics", "list", "--bootstrap-server", servers)
    assert (done.returncode, done.stdout, done.stderr) == (0, "found\n", "")


def _modules_after(*argv: str) -> set[str]:
    """The modules `ads ARGV` imported (it runs in a fresh interpreter)."""
    code = ("import json, sys\nfrom ads.cli.main import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,  # noqa: S603
                          text=True, timeout=60, check=False)
    return set(json.loads(done.stderr.splitlines()[-1]))


HEAVY = ("pyspark", "pyarrow", "rich", "prometheus_client", "kazoo", "ads.broker",
         "ads.storage", "ads.protocol.messages", "ads.spark")


def test_cli_commands_import_only_what_they_use(bootstrap: str) -> None:
    create_topic(bootstrap, "t")
    loaded = _modules_after("--help")
    assert not {m for m in loaded if m.startswith((*HEAVY, "confluent_kafka"))}
    loaded = _modules_after("topics", "list", "--bootstrap-server", bootstrap)
    assert "confluent_kafka" in loaded
    assert not {m for m in loaded if m.startswith(HEAVY)}
