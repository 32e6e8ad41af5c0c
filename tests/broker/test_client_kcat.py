"""kcat (librdkafka's command-line client) against a real ADS broker."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import CODECS, create_topic

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def _kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT, "kcat is installed by `make test` (Debian package kcat)"
    done = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(bootstrap: str, codec: str) -> None:
    topic = f"kcat-{codec}"
    create_topic(bootstrap, topic, partitions=2)
    lines = [f"key{i}:value {i} {codec}" for i in range(50)]
    _kcat("-b", bootstrap, "-P", "-t", topic, "-p", "1", "-K:", "-z", codec,
          "-H", "source=kcat", stdin="\n".join(lines) + "\n")
    out = _kcat("-b", bootstrap, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e",
                "-f", "%k|%s|%o|%h\n")
    rows = [r.split("|") for r in out.splitlines() if r]
    assert [int(r[2]) for r in rows] == list(range(50))
    assert [(r[0], r[1]) for r in rows] == [(f"key{i}", f"value {i} {codec}") for i in range(50)]
    assert all(r[3] == "source=kcat" for r in rows)


def test_kcat_metadata_lists_topics(bootstrap: str) -> None:
    create_topic(bootstrap, "listed", partitions=4)
    out = _kcat("-b", bootstrap, "-L", "-t", "listed")
    assert "topic \"listed\" with 4 partitions" in out
