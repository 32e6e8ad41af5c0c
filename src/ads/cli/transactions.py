"""`ads transactions`: list, describe, find hanging and abort transactions, like Kafka's
`kafka-transactions.sh` (KIP-664).

`list` asks every broker of the cluster (ListTransactions goes to each coordinator) and
prints one row per transactional id with its coordinator, producer id and state; it can
filter by state, producer id and, for open ones, how long they have run. `describe` asks the
coordinator of one transactional id (DescribeTransactions) for its producer id and epoch,
state, timeout, start time and partitions.

`find-hanging` looks for transactions a partition holds open that no coordinator will end
(they hold the last stable offset, so read_committed consumers stop there): it asks
DescribeProducers for the open transactions of the partitions with a replica on
`--broker-id` (or of `--topic`), keeps those whose producer last wrote more than
`--max-transaction-timeout` minutes ago (no coordinator lets a transaction run longer),
and drops those its coordinator still knows: a producer id that ListTransactions maps to a
transactional id whose DescribeTransactions lists the partition. `abort` writes an ABORT
marker (WriteTxnMarkers) to the partition's leader for the transaction starting at
`--start-offset` (its producer id, epoch and coordinator epoch from DescribeProducers), or
for the given `--producer-id`, `--producer-epoch` and `--coordinator-epoch`.

All speak the protocol over `ads.client` connections, since confluent-kafka's AdminClient
has no transaction calls.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable

from ads.broker.markers import by_topics
from ads.cli.common import (
    CommandError,
    UsageError,
    add_command,
    connect_broker,
    coordinator_connection,
    print_table,
)
from ads.client import ClientError, parse_servers
from ads.common.partitions import TopicPartition
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    txns = sub.add_parser("transactions", help=help_text)
    verbs = txns.add_subparsers(dest="transactions_command", required=True, metavar="VERB")

    p = verbs.add_parser("list", help="transactional ids known to the coordinators")
    p.add_argument("--state", action="append", default=[],
                   help="only ids in this state, e.g. Ongoing or CompleteCommit (repeatable)")
    p.add_argument("--producer-id", action="append", default=[], type=int,
                   help="only ids with this producer id (repeatable)")
    p.add_argument("--duration-ms", type=int, default=-1,
                   help="only transactions that started at least this long ago")
    add_command(p, "transactions list", list_)

    p = verbs.add_parser("describe", help="the state of one transactional id")
    p.add_argument("--transactional-id", required=True)
    add_command(p, "transactions describe", describe)

    p = verbs.add_parser("find-hanging",
                         help="open transactions in partitions that no coordinator will end")
    p.add_argument("--broker-id", type=int,
                   help="search the partitions with a replica on this broker")
    p.add_argument("--topic", help="search this topic (required with --partition)")
    p.add_argument("--partition", type=int, help="search this partition only")
    p.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="only transactions whose producer last wrote longer ago than this "
                        "(the largest transaction timeout; default 15)")
    add_command(p, "transactions find-hanging", find_hanging)

    p = verbs.add_parser("abort", help="abort a hanging transaction on one partition")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--start-offset", type=int,
                   help="first offset of the transaction to abort")
    p.add_argument("--producer-id", type=int, help="instead of --start-offset: the producer")
    p.add_argument("--producer-epoch", type=int)
    p.add_argument("--coordinator-epoch", type=int)
    add_command(p, "transactions abort", abort)


def _metadata(args: argparse.Namespace, topics: list[str] | None) -> m.MetadataResponse:
    """The cluster's brokers and the partitions of ``topics`` (None: every topic)."""
    try:
        host, port = parse_servers(args.bootstrap_server)[0]
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    MT = m.MetadataRequest.MetadataRequestTopic  # noqa: N806
    req = m.MetadataRequest(topics=None if topics is None else [MT(name=t) for t in topics],
                            allow_auto_topic_creation=False)
    with connect_broker(args, host, port) as conn:
        try:
            md = conn.request(m.ApiKey.METADATA, 9, req)
        except ClientError as exc:
            raise CommandError(f"cannot reach {args.bootstrap_server}: {exc}") from exc
    assert isinstance(md, m.MetadataResponse)
    return md


def _brokers(args: argparse.Namespace) -> list[tuple[int, str, int]]:
    md = _metadata(args, [])
    return sorted((b.node_id, b.host, b.port) for b in md.brokers)


