"""`ads users`: SCRAM users, as `kafka-configs.sh --entity-type users` manages them.

    ads users create --user alice [--password PW] [--mechanism SCRAM-SHA-256] [--iterations N]
    ads users delete --user alice [--mechanism SCRAM-SHA-512]
    ads users list [--user alice ...]

`create` sets (or replaces) the user's credential for each mechanism (both SCRAM mechanisms
unless `--mechanism` names some), like `kafka-configs.sh --alter --add-config
'SCRAM-SHA-256=[iterations=8192,password=...]'`; without `--password` it reads the password
from the first line of standard input, so it need not appear in the process list. `delete`
removes the named mechanisms' credentials (all the user has, by default). `list` prints each
user's mechanisms and iterations, never secrets.

They are AlterUserScramCredentials / DescribeUserScramCredentials calls through
confluent-kafka's AdminClient, so they work against any Kafka cluster; against a SASL
listener, pass the admin's credentials with `--command-config` (`security.protocol`,
`sasl.mechanism`, `sasl.username`, `sasl.password`). PLAIN users live in the brokers' JAAS
configuration instead, which these commands do not touch.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from ads.cli.common import (
    UsageError,
    add_command,
    admin_client,
    print_table,
    result,
)

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
              "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
NAMES = {v: k for k, v in MECHANISMS.items()}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    users = sub.add_parser("users", help=help_text)
    verbs = users.add_subparsers(dest="users_command", required=True, metavar="VERB")

    p = verbs.add_parser("create", help="set a user's SCRAM credentials")
    p.add_argument("--user", required=True)
    p.add_argument("--password", help="the password (default: read from standard input)")
    _mechanism_argument(p)
    p.add_argument("--iterations", type=int, default=4096,
                   help="PBKDF2 iterations, 4096-16384 (default 4096)")
    add_command(p, "users create", create)

    p = verbs.add_parser("delete", help="delete a user's SCRAM credentials")
    p.add_argument("--user", required=True)
    _mechanism_argument(p)
    add_command(p, "users delete", delete)

    p = verbs.add_parser("list", help="users with SCRAM credentials")
    p.add_argument("--user", action="append", default=[], help="only this user (repeatable)")
    add_command(p, "users list", list_)


def _mechanism_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mechanism", action="append", default=[], choices=sorted(MECHANISMS),
                   help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both)")


def _alter(args: argparse.Namespace, alterations: list[Any]) -> None:
    admin = admin_client(args)  # kept until the answers: a destroyed client fails its futures
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        result(future, args, user)


def create(args: argparse.Namespace) -> int:
    password = args.password
    if password is None:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise UsageError("the password is empty (give --password or a line on standard input)")
    mechanisms = args.mechanism or sorted(MECHANISMS)
    _alter(args, [UserScramCredentialUpsertion(
        args.user, ScramCredentialInfo(MECHANISMS[name], args.iterations), password.encode())
        for name in dict.fromkeys(mechanisms)])
    print(f"Set {', '.join(dict.fromkeys(mechanisms))} credentials of user '{args.user}'.")
    return 0


def _described(args: argparse.Namespace, users: list[str] | None) -> dict[str, Any]:
    admin = admin_client(args)
    answer = admin.describe_user_scram_credentials(users or None)
    if isinstance(answer, dict):
        return {user: result(future, args, user) for user, future in answer.items()}
    found: dict[str, Any] = result(answer, args)
    return found


def delete(args: argparse.Namespace) -> int:
    mechanisms = args.mechanism
    if not mechanisms:
        infos = _described(args, [args.user])[args.user].scram_credential_infos
        mechanisms = [NAMES[i.mechanism] for i in infos]
    _alter(args, [UserScramCredentialDeletion(args.user, MECHANISMS[name])
                  for name in dict.fromkeys(mechanisms)])
    print(f"Deleted {', '.join(dict.fromkeys(mechanisms))} credentials of user '{args.user}'.")
    return 0


def list_(args: argparse.Namespace) -> int:
    rows: list[tuple[object, ...]] = [("USER", "MECHANISM", "ITERATIONS")]
    for user, description in sorted(_described(args, list(dict.fromkeys(args.user))).items()):
        for info in sorted(description.scram_credential_infos, key=lambda i: i.mechanism.value):
            rows.append((user, NAMES[info.mechanism], info.iterations))
    print_table(rows)
    return 0
