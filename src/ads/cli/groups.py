"""`ads groups`: list, describe, delete, reset-offsets, delete-offsets and
import-zookeeper-offsets, like `kafka-consumer-groups.sh`.

Everything goes through confluent-kafka's AdminClient, except OffsetDelete, which that
library does not expose and which is sent to the group's coordinator over an `ads.client`
connection. `describe` shows, per partition, the committed offset, the log end offset and
their difference (LAG), with the member that owns the partition. `reset-offsets` prints the
plan and changes nothing unless given `--execute`; like Kafka it needs the group to have no
active members. The ZooKeeper import reads the layout old consumers wrote,
`/consumers/<group>/offsets/<topic>/<partition>` holding the next offset as decimal text.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from ads.cli.common import (
    TIMEOUT_S,
    CommandError,
    UsageError,
    add_command,
    admin_client,
    coordinator_connection,
    print_table,
    result,
)

_REQUEST = {"request_timeout": TIMEOUT_S}
_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
           "CONSUMER-ID", "HOST", "CLIENT-ID")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    groups = sub.add_parser("groups", help=help_text)
    verbs = groups.add_subparsers(dest="groups_command", required=True, metavar="VERB")

    p = verbs.add_parser("list", help="list consumer groups")
    p.add_argument("--state", action="append", default=[],
                   help="only groups in this state, e.g. Stable or Empty (repeatable)")
    p.add_argument("--type", action="append", default=[], choices=["classic", "consumer"],
                   help="only groups of this protocol type (repeatable)")
    add_command(p, "groups list", list_)

    p = verbs.add_parser("describe", help="committed offsets, lag and members of groups")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.add_argument("--members", action="store_true", help="list the members instead")
    add_command(p, "groups describe", describe)

    p = verbs.add_parser("delete", help="delete groups that have no members")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    add_command(p, "groups delete", delete)

    p = verbs.add_parser("reset-offsets", help="move a group's committed offsets")
    add_reset_options(p, "every topic the group has committed offsets for")
    add_command(p, "groups reset-offsets", reset_offsets)

    p = verbs.add_parser("delete-offsets", help="delete a group's committed offsets")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P...]")
    add_command(p, "groups delete-offsets", delete_offsets)

    p = verbs.add_parser("import-zookeeper-offsets",
                         help="commit the offsets old consumers kept in ZooKeeper")
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT")
    p.add_argument("--group", action="append", default=[],
                   help="only this group (repeatable; default: every group found)")
    p.add_argument("--dry-run", action="store_true", help="only show what would be imported")
    p.add_argument("--force", action="store_true",
                   help="also import groups whose consumers are still registered")
    add_command(p, "groups import-zookeeper-offsets", import_zookeeper_offsets)


# -- list, describe, delete ---------------------------------------------------------------
def list_(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    kwargs: dict[str, Any] = dict(_REQUEST)
    try:
        if args.state:
            kwargs["states"] = {ConsumerGroupState[s.upper().replace("-", "_")]
                                for s in args.state}
        if args.type:
            kwargs["types"] = {ConsumerGroupType[t.upper()] for t in args.type}
    except KeyError as exc:
        raise UsageError(f"unknown group state {exc.args[0]!r}") from exc
    admin = admin_client(args)
    # ListGroups goes to every known broker; a fresh client knows none until it has
    # fetched metadata, and would report no groups at all.
    try:
        admin.list_topics(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise CommandError(f"cannot reach {args.bootstrap_server}: {exc.args[0].str()}") from exc
    listed = result(admin.list_consumer_groups(**kwargs), args)
    groups = sorted(listed.valid, key=lambda g: g.group_id)
    if args.state or args.type:
        rows: list[tuple[object, ...]] = [("GROUP", "STATE", "TYPE")]
        rows += [(g.group_id, _name(g.state), _name(g.type)) for g in groups]
        print_table(rows)
    else:
        for g in groups:
            print(g.group_id)
    return 0


def _name(value: Any) -> str:
    name = getattr(value, "name", str(value))
    return "".join(part.capitalize() for part in name.split("_"))


def _committed(admin: AdminClient, args: argparse.Namespace, group: str
               ) -> dict[tuple[str, int], TopicPartition]:
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                **_REQUEST)
    found = result(futures[group], args, group)
    return {(tp.topic, tp.partition): tp for tp in found.topic_partitions}


def _log_end_offsets(admin: AdminClient, args: argparse.Namespace,
                     partitions: Iterable[tuple[str, int]], spec: OffsetSpec | None = None
                     ) -> dict[tuple[str, int], int]:
    wanted = {TopicPartition(t, p): spec or OffsetSpec.latest() for t, p in partitions}
    if not wanted:
        return {}
    out = {}
    for tp, future in admin.list_offsets(wanted, **_REQUEST).items():
        try:
            out[(tp.topic, tp.partition)] = result(future, args).offset
        except CommandError:
            continue
    return out


def describe(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    names = list(dict.fromkeys(args.groups))
    futures = admin.describe_consumer_groups(names, **_REQUEST)
    missing = shown = 0
    for group in names:
        d = result(futures[group], args, group)
        if _name(d.state) == "Dead":
            # The coordinator's answer for a group it does not know, as Kafka's tool says.
            missing += 1
            print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
            continue
        if shown:
            print()
        shown += 1
        if args.members:
            _print_members(group, d)
        else:
            _print_offsets(admin, args, group, d)
    return 1 if missing else 0


def _print_members(group: str, d: Any) -> None:
    if not d.members:
        print(f"Consumer group '{group}' has no active members.")
        return
    rows: list[tuple[object, ...]] = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                       "#PARTITIONS")]
    rows += [(group, mem.member_id, mem.host, mem.client_id,
              len(mem.assignment.topic_partitions)) for mem in d.members]
    print_table(rows)


def _print_offsets(admin: AdminClient, args: argparse.Namespace, group: str, d: Any) -> None:
    owners: dict[tuple[str, int], Any] = {}
    for member in d.members:
        for tp in member.assignment.topic_partitions:
            owners[(tp.topic, tp.partition)] = member
    committed = _committed(admin, args, group)
    keys = sorted(set(committed) | set(owners))
    if not keys:
        print(f"Consumer group '{group}' has no active members and no committed offsets."
              f" (state {_name(d.state)})")
        return
    if not d.members:
        print(f"Consumer group '{group}' has no active members.")
    end = _log_end_offsets(admin, args, keys)
    rows: list[tuple[object, ...]] = [_HEADER]
    for key in keys:
        tp = committed.get(key)
        current = tp.offset if tp is not None and tp.offset >= 0 else None
        leo = end.get(key)
        lag = leo - current if leo is not None and current is not None else "-"
        owner = owners.get(key)
        rows.append((group, key[0], key[1], "-" if current is None else current,
                     "-" if leo is None else leo, lag,
                     owner.member_id if owner else "-", owner.host if owner else "-",
                     owner.client_id if owner else "-"))
    print_table(rows)


def delete(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    names = list(dict.fromkeys(args.groups))
    futures = admin.delete_consumer_groups(names, **_REQUEST)
    failed = False
    for group in names:
        try:
            result(futures[group], args, group)
            print(f"Deletion of group '{group}' succeeded.")
        except CommandError as exc:
            failed = True
            print(f"Deletion of group '{group}' failed: {exc}")
    return 1 if failed else 0


# -- reset-offsets ------------------------------------------------------------------------
def parse_topics(items: list[str]) -> list[tuple[str, list[int] | None]]:
    out = []
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise UsageError(f"invalid --topic {item!r}")
        try:
            out.append((topic, [int(p) for p in parts.split(",")] if sep else None))
        except ValueError as exc:
            raise UsageError(f"invalid partitions in --topic {item!r}") from exc
    return out


def topic_partitions(admin: AdminClient, args: argparse.Namespace,
                      topics: list[tuple[str, list[int] | None]]) -> list[tuple[str, int]]:
    md = admin.list_topics(timeout=TIMEOUT_S)
    out = []
    for topic, parts in topics:
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise CommandError(f"Topic '{topic}' does not exist.")
        for p in parts if parts is not None else sorted(t.partitions):
            if p not in t.partitions:
                raise CommandError(f"Partition {p} of topic '{topic}' does not exist.")
            out.append((topic, p))
    return out


def parse_datetime(text: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(f"invalid --to-datetime {text!r}") from exc
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Kafka's tool reads it
    return int(when.timestamp() * 1000)


def reset_offsets(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    group = args.group
    committed = _committed(admin, args, group)
    if args.all_topics:
        keys = sorted(committed)
    else:
        keys = topic_partitions(admin, args, parse_topics(args.topic))
    if args.execute:
        d = result(admin.describe_consumer_groups([group], **_REQUEST)[group], args, group)
        if d.members:
            raise CommandError(f"Assignments can only be reset if the group '{group}' is "
                               f"inactive, but the current state is {_name(d.state)}.")
    plan = reset_plan(admin, args, keys, {
        key: tp.offset for key, tp in committed.items() if tp.offset >= 0})
    rows: list[tuple[object, ...]] = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(group, t, p, o) for t, p, o in plan]
    if args.execute:
        if plan:
            futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for t, p, o in plan])], **_REQUEST)
            result(futures[group], args, group)
    elif not args.dry_run:
        warn_not_executed()
    print_table(rows)
    return 0


def add_reset_options(p: argparse.ArgumentParser, all_topics: str) -> None:
    """`reset-offsets`' group, its topics (`all_topics`: what --all-topics takes), where it
    moves to (`reset_plan`) and whether it does."""
    p.add_argument("--group", required=True)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]")
    scope.add_argument("--all-topics", action="store_true", help=all_topics)
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS[.sss][+hh:mm]")
    to.add_argument("--shift-by", type=int, metavar="N")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="only show the plan (also the default, with a warning)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")


def reset_plan(admin: AdminClient, args: argparse.Namespace, keys: list[tuple[str, int]],
               current: dict[tuple[str, int], int]) -> list[tuple[str, int, int]]:
    """(topic, partition, new offset) for each of `keys` as the reset options say, within
    the partition's log; `current`: the offsets now (for --shift-by)."""
    earliest = _log_end_offsets(admin, args, keys, OffsetSpec.earliest())
    latest = _log_end_offsets(admin, args, keys, OffsetSpec.latest())
    at: dict[tuple[str, int], int] = {}
    if args.to_datetime is not None:
        at = _log_end_offsets(admin, args, keys,
                              OffsetSpec.for_timestamp(parse_datetime(args.to_datetime)))
    plan = []
    for key in keys:
        low, high = earliest.get(key, 0), latest.get(key, 0)
        target = _target(args, low, high, current.get(key), at.get(key, -1))
        plan.append((key[0], key[1], min(max(target, low), high)))
    return plan