def list_(args: argparse.Namespace) -> int:
    rows: list[tuple[object, ...]] = [
        ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE")]
    found = _list_transactions(args, args.state, args.producer_id, args.duration_ms)
    print_table(rows + sorted(found, key=lambda r: str(r[0])))
    return 0


def _list_transactions(args: argparse.Namespace, states: list[str], producer_ids: list[int],
                       duration_ms: int) -> list[tuple[str, int, int, str]]:
    """``(transactional id, coordinator, producer id, state)`` from every broker."""
    req = m.ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids,
                                    duration_filter=duration_ms)
    found: list[tuple[str, int, int, str]] = []
    for node, host, port in _brokers(args):
        with connect_broker(args, host, port) as conn:
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
    return found


def _describe(args: argparse.Namespace, txn_id: str
              ) -> m.DescribeTransactionsResponse.TransactionState:
    """DescribeTransactions at the id's coordinator; the caller checks its error code."""
    with coordinator_connection(args, txn_id, 1) as conn:
        try:
            resp = conn.request(m.ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                m.DescribeTransactionsRequest(transactional_ids=[txn_id]))
        except ClientError as exc:
            raise CommandError(f"describing '{txn_id}' failed: {exc}") from exc
    assert isinstance(resp, m.DescribeTransactionsResponse)
    return resp.transaction_states[0]


def describe(args: argparse.Namespace) -> int:
    txn_id = args.transactional_id
    state = _describe(args, txn_id)
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


# ----------------------------------------------------------------- hanging transactions

DP = m.DescribeProducersRequest
ProducerState = m.DescribeProducersResponse.TopicResponse.PartitionResponse.ProducerState
_BATCH = 500  # partitions per DescribeProducers request, as Kafka's tool sends them


def _describe_producers(args: argparse.Namespace, node: int, address: tuple[str, int],
                        partitions: list[TopicPartition]
                        ) -> list[tuple[str, int, ProducerState]]:
    """The producers of ``partitions`` as broker ``node`` knows them."""
    out: list[tuple[str, int, ProducerState]] = []
    with connect_broker(args, *address) as conn:
        for start in range(0, len(partitions), _BATCH):
            by_topic = by_topics(partitions[start:start + _BATCH])
            req = DP(topics=[DP.TopicRequest(name=t, partition_indexes=i)
                             for t, i in by_topic.items()])
            try:
                resp = conn.request(m.ApiKey.DESCRIBE_PRODUCERS, 0, req)
            except ClientError as exc:
                raise CommandError(f"describing producers on broker {node} failed: "
                                   f"{exc}") from exc
            assert isinstance(resp, m.DescribeProducersResponse)
            for t in resp.topics:
                for part in t.partitions:
                    if part.error_code != ErrorCode.NONE:
                        raise CommandError(
                            f"describing producers of {t.name}-{part.partition_index} on "
                            f"broker {node} failed: {ErrorCode(part.error_code).name}")
                    out += [(t.name, part.partition_index, s) for s in part.active_producers]
    return out


