"""`ads acls add|remove|list`: ACLs managed like Kafka's `kafka-acls.sh`, through the admin
API (CreateAcls, DeleteAcls, DescribeAcls) of confluent-kafka, so `--command-config` brings
the client's security settings.

The flags are kafka-acls.sh's: principals and hosts to allow or deny
(`--allow-principal User:alice --allow-host 10.0.0.1`; a principal without hosts gets
`*`), operations (`--operation Read`, repeatable, default All), resources (`--topic`,
`--group`, `--transactional-id`, each repeatable, and `--cluster`) with
`--resource-pattern-type` (literal or prefixed when adding; match and any also filter when
removing or listing), and the role shortcuts: `--producer` (WRITE, DESCRIBE and CREATE on
the topics, WRITE and DESCRIBE on the transactional ids, IDEMPOTENT_WRITE on the cluster
with `--idempotent`) and `--consumer` (READ and DESCRIBE on the topics, READ on the
groups). Every combination of principal, host, operation and resource is one ACL.

`remove` without principals removes every ACL of the resources named; it asks first
unless `--force` (an answer other than "y", or no terminal, removes nothing). `list`
without a resource lists every ACL, with `--principal` only that principal's. librdkafka
reports a refused DescribeAcls as an empty list; when the list is empty over PLAINTEXT,
`list` asks the broker once more over an `ads.client` connection so a refusal
(CLUSTER_AUTHORIZATION_FAILED, or SECURITY_DISABLED without an authorizer) is reported.

Not offered: `--delegation-token` and `--user-principal` resources (ADS has neither
delegation tokens nor user resources), `--bootstrap-controller`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from confluent_kafka import admin as ck

from ads.broker.authorized_operations import SUPPORTED
from ads.cli.common import (
    CommandError,
    UsageError,
    add_client_arguments,
    admin_client,
    connect_broker,
    result,
    run_command,
)
from ads.client import ClientError, parse_servers
from ads.metadata.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

Op = AclOperation
PRODUCER_TOPIC_OPS = (Op.WRITE, Op.DESCRIBE, Op.CREATE)
PRODUCER_TXN_OPS = (Op.WRITE, Op.DESCRIBE)
CONSUMER_TOPIC_OPS = (Op.READ, Op.DESCRIBE)
CONSUMER_GROUP_OPS = (Op.READ,)
# (resource type, pattern type, name) of a resource or resource filter.
Resource = tuple[ResourceType, PatternType, str]
# confluent-kafka's filters take None for "any" (its type hints say str).
ANY: Any = None
# (principal, host, operation, permission: "ALLOW" / "DENY").
Entry = tuple[str, str, AclOperation, str]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    acls = sub.add_parser("acls", help=help_text)
    verbs = acls.add_subparsers(dest="acls_command", required=True, metavar="VERB")
    p = verbs.add_parser("add", help="add ACLs")
    _resources(p)
    _entries(p)
    p.set_defaults(func=run_command("acls add", add))
    p = verbs.add_parser("remove", help="remove ACLs")
    _resources(p)
    _entries(p)
    p.add_argument("--force", action="store_true", help="do not ask before removing")
    p.set_defaults(func=run_command("acls remove", remove))
    p = verbs.add_parser("list", help="list ACLs")
    _resources(p)
    p.add_argument("--principal", action="append", default=[],
                   help="only this principal's ACLs (Type:name, repeatable)")
    p.set_defaults(func=run_command("acls list", list_))


def _resources(p: argparse.ArgumentParser) -> None:
    add_client_arguments(p)
    p.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    p.add_argument("--group", action="append", default=[],
                   help="a consumer group (repeatable)")
    p.add_argument("--transactional-id", action="append", default=[],
                   help="a transactional id (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster")
    p.add_argument("--resource-pattern-type", default="literal",
                   choices=("literal", "prefixed", "match", "any"), type=str.lower,
                   help="how the resource names match (default literal; adding takes "
                        "literal or prefixed)")


def _entries(p: argparse.ArgumentParser) -> None:
    for verb in ("allow", "deny"):
        p.add_argument(f"--{verb}-principal", action="append", default=[],
                       metavar="TYPE:NAME", help=f"principal to {verb} (repeatable)")
        p.add_argument(f"--{verb}-host", action="append", default=[], metavar="HOST",
                       help=f"host the {verb} principals connect from (default *)")
    p.add_argument("--operation", action="append", default=[],
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                        "DescribeConfigs, AlterConfigs, IdempotentWrite or All "
                        "(repeatable; default All)")
    p.add_argument("--producer", action="store_true",
                   help="the producer role on the topics and transactional ids")
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--consumer", action="store_true",
                   help="the consumer role on the topics and groups")


def _named(args: argparse.Namespace, pattern: PatternType) -> list[Resource]:
    found: list[Resource] = [(ResourceType.TOPIC, pattern, n) for n in args.topic]
    found += [(ResourceType.GROUP, pattern, n) for n in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, pattern, n) for n in args.transactional_id]
    if args.cluster or getattr(args, "idempotent", False):
        found.append((ResourceType.CLUSTER, PatternType.LITERAL, CLUSTER_NAME))
    return found


def _principals(values: Iterable[str]) -> list[str]:
    out = []
    for value in values:
        kind, sep, name = value.strip().partition(":")
        if not sep or not kind or not name:
            raise UsageError(f"invalid principal {value!r}: expected Type:name, "
                             "e.g. User:alice")
        out.append(value.strip())
    return out


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    try:
        ops = [Op.parse(o.strip()) for o in args.operation] or [Op.ALL]
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if any(o in (Op.ANY, Op.UNKNOWN) for o in ops):
        raise UsageError("--operation Any is a filter, not an operation")
    return ops


def _check(args: argparse.Namespace) -> None:
    role = args.producer or args.consumer
    if role and (args.operation or args.deny_principal or args.deny_host):
        raise UsageError("--producer and --consumer take no --operation, --deny-principal "
                         "or --deny-host")
    if args.producer and not args.topic:
        raise UsageError("with --producer you must give a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("--idempotent goes with --producer")
    if args.consumer and (not args.topic or not args.group or (
            not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("with --consumer you must give a --topic and a --group, and no "
                         "--cluster or --transactional-id")


def _entries_for(args: argparse.Namespace, ops: Iterable[AclOperation]) -> set[Entry]:
    out: set[Entry] = set()
    for verb, permission in (("allow", "ALLOW"), ("deny", "DENY")):
        principals = _principals(getattr(args, f"{verb}_principal"))
        hosts = [h.strip() for h in getattr(args, f"{verb}_host")] or ["*"]
        out |= {(p, h, op, permission) for p in principals for h in hosts for op in ops}
    return out


def _wanted(args: argparse.Namespace, pattern: PatternType) -> dict[Resource, set[Entry]]:
    """kafka-acls.sh's expansion: each resource with the ACLs the flags give it."""
    _check(args)
    resources = _named(args, pattern)
    if not resources:
        raise UsageError("give at least one resource: --topic, --group, --transactional-id "
                         "or --cluster")
    wanted: dict[Resource, set[Entry]] = {}
    if not (args.producer or args.consumer):
        entries = _entries_for(args, _operations(args))
        wanted = {r: set(entries) for r in resources}
    for r in resources:
        ops: tuple[AclOperation, ...] = ()
        if args.producer:
            ops += {ResourceType.TOPIC: PRODUCER_TOPIC_OPS,
                    ResourceType.TRANSACTIONAL_ID: PRODUCER_TXN_OPS,
                    ResourceType.CLUSTER: (Op.IDEMPOTENT_WRITE,) if args.idempotent else (),
                    }.get(r[0], ())
        if args.consumer:
            ops += {ResourceType.TOPIC: CONSUMER_TOPIC_OPS,
                    ResourceType.GROUP: CONSUMER_GROUP_OPS}.get(r[0], ())
        if ops:
            wanted.setdefault(r, set()).update(_entries_for(args, ops))
    for (rtype, _, _), entries in wanted.items():
        bad = {e[2] for e in entries} - SUPPORTED[rtype] - {Op.ALL}
        if bad:
            allowed = ", ".join(sorted(o.camel for o in SUPPORTED[rtype]))
            raise UsageError(f"{rtype.name} takes only the operations {allowed} and All "
                             f"(not {', '.join(sorted(o.camel for o in bad))})")
    return wanted


