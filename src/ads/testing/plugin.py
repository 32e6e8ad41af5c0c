"""pytest plugin (entry point `pytest11`): the `ads_broker` fixture.

`ads_broker` is a fresh in-process broker per test, with its data in the test's tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ads.testing.embedded import EmbeddedBroker


@pytest.fixture
def ads_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path / "ads-data") as broker:
        yield broker