def _partitions_to_search(args: argparse.Namespace
                          ) -> tuple[dict[int, tuple[str, int]],
                                     dict[int, list[TopicPartition]]]:
    """The brokers' addresses, and the partitions to ask each broker about: every
    partition with a replica on ``--broker-id`` asked there, or each partition of
    ``--topic`` asked at its leader."""
    if args.topic is None and args.broker_id is None:
        raise UsageError("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    md = _metadata(args, None if args.topic is None else [args.topic])
    addresses = {b.node_id: (b.host, b.port) for b in md.brokers}
    if args.broker_id is not None and args.broker_id not in addresses:
        raise CommandError(f"broker {args.broker_id} is not in the cluster")
    asks: dict[int, list[TopicPartition]] = {}
    for t in md.topics:
        name = str(t.name)
        if t.error_code != ErrorCode.NONE:
            raise CommandError(f"describing topic {name} failed: "
                               f"{ErrorCode(t.error_code).name}")
        for part in t.partitions:
            if args.partition is not None and part.partition_index != args.partition:
                continue
            if args.broker_id is not None:
                if args.broker_id in part.replica_nodes:
                    asks.setdefault(args.broker_id, []).append(
                        TopicPartition(name, part.partition_index))
            elif part.leader_id >= 0:
                asks.setdefault(part.leader_id, []).append(
                    TopicPartition(name, part.partition_index))
    if args.partition is not None and not any(asks.values()):
        raise CommandError(f"no partition {args.topic}-{args.partition} to search")
    return addresses, asks


def _known_to_coordinator(args: argparse.Namespace, producer_ids: Iterable[int]
                          ) -> set[tuple[int, str, int]]:
    """``(producer id, topic, partition)`` of the partitions in the current transaction
    of each producer's transactional id, as its coordinator describes it."""
    ids = _list_transactions(args, [], sorted(set(producer_ids)), -1)
    known: set[tuple[int, str, int]] = set()
    for txn_id, _, producer_id, _ in ids:
        state = _describe(args, txn_id)
        if state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            continue  # expired meanwhile: nobody will end its transactions
        if state.error_code != ErrorCode.NONE:
            raise CommandError(f"describing '{txn_id}' failed: "
                               f"{ErrorCode(state.error_code).name}")
        if state.producer_id == producer_id:
            known.update((producer_id, t.topic, p) for t in state.topics for p in t.partitions)
    return known


def find_hanging(args: argparse.Namespace) -> int:
    if args.max_transaction_timeout < 0:
        raise UsageError("--max-transaction-timeout must not be negative")
    addresses, asks = _partitions_to_search(args)
    now_ms = int(time.time() * 1000)
    max_timeout_ms = args.max_transaction_timeout * 60_000
    candidates = [
        (topic, index, state)
        for node, partitions in sorted(asks.items())
        for topic, index, state in _describe_producers(args, node, addresses[node], partitions)
        if state.current_txn_start_offset >= 0
        and now_ms - state.last_timestamp > max_timeout_ms
    ]
    known = _known_to_coordinator(args, (s.producer_id for _, _, s in candidates))
    rows: list[tuple[object, ...]] = [
        ("TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH",
         "START-OFFSET", "LAST-TIMESTAMP", "DURATION(MIN)")]
    for topic, index, state in sorted(candidates, key=lambda c: (c[0], c[1])):
        if (state.producer_id, topic, index) in known:
            continue
        rows.append((topic, index, state.producer_id, state.producer_epoch,
                     state.coordinator_epoch, state.current_txn_start_offset,
                     state.last_timestamp, (now_ms - state.last_timestamp) // 60_000))
    print_table(rows)
    return 0


def _abort_spec(args: argparse.Namespace, leader: int, address: tuple[str, int]
                ) -> tuple[int, int, int]:
    """``(producer id, producer epoch, coordinator epoch)`` of the transaction to abort."""
    if args.start_offset is None:
        if args.producer_id is None:
            raise UsageError("name the transaction with --start-offset, or with --producer-id, "
                             "--producer-epoch and --coordinator-epoch")
        if args.producer_epoch is None:
            raise UsageError("--producer-id needs --producer-epoch")
        if args.coordinator_epoch is None:
            raise UsageError("--producer-id needs --coordinator-epoch")
        return args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0)
    producers = _describe_producers(args, leader, address,
                                    [TopicPartition(args.topic, args.partition)])
    for _, _, state in producers:
        if state.current_txn_start_offset == args.start_offset:
            return state.producer_id, state.producer_epoch, max(state.coordinator_epoch, 0)
    raise CommandError(f"no open transaction starts at offset {args.start_offset} of "
                       f"{args.topic}-{args.partition}")


def abort(args: argparse.Namespace) -> int:
    md = _metadata(args, [args.topic])
    topic = md.topics[0]
    if topic.error_code != ErrorCode.NONE:
        raise CommandError(f"describing topic {args.topic} failed: "
                           f"{ErrorCode(topic.error_code).name}")
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    leader = leaders.get(args.partition, -1)
    if args.partition not in leaders:
        raise CommandError(f"{args.topic} has no partition {args.partition}")
    addresses = {b.node_id: (b.host, b.port) for b in md.brokers}
    if leader not in addresses:
        raise CommandError(f"{args.topic}-{args.partition} has no leader now")
    producer_id, producer_epoch, coordinator_epoch = _abort_spec(args, leader, addresses[leader])
    W = m.WriteTxnMarkersRequest.WritableTxnMarker  # noqa: N806
    req = m.WriteTxnMarkersRequest(markers=[W(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        topics=[W.WritableTxnMarkerTopic(name=args.topic, partition_indexes=[args.partition])],
        coordinator_epoch=coordinator_epoch)])
    with connect_broker(args, *addresses[leader]) as conn:
        try:
            resp = conn.request(m.ApiKey.WRITE_TXN_MARKERS, 1, req)
        except ClientError as exc:
            raise CommandError(f"writing the ABORT marker failed: {exc}") from exc
    assert isinstance(resp, m.WriteTxnMarkersResponse)
    error = resp.markers[0].topics[0].partitions[0].error_code
    if error != ErrorCode.NONE:
        raise CommandError(f"aborting the transaction of producer {producer_id} (epoch "
                           f"{producer_epoch}) on {args.topic}-{args.partition} failed: "
                           f"{ErrorCode(error).name}")
    print(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}, "
          f"coordinator epoch {coordinator_epoch}) on {args.topic}-{args.partition}")
    return 0