def _pattern(args: argparse.Namespace) -> PatternType:
    return PatternType.parse(args.resource_pattern_type)


def _ck_resource(rtype: ResourceType) -> Any:
    # confluent-kafka names the cluster resource BROKER.
    return ck.ResourceType.BROKER if rtype is ResourceType.CLUSTER else ck.ResourceType[
        rtype.name]


def _binding(r: Resource, e: Entry) -> ck.AclBinding:
    return ck.AclBinding(_ck_resource(r[0]), r[2], ck.ResourcePatternType[r[1].name],
                         e[0], e[1], ck.AclOperation[e[2].name],
                         ck.AclPermissionType[e[3]])


def _filter(r: Resource, e: Entry | None) -> ck.AclBindingFilter:
    if e is None:
        return ck.AclBindingFilter(_ck_resource(r[0]), r[2], ck.ResourcePatternType[r[1].name],
                                   ANY, ANY, ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    return ck.AclBindingFilter(_ck_resource(r[0]), r[2], ck.ResourcePatternType[r[1].name],
                               e[0], e[1], ck.AclOperation[e[2].name],
                               ck.AclPermissionType[e[3]])


def _show_resource(rtype: Any, name: str, pattern: Any) -> str:
    kind = "CLUSTER" if rtype == ck.ResourceType.BROKER else rtype.name
    return f"ResourcePattern(resourceType={kind}, name={name}, patternType={pattern.name})"


def _show_entry(principal: str, host: str, operation: str, permission: str) -> str:
    return (f"(principal={principal}, host={host}, operation={operation}, "
            f"permissionType={permission})")


def _show(r: Resource) -> str:
    return _show_resource(_ck_resource(r[0]), r[2], ck.ResourcePatternType[r[1].name])


def _show_binding_resource(b: ck.AclBinding) -> str:
    return _show_resource(b.restype, b.name, b.resource_pattern_type)


def _show_binding_entry(b: ck.AclBinding) -> str:
    return _show_entry(b.principal, b.host, _name(b.operation), _name(b.permission_type))


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


def add(args: argparse.Namespace) -> int:
    pattern = _pattern(args)
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(f"--resource-pattern-type {args.resource_pattern_type} is not "
                         "valid when adding ACLs: literal or prefixed")
    wanted = _wanted(args, pattern)
    if any(not entries for entries in wanted.values()):
        raise UsageError("give --allow-principal or --deny-principal to add ACLs")
    client = admin_client(args)
    for r, entries in wanted.items():
        ordered = sorted(entries, key=lambda e: (e[0], e[1], e[2].name, e[3]))
        print(f"Adding ACLs for resource `{_show(r)}`:")
        for e in ordered:
            print(f" \t{_show_entry(e[0], e[1], e[2].name, e[3])}")
        print()
        futures = client.create_acls([_binding(r, e) for e in ordered])
        for future in futures.values():
            result(future, args)
    return 0


def remove(args: argparse.Namespace) -> int:
    wanted = _wanted(args, _pattern(args))
    client = admin_client(args)
    for r, entries in wanted.items():
        shown = _show(r)
        question = (f"Remove every ACL of resource filter `{shown}`? (y/n)" if not entries
                    else f"Remove {len(entries)} ACL(s) from resource filter `{shown}`? (y/n)")
        if not args.force and not _confirmed(question):
            print("Nothing removed.")
            continue
        filters = [_filter(r, None)] if not entries else [_filter(r, e) for e in entries]
        for future in client.delete_acls(filters).values():
            for b in result(future, args):
                print(f"Removed from `{_show_binding_resource(b)}`: {_show_binding_entry(b)}")
    return 0


def _confirmed(question: str) -> bool:
    print(question, flush=True)
    answer = sys.stdin.readline() if sys.stdin and not sys.stdin.closed else ""
    return answer.strip().lower() == "y"


def list_(args: argparse.Namespace) -> int:
    principals = set(_principals(args.principal))
    pattern = _pattern(args)
    filters = [_filter(r, None) for r in _named(args, pattern)] or [ck.AclBindingFilter(
        ck.ResourceType.ANY, ANY, ck.ResourcePatternType.ANY, ANY, ANY,
        ck.AclOperation.ANY, ck.AclPermissionType.ANY)]
    client = admin_client(args)
    by_resource: dict[str, list[str]] = {}
    for flt in filters:
        for b in result(client.describe_acls(flt), args):
            if principals and b.principal not in principals:
                continue
            key, line = _show_binding_resource(b), _show_binding_entry(b)
            if line not in by_resource.setdefault(key, []):
                by_resource[key].append(line)
    if not by_resource:
        _check_empty(args)
    for key in sorted(by_resource):
        print(f"Current ACLs for resource `{key}`:")
        for line in sorted(by_resource[key]):
            print(f" \t{line}")
        print()
    return 0


def _check_empty(args: argparse.Namespace) -> None:
    """librdkafka answers a refused DescribeAcls (CLUSTER_AUTHORIZATION_FAILED, or
    SECURITY_DISABLED without an authorizer) as an empty list: the command asks again on
    its own connection, with the same client properties, so the refusal is reported."""
    try:
        host, port = parse_servers(args.bootstrap_server)[0]
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with connect_broker(args, host, port) as conn:
        try:
            r = conn.request(m.ApiKey.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
                resource_type_filter=ResourceType.ANY, resource_name_filter=None,
                pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
                operation=Op.ANY, permission_type=AclPermissionType.ANY))
        except ClientError as exc:
            raise CommandError(f"cannot reach {args.bootstrap_server}: {exc}") from exc
    assert isinstance(r, m.DescribeAclsResponse)
    if r.error_code != ErrorCode.NONE:
        name = ErrorCode(r.error_code).name
        raise CommandError(f"{r.error_message} ({name})" if r.error_message else name)
