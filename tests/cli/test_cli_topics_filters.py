"""`ads topics describe` with a health filter, run as a subprocess: scripts read an empty
output as "healthy", as they do with kafka-topics.sh."""

from __future__ import annotations

import pytest

from cli_process import ads
from conftest import create_topic


@pytest.mark.parametrize("flag", ["--under-replicated-partitions", "--unavailable-partitions"])
def test_cli_topics_describe_filter_prints_nothing_when_healthy(bootstrap: str,
                                                                 flag: str) -> None:
    create_topic(bootstrap, "healthy", partitions=3)
    create_topic(bootstrap, "fine")
    bs = ("--bootstrap-server", bootstrap)
    everything = ads("topics", "describe", *bs)
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.count("Topic: healthy\tTopicId:") == 1

    for argv in (["healthy"], []):
        done = ads("topics", "describe", *argv, flag, *bs)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), argv
