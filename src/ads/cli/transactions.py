"""`ads transactions`: list and describe transactions, like Kafka's `kafka-transactions.sh`
(KIP-664).

`list` asks every broker of the cluster (ListTransactions goes to each coordinator) and
prints one row per transactional id with its coordinator, producer id and state; it can
filter by state, producer id and, for open ones, how long they have run. `describe` asks the
coordinator of one transactional id (DescribeTransactions) for its producer id and epoch,
state, timeout, start time and partitions. Both speak the protocol over `ads.client`
connections, since confluent-kafka's AdminClient has no transaction calls.

Not offered: Kafka's `find-hanging` and `abort`, which find and end transactions a
partition holds open without its coordinator knowing them; ADS brokers refuse such writes
(KIP-890 part 1), so there are none to find.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ads.cli.common import (
    CommandError,
    UsageError,
    add_client_arguments,
    connect_broker,
    coordinator_connection,
    print_table,
    run_command,
)
from ads.client import ClientError, parse_servers
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    txns = sub.add_parser("transactions", help="list and describe transactions")
    verbs = txns.add_subparsers(dest="transactions_command", required=True, metavar="VERB")

    p = verbs.add_parser("list", help="transactional ids known to the coordinators")
    p.add_argument("--state", action="append", default=[],
                   help="only ids in this state, e.g. Ongoing or CompleteCommit (repeatable)")
    p.add_argument("--producer-id", action="append", default=[], type=int,
                   help="only ids with this producer id (repeatable)")
    p.add_argument("--duration-ms", type=int, default=-1,
                   help="only transactions that started at least this long ago")
    _finish(p, "transactions list", list_)

    p = verbs.add_parser("describe", help="the state of one transactional id")
    p.add_argument("--transactional-id", required=True)
    _finish(p, "transactions describe", describe)


def _finish(p: argparse.ArgumentParser, name: str, func: Any) -> None:
    add_client_arguments(p)
    p.set_defaults(func=run_command(name, func))


def _brokers(args: argparse.Namespace) -> list[tuple[int, str, int]]:
    try:
        host, port = parse_servers(args.bootstrap_server)[0]
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with connect_broker(host, port) as conn:
        try:
            md = conn.request(m.ApiKey.METADATA, 9, m.MetadataRequest(topics=[]))
        except ClientError as exc:
            raise CommandError(f"cannot reach {args.bootstrap_server}: {exc}") from exc
    assert isinstance(md, m.MetadataResponse)
    return sorted((b.node_id, b.host, b.port) for b in md.brokers)


def list_(args: argparse.Namespace) -> int:
    rows: list[tuple[object, ...]] = [
        ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE")]
    req = m.ListTransactionsRequest(state_filters=args.state,
                                    producer_id_filters=args.producer_id,
                                    duration_filter=args.duration_ms)
    found: list[tuple[object, ...]] = []
    for node, host, port in _brokers(args):
        with connect_broker(host, port) as conn:
            try:
                resp = conn.request(m.ApiKey.LIST_TRANSACTIONS, 1, req)
            except ClientError as exc:
                raise CommandError(f"listing transactions of broker {node} failed: "
                                   f"{exc}") from exc
        assert isinstance(resp, m.ListTransactionsResponse)
        if resp.unknown_state_filters:
            raise UsageError(f"unknown state {', '.join(resp.unknown_state_filters)}")
        if resp.error_code != ErrorCode.NONE:
            raise CommandError(f"listing transactions of broker {node} failed: "
                               f"{ErrorCode(resp.error_code).name}")
        found += [(t.transactional_id, node, t.producer_id, t.transaction_state)
                  for t in resp.transaction_states]
    print_table(rows + sorted(found, key=lambda r: str(r[0])))
    return 0


def describe(args: argparse.Namespace) -> int:
    txn_id = args.transactional_id
    with coordinator_connection(args, txn_id, 1) as conn:
        try:
            resp = conn.request(m.ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                m.DescribeTransactionsRequest(transactional_ids=[txn_id]))
        except ClientError as exc:
            raise CommandError(f"describing '{txn_id}' failed: {exc}") from exc
    assert isinstance(resp, m.DescribeTransactionsResponse)
    state = resp.transaction_states[0]
    if state.error_code != ErrorCode.NONE:
        raise CommandError(f"describing '{txn_id}' failed: "
                           f"{ErrorCode(state.error_code).name}")
    start = state.transaction_start_time_ms
    duration = int(time.time() * 1000) - start if start >= 0 else -1
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    print_table([
        ("TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "TRANSACTION-STATE",
         "TRANSACTION-TIMEOUT-MS", "CURRENT-TRANSACTION-START-TIME-MS",
         "TRANSACTION-DURATION-MS", "TOPIC-PARTITIONS"),
        (txn_id, state.producer_id, state.producer_epoch, state.transaction_state,
         state.transaction_timeout_ms, start if start >= 0 else "None",
         duration if duration >= 0 else "None", partitions or "None"),
    ])
    return 0
