"""`ads share-groups`: list, describe and delete share groups (KIP-932), like
`kafka-share-groups.sh`.

confluent-kafka's AdminClient has no share-group calls, so `list` sends ListGroups (v5,
filtered on the `share` type) to every broker and `describe` sends ShareGroupDescribe and
DescribeShareGroupOffsets to the group's coordinator over `ads.client` connections;
`delete` is DeleteGroups through the AdminClient. `describe` shows, per partition, the
share-partition's start offset (where its in-flight window begins: every record below it
is acknowledged or archived) and the lag behind the partition's high watermark; with
`--members`, the members and their assignments.
"""

from __future__ import annotations

import argparse

from confluent_kafka import KafkaException

from ads.cli.common import (
    TIMEOUT_S,
    CommandError,
    add_command,
    admin_client,
    connect_broker,
    coordinator_connection,
    print_table,
    result,
)
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    groups = sub.add_parser("share-groups", help=help_text)
    verbs = groups.add_subparsers(dest="share_groups_command", required=True, metavar="VERB")
    p = verbs.add_parser("list", help="list share groups")
    add_command(p, "share-groups list", list_)
    p = verbs.add_parser("describe", help="start offsets and lag, or members, of share groups")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.add_argument("--members", action="store_true", help="list the members instead")
    add_command(p, "share-groups describe", describe)
    p = verbs.add_parser("delete", help="delete share groups that have no members")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    add_command(p, "share-groups delete", delete)


def list_(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    try:
        brokers = admin.list_topics(timeout=TIMEOUT_S).brokers.values()
    except KafkaException as exc:
        raise CommandError(f"cannot reach {args.bootstrap_server}: {exc.args[0].str()}") from exc
    found: set[str] = set()
    for broker in brokers:  # each coordinator lists its own groups
        with connect_broker(args, str(broker.host), broker.port) as conn:
            r = conn.request(m.ApiKey.LIST_GROUPS, 5, m.ListGroupsRequest(
                states_filter=[], types_filter=["share"]))
        assert isinstance(r, m.ListGroupsResponse)
        if r.error_code != ErrorCode.NONE:
            raise CommandError(f"broker {broker.id}: {ErrorCode(r.error_code).name}")
        found.update(g.group_id for g in r.groups)
    for group in sorted(found):
        print(group)
    return 0


def describe(args: argparse.Namespace) -> int:
    rows: list[tuple[object, ...]] = (
        [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT")] if args.members
        else [("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")])
    for group in args.groups:
        with coordinator_connection(args, group, 0) as conn:
            described = conn.request(m.ApiKey.SHARE_GROUP_DESCRIBE, 1,
                                     m.ShareGroupDescribeRequest(group_ids=[group]))
            assert isinstance(described, m.ShareGroupDescribeResponse)
            d = described.groups[0]
            if d.error_code != ErrorCode.NONE:
                raise CommandError(f"share group '{group}': {ErrorCode(d.error_code).name}")
            if args.members:
                rows += [(group, mem.member_id, mem.client_host, mem.client_id, ",".join(
                    f"{t.topic_name}:{','.join(map(str, t.partitions))}"
                    for t in mem.assignment.topic_partitions) or "-") for mem in d.members]
                continue
            offsets = conn.request(m.ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                                   m.DescribeShareGroupOffsetsRequest(groups=[
                                       m.DescribeShareGroupOffsetsRequest
                                       .DescribeShareGroupOffsetsRequestGroup(
                                           group_id=group, topics=None)]))
        assert isinstance(offsets, m.DescribeShareGroupOffsetsResponse)
        g = offsets.groups[0]
        if g.error_code != ErrorCode.NONE:
            raise CommandError(f"share group '{group}': {ErrorCode(g.error_code).name}")
        for t in sorted(g.topics, key=lambda t: t.topic_name):
            for p in sorted(t.partitions, key=lambda p: p.partition_index):
                shown = (p.start_offset if p.start_offset >= 0 else "-",
                         p.lag if p.lag >= 0 else "-")
                rows.append((group, t.topic_name, p.partition_index, *shown))
    print_table(rows)
    return 0


def delete(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    futures = admin.delete_consumer_groups(args.groups, request_timeout=TIMEOUT_S)
    for group, future in futures.items():
        result(future, args)
        print(f"Deleted share group '{group}'.")
    return 0
