"""Shared fixtures: a fresh in-process broker per test (the `ads_broker` fixture comes from
the ads pytest plugin) and helpers for the client libraries."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)],
        operation_timeout=10)
    futures[name].result(timeout=15)


@pytest.fixture
def bootstrap(ads_broker) -> str:  # type: ignore[no-untyped-def]
    return ads_broker.bootstrap_servers
