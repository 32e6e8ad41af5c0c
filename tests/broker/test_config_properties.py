"""The broker reads `server.properties` with `ads.common.properties` (whose rules
tests/common/test_common_properties.py covers); here, what the broker adds: its error type
and the file as `load_broker_config` reads it."""

from pathlib import Path

import pytest

from ads.broker.config import ConfigError, load_broker_config, parse_properties


def test_config_properties_malformed_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="uxxxx"):
        parse_properties("a=\\u12G4")


def test_config_properties_file_with_continuation_and_escapes(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_bytes("# ADS\nlisteners=PLAINTEXT://127.0.0.1:\\\n   0\nnode.id : 7\n"
                  "log.dirs=/data/caf\u00e9\n".encode("latin-1"))
    config, _ = load_broker_config(f, {}, [])
    assert config.node_id == 7
    assert config.listeners == [("127.0.0.1", 0)]
    assert config.log_dirs == [Path("/data/caf\u00e9")]
