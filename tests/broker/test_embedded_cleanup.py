"""The in-process broker removes the temporary data dir it made, also when its config is
refused or its start fails (a `with` block's __exit__ never runs for a failed __enter__)."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest

from ads.broker.config import ConfigError
from ads.testing import EmbeddedBroker


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_embedded_refused_config_leaves_no_data_dir(temp_root: Path) -> None:
    with pytest.raises(ConfigError):
        EmbeddedBroker(config={"num.partitions": "many"})
    assert list(temp_root.iterdir()) == []


def test_embedded_failed_start_leaves_no_data_dir(temp_root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError), EmbeddedBroker(port=taken.getsockname()[1]):
            pass
    assert list(temp_root.iterdir()) == []


def test_embedded_close_removes_its_data_dir(temp_root: Path) -> None:
    with EmbeddedBroker() as broker:
        made = broker.data_dir
        assert made.parent == temp_root and made.is_dir()
    assert not made.exists()
