"""The client commands of `ads`: `topics`, `produce`, `consume`, `groups`,
`transactions`, `acls`, `quotas`, `users`, `bench` and `pipeline`, plus `log`, which reads
a broker's data directory, `top`, which reads a broker's `/metrics`, and `cluster`, which
runs a local cluster and shows any cluster's state.

The network ones are clients like any other, built on confluent-kafka (or on PySpark for
`pipeline`), so they work against any Kafka-protocol cluster; `ads.cli.main` registers
them through `add_parsers`.
"""

from __future__ import annotations

import argparse

from ads.cli import (
    acls,
    bench,
    cluster,
    consume,
    groups,
    logdump,
    pipeline,
    produce,
    quotas,
    top,
    topics,
    transactions,
    users,
)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics.add_parser(sub)
    cluster.add_parser(sub)
    produce.add_parser(sub)
    consume.add_parser(sub)
    groups.add_parser(sub)
    transactions.add_parser(sub)
    acls.add_parser(sub)
    quotas.add_parser(sub)
    bench.add_parser(sub)
    pipeline.add_parser(sub)
    logdump.add_parser(sub)
    top.add_parser(sub)
    users.add_parser(sub)
