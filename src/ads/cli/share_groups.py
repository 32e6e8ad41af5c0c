"""`ads share-groups`: list, describe and delete share groups (KIP-932), like
`kafka-share-groups.sh`.

confluent-kafka's AdminClient has no share-group calls, so `list` sends ListGroups (v5,
filtered on the `share` type) to every broker and `describe` sends ShareGroupDescribe and
DescribeShareGroupOffsets to the group's coordinator over `ads.client` connections;
`delete` is DeleteGroups through the AdminClient. `describe` shows, per partition, the
share-partition's start offset (where its in-flight window begins: every record below it
is acknowledged or archived) and the lag behind the partition's high watermark; with
`--members`, the members and their assignments. `reset-offsets` (AlterShareGroupOffsets)
moves share-partitions' start offsets, planned as `ads groups reset-offsets` plans (the
start offsets are the current ones for --shift-by), and `delete-offsets`
(DeleteShareGroupOffsets) deletes a group's state of whole topics; both need a group
without members, as Kafka's tool does.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

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
from ads.cli.groups import (
    add_reset_options,
    parse_topics,
    reset_plan,
    topic_partitions,
    warn_not_executed,
)
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.client import Connection


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
    p = verbs.add_parser("reset-offsets", help="move a share group's start offsets")
    add_reset_options(p, "every topic the group has read or has offsets of")
    add_command(p, "share-groups reset-offsets", reset_offsets)
    p = verbs.add_parser("delete-offsets", help="delete a share group's state of topics")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC")
    add_command(p, "share-groups delete-offsets", delete_offsets)


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


def _group_offsets(conn: Connection, group: str, keys: list[tuple[str, int]] | None
                   ) -> m.DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup:
    """The group's part of DescribeShareGroupOffsets v1 for `keys` (None: the group's
    topics): start offsets and lag per share-partition."""
    G = m.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup  # noqa: N806
    by_topic: dict[str, list[int]] = {}
    for t, p in keys or ():
        by_topic.setdefault(t, []).append(p)
    r = conn.request(m.ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                     m.DescribeShareGroupOffsetsRequest(groups=[G(
                         group_id=group, topics=None if keys is None else [
                             G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                             for t, ps in by_topic.items()])]))
    assert isinstance(r, m.DescribeShareGroupOffsetsResponse)
    return r.groups[0]


def _start_offsets(args: argparse.Namespace, group: str,
                   keys: list[tuple[str, int]] | None) -> dict[tuple[str, int], int]:
    """The share-partitions' start offsets now (those without state left out); `keys`
    None: of all the group's topics."""
    with coordinator_connection(args, group, 0) as conn:
        g = _group_offsets(conn, group, keys)
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND and keys is not None:
        return {}  # AlterShareGroupOffsets makes the group, as Kafka's does
    if g.error_code != ErrorCode.NONE:
        raise CommandError(f"share group '{group}': {ErrorCode(g.error_code).name}")
    return {(t.topic_name, p.partition_index): p.start_offset
            for t in g.topics for p in t.partitions if p.start_offset >= 0}


def reset_offsets(args: argparse.Namespace) -> int:
    group = args.group
    admin = admin_client(args)
    if args.all_topics:
        starts = _start_offsets(args, group, None)
        keys = sorted(starts)
    else:
        keys = topic_partitions(admin, args, parse_topics(args.topic))
        starts = _start_offsets(args, group, keys)
    plan = reset_plan(admin, args, keys, starts)
    if args.execute and plan:
        _alter(args, group, plan)
    elif not args.execute and not args.dry_run:
        warn_not_executed()
    print_table([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                 *((group, t, p, o) for t, p, o in plan)])
    return 0


def _alter(args: argparse.Namespace, group: str, plan: list[tuple[str, int, int]]) -> None:
    Q = m.AlterShareGroupOffsetsRequest  # noqa: N806
    T = Q.AlterShareGroupOffsetsRequestTopic  # noqa: N806
    Part = T.AlterShareGroupOffsetsRequestPartition  # noqa: N806
    by_topic: dict[str, list[m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
                             .AlterShareGroupOffsetsRequestPartition]] = {}
    for t, p, o in plan:
        by_topic.setdefault(t, []).append(Part(partition_index=p, start_offset=o))
    with coordinator_connection(args, group, 0) as conn:
        r = conn.request(m.ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, Q(group_id=group, topics=[
            T(topic_name=t, partitions=ps) for t, ps in by_topic.items()]))
    assert isinstance(r, m.AlterShareGroupOffsetsResponse)
    if r.error_code == ErrorCode.NON_EMPTY_GROUP:
        raise CommandError(f"Share group '{group}' is not empty: its offsets can only be "
                           "reset while it has no members.")
    errors = [f"{t.topic_name}:{p.partition_index} {ErrorCode(p.error_code).name}"
              for t in r.responses for p in t.partitions if p.error_code != ErrorCode.NONE]
    if r.error_code != ErrorCode.NONE or errors:
        raise CommandError(f"Resetting the offsets of share group '{group}' failed: "
                           + (", ".join(errors) or ErrorCode(r.error_code).name))


def delete_offsets(args: argparse.Namespace) -> int:
    group = args.group
    Q = m.DeleteShareGroupOffsetsRequest  # noqa: N806
    with coordinator_connection(args, group, 0) as conn:
        r = conn.request(m.ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, Q(group_id=group, topics=[
            Q.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in args.topic]))
    assert isinstance(r, m.DeleteShareGroupOffsetsResponse)
    if r.error_code != ErrorCode.NONE:
        raise CommandError(f"Deleting the offsets of share group '{group}' failed: "
                           f"{ErrorCode(r.error_code).name}")
    failed = False
    rows: list[tuple[object, ...]] = [("TOPIC", "STATUS")]
    for t in r.responses:
        ok = t.error_code == ErrorCode.NONE
        failed |= not ok
        rows.append((t.topic_name, "Successful" if ok else
                     f"Error: {ErrorCode(t.error_code).name}"))
    print_table(rows)
    return 1 if failed else 0


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
            g = _group_offsets(conn, group, None)
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