def warn_not_executed() -> None:
    # As Kafka's tool: a plan shown without either flag is not mistaken for a reset.
    print("WARN: nothing was changed: the offsets are committed only with --execute "
          "(give --dry-run to show the plan without this warning).", file=sys.stderr)


def _target(args: argparse.Namespace, low: int, high: int, current: int | None,
            at_time: int) -> int:
    """The new offset the reset option asks for, before clamping; `at_time` is the
    offset ListOffsets found for --to-datetime (-1: none, so the log end)."""
    if args.to_earliest:
        return low
    if args.to_latest:
        return high
    if args.to_offset is not None:
        return int(args.to_offset)
    if args.shift_by is not None:
        return (low if current is None else current) + int(args.shift_by)
    return high if at_time < 0 else at_time


# -- delete-offsets -----------------------------------------------------------------------
def delete_offsets(args: argparse.Namespace) -> int:
    # Loaded here: the protocol's classes cost the other verbs a tenth of a second.
    from ads.client import ClientError
    from ads.protocol import messages as m
    from ads.protocol.errors import ErrorCode

    admin = admin_client(args)
    keys = topic_partitions(admin, args, parse_topics(args.topic))
    by_topic: dict[str, list[int]] = {}
    for t, p in keys:
        by_topic.setdefault(t, []).append(p)
    T = m.OffsetDeleteRequest.OffsetDeleteRequestTopic  # noqa: N806
    req = m.OffsetDeleteRequest(group_id=args.group, topics=[
        T(name=t, partitions=[T.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in by_topic.items()])
    with coordinator_connection(args, args.group, 0) as conn:
        try:
            resp = conn.request(m.ApiKey.OFFSET_DELETE, 0, req)
        except ClientError as exc:
            raise CommandError(f"Deleting offsets of group '{args.group}' failed: "
                               f"{exc}") from exc
    assert isinstance(resp, m.OffsetDeleteResponse)
    if resp.error_code != ErrorCode.NONE:
        raise CommandError(f"Deleting offsets of group '{args.group}' failed: "
                           f"{ErrorCode(resp.error_code).name}")
    rows: list[tuple[object, ...]] = [("TOPIC", "PARTITION", "STATUS")]
    failed = False
    for topic in resp.topics:
        for part in topic.partitions:
            ok = part.error_code == ErrorCode.NONE
            failed |= not ok
            rows.append((topic.name, part.partition_index,
                         "Successful" if ok else f"Error: {ErrorCode(part.error_code).name}"))
    print(f"Request succeeded for deleting offsets from group {args.group}.")
    print_table(rows)
    return 1 if failed else 0


# -- import-zookeeper-offsets -------------------------------------------------------------
ZkGroups = dict[str, tuple[bool, dict[tuple[str, int], int]]]


def _read_zookeeper(zk: Any, groups: list[str]) -> ZkGroups:
    """Per group: (has registered consumers, {(topic, partition): offset})."""
    from kazoo.exceptions import NoNodeError

    try:
        names = groups or sorted(zk.get_children("/consumers"))
    except NoNodeError:
        return {}
    out = {}
    for group in names:
        base = f"/consumers/{group}"
        try:
            live = bool(zk.get_children(f"{base}/ids"))
        except NoNodeError:
            live = False
        offsets: dict[tuple[str, int], int] = {}
        try:
            topics = zk.get_children(f"{base}/offsets")
        except NoNodeError:
            topics = []
        for topic in sorted(topics):
            for partition in sorted(zk.get_children(f"{base}/offsets/{topic}"), key=str):
                data, _ = zk.get(f"{base}/offsets/{topic}/{partition}")
                try:
                    offsets[(topic, int(partition))] = int(data.decode().strip())
                except ValueError:
                    continue  # not an old consumer's offset node
        out[group] = (live, offsets)
    return out


def import_zookeeper_offsets(args: argparse.Namespace) -> int:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    zk = KazooClient(hosts=args.zookeeper, timeout=TIMEOUT_S)
    try:
        zk.start(timeout=TIMEOUT_S)
    except KazooTimeoutError as exc:
        raise CommandError(f"cannot reach ZooKeeper at {args.zookeeper}") from exc
    try:
        found = _read_zookeeper(zk, list(dict.fromkeys(args.group)))
    finally:
        zk.stop()
        zk.close()
    if not found:
        print("No consumer offsets found in ZooKeeper.")
        return 0
    admin = None if args.dry_run else admin_client(args)
    failed = False
    for group, (live, offsets) in found.items():
        if not offsets:
            print(f"Group '{group}': no offsets in ZooKeeper, skipped.")
            continue
        if live and not args.force:
            print(f"Group '{group}': consumers are still registered in ZooKeeper, skipped "
                  f"(use --force to import anyway).")
            continue
        summary = ", ".join(f"{t}-{p}={o}" for (t, p), o in sorted(offsets.items()))
        if admin is None:
            print(f"Group '{group}': would import {len(offsets)} offsets: {summary}")
            continue
        futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])],
            **_REQUEST)
        try:
            done = futures[group].result(timeout=TIMEOUT_S + 5)
            errors = [tp for tp in done.topic_partitions if tp.error is not None]
        except KafkaException as exc:
            failed = True
            print(f"Group '{group}': import failed: {exc.args[0].str()}")
            continue
        if errors:
            failed = True
            print(f"Group '{group}': import failed for " + ", ".join(
                f"{tp.topic}-{tp.partition} ({tp.error.str()})" for tp in errors))
        else:
            print(f"Group '{group}': imported {len(offsets)} offsets: {summary}")
    return 1 if failed else 0
