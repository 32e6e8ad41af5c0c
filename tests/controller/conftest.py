"""The `cluster` fixture: ZooKeeper and three broker processes, stopped after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ads.testing.zookeeper import zookeeper_available
from cluster_support import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path, 3)
    try:
        yield c.start()
    finally:
        c.stop()
