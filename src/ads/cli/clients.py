"""The commands of `ads`: `broker`, and the clients `topics`, `produce`, `consume`,
`groups`, `share-groups`, `transactions`, `acls`, `quotas`, `users`, `bench` and
`pipeline`, plus `log`, which reads a broker's data directory, `top`, which reads a
broker's `/metrics`, and `cluster`, which runs a local cluster and shows any cluster's
state.

The network ones are clients like any other, built on confluent-kafka (or on PySpark for
`pipeline`), so they work against any Kafka-protocol cluster.

`COMMANDS` names each command's module and its one-line help. `ads.cli.main` imports only
the module of the command being run (none for `ads --help`): between them the modules
import the broker, Spark, Arrow, rich and the client libraries, more than a second of
start-up that a command needing none of them should not pay.
"""

from __future__ import annotations

import argparse
import importlib

COMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("ads.cli.broker", "run a broker"),
    "topics": ("ads.cli.topics", "create, list, describe, alter and delete topics"),
    "cluster": ("ads.cli.cluster", "run a local cluster; show a cluster's state"),
    "produce": ("ads.cli.produce", "write standard input to a topic, one record per line"),
    "consume": ("ads.cli.consume", "print a topic's records to standard output"),
    "groups": ("ads.cli.groups", "list, describe and manage consumer groups"),
    "share-groups": ("ads.cli.share_groups", "list, describe and delete share groups"),
    "transactions": ("ads.cli.transactions", "list and describe transactions"),
    "acls": ("ads.cli.acls", "add, remove and list ACLs (like kafka-acls.sh)"),
    "quotas": ("ads.cli.quotas", "set and show client quotas (users, client ids)"),
    "bench": ("ads.cli.bench", "benchmarks: produce, consume, e2e, suite"),
    "pipeline": ("ads.cli.pipeline",
                 "load topics into Parquet, or copy a topic, with Spark, exactly once"),
    "log": ("ads.cli.logdump", "dump segments and describe partition data on disk"),
    "top": ("ads.cli.top", "live view of a broker's rates and lag (from /metrics)"),
    "users": ("ads.cli.users", "create, delete and list SCRAM users"),
}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                chosen: str | None) -> None:
    """Every command, the `chosen` one with its full parser (its module imported), the
    others as a name and a help line for `ads --help`."""
    for name, (module, help_text) in COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).add_parser(sub, help_text)
        else:
            sub.add_parser(name, help=help_text)
