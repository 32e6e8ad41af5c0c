"""`ads quotas alter|describe`: client quotas, as `kafka-configs.sh --entity-type users` /
`--entity-type clients` manages them.

    ads quotas alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    ads quotas alter --entity-type users --entity-name alice --entity-type clients \\
        --entity-default --delete-config producer_byte_rate
    ads quotas describe --entity-type clients

Each `--entity-type` is followed by `--entity-name NAME` or `--entity-default`; given
twice (users, then clients) it names a user's client id. `describe` without a name lists
every entity of the type (with `--entity-type users --entity-type clients`, every user's
client ids). Sent as AlterClientQuotas / DescribeClientQuotas over a plain connection to
the first bootstrap server (`ads.client`: PLAINTEXT only), since confluent-kafka has no
client quota calls.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ads.cli.common import (
    CommandError,
    UsageError,
    add_client_arguments,
    connect_broker,
    parse_assignments,
    run_command,
)
from ads.client import ClientError, parse_servers
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

_TYPES = {"users": "user", "clients": "client-id"}
_SHOWN = {"user": "user-principal", "client-id": "client-id"}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
ACR = m.AlterClientQuotasRequest


class _EntityAction(argparse.Action):
    """Keeps --entity-type / --entity-name / --entity-default in the order given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None
                 ) -> None:
        entities: list[list[Any]] = getattr(namespace, "entities", None) or []
        if option_string == "--entity-type":
            entities.append([values, None, False])
        elif not entities:
            parser.error(f"{option_string} must follow an --entity-type")
        elif option_string == "--entity-name":
            entities[-1][1] = values
        else:
            entities[-1][2] = True
        namespace.entities = entities


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    p = sub.add_parser("quotas", help=help_text)
    verbs = p.add_subparsers(dest="verb", required=True)
    for verb, func in (("alter", _alter), ("describe", _describe)):
        v = verbs.add_parser(verb)
        add_client_arguments(v)
        v.add_argument("--entity-type", choices=sorted(_TYPES), action=_EntityAction,
                       help="users or clients; twice (users, clients) for a user's client id")
        v.add_argument("--entity-name", action=_EntityAction, metavar="NAME",
                       help="the name of the entity of the --entity-type before it")
        v.add_argument("--entity-default", nargs=0, action=_EntityAction,
                       help="the <default> entity of the --entity-type before it")
        if verb == "alter":
            v.add_argument("--add-config", metavar="K=V,...", default="",
                           help="quotas to set (producer_byte_rate, consumer_byte_rate, "
                                "request_percentage)")
            v.add_argument("--delete-config", metavar="K,...", default="",
                           help="quotas to remove")
        v.set_defaults(func=run_command(f"quotas {verb}", func), entities=[])


def _entities(args: argparse.Namespace) -> list[tuple[str, str | None, bool]]:
    entities = [(str(t), n, bool(d)) for t, n, d in args.entities]
    if not entities:
        raise UsageError("give --entity-type users or clients")
    if len(entities) > 2 or [t for t, _, _ in entities] not in (["users"], ["clients"],
                                                                ["users", "clients"]):
        raise UsageError("entity types are users, clients, or users then clients")
    for kind, name, default in entities:
        if name is not None and default:
            raise UsageError(f"--entity-name and --entity-default both given for {kind}")
    return entities


def _connection(args: argparse.Namespace) -> Any:
    try:
        host, port = parse_servers(args.bootstrap_server)[0]
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return connect_broker(args, host, port)


def _alter(args: argparse.Namespace) -> int:
    entities = _entities(args)
    if any(name is None and not default for _, name, default in entities):
        raise UsageError("alter needs --entity-name or --entity-default for each type")
    ops = [ACR.EntryData.OpData(key=k, value=_number(k, v))
           for k, v in parse_assignments(filter(None, args.add_config.split(",")),
                                         "--add-config").items()]
    ops += [ACR.EntryData.OpData(key=k.strip(), remove=True)
            for k in args.delete_config.split(",") if k.strip()]
    if not ops:
        raise UsageError("give --add-config or --delete-config")
    entity = [ACR.EntryData.EntityData(entity_type=_TYPES[kind], entity_name=name)
              for kind, name, _ in entities]
    request = ACR(entries=[ACR.EntryData(entity=entity, ops=ops)])
    with _connection(args) as conn:
        try:
            response = conn.request(m.ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
        except ClientError as exc:
            raise CommandError(str(exc)) from exc
    [result] = response.entries
    if result.error_code != ErrorCode.NONE:
        raise CommandError(f"{ErrorCode(result.error_code).name}: {result.error_message}")
    print(f"Completed updating config for {_entity_text(entity)}.")
    return 0


def _number(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError as exc:
        raise UsageError(f"{key}={value}: not a number") from exc


def _describe(args: argparse.Namespace) -> int:
    entities = _entities(args)
    components = [m.DescribeClientQuotasRequest.ComponentData(
        entity_type=_TYPES[kind],
        match_type=EXACT if name is not None else DEFAULT if default else SPECIFIED,
        match=name) for kind, name, default in entities]
    request = m.DescribeClientQuotasRequest(components=components, strict=True)
    with _connection(args) as conn:
        try:
            response = conn.request(m.ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, request)
        except ClientError as exc:
            raise CommandError(str(exc)) from exc
    if response.error_code != ErrorCode.NONE:
        raise CommandError(f"{ErrorCode(response.error_code).name}: {response.error_message}")
    for entry in response.entries or []:
        values = ", ".join(f"{v.key}={v.value}" for v in entry.values)
        print(f"Quota configs for {_entity_text(entry.entity)} are {values}")
    return 0


def _entity_text(entity: Sequence[Any]) -> str:
    return ", ".join(f"the default {_SHOWN.get(e.entity_type, e.entity_type)}"
                     if e.entity_name is None else
                     f"{_SHOWN.get(e.entity_type, e.entity_type)} '{e.entity_name}'"
                     for e in entity)
