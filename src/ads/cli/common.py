"""What the client commands (`ads topics`, `ads produce`, `ads consume`) share.

Each command is a function `(args) -> exit status`. It raises `UsageError` for a bad
invocation (exit 2) and `CommandError` for a failed operation (exit 1); `run_command` turns
both, and the client library's `KafkaException`, into one line on stderr, so an expected
failure never shows a traceback.

Client properties are layered as Kafka's tools do: built-in defaults, then the profile
(`ads.cli.settings`), then the `--command-config` file, then the explicit flags of the
command. The same properties secure the command's own protocol connections
(`connect_broker`: TLS, SASL), so a command works against any listener its confluent-kafka
clients can use. The bootstrap servers come from the flag, `ADS_BOOTSTRAP_SERVERS`, the
profile or the default (`resolve_settings`); before its first client is made a command
checks that one of them accepts a connection (`check_reachable`), so a wrong address
fails in about two seconds with a hint instead of after the client's timeout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from ads.cli.settings import (
    BOOTSTRAP_ENV,
    BOOTSTRAP_KEY,
    CONNECT_TIMEOUT_S,
    DEFAULT_BOOTSTRAP,
    PROFILE_ENV,
    profile_path,
)
from ads.common.properties import PropertiesError, parse_properties
from ads.common.servers import parse_servers

if TYPE_CHECKING:
    # Imported where used: the protocol's message classes alone take a tenth of a second,
    # which a command that only uses confluent-kafka should not pay at start-up.
    from confluent_kafka.admin import AdminClient

    from ads.client import Connection, ConnectionFactory

# How long a command waits for the cluster before it gives up with one clear line.
TIMEOUT_S = 10.0

# Kafka's own definition of an internal topic (`Topic.INTERNAL_TOPICS`).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

# Errors that mean "the cluster could not be reached", as opposed to a refusal.
_UNREACHABLE = frozenset({
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE, KafkaError._WAIT_COORD, KafkaError._TIMED_OUT_QUEUE,
})

# librdkafka logs every failed connection attempt; the command reports the outcome once.
_client_log = logging.getLogger("ads.cli.client")
_client_log.addHandler(logging.NullHandler())
_client_log.propagate = False

T = TypeVar("T")
Command = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """The command line itself is wrong: exit status 2."""


class CommandError(Exception):
    """The operation failed: exit status 1."""


def add_client_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help=f"broker(s) to connect to (default: ${BOOTSTRAP_ENV}, the "
                        f"profile's {BOOTSTRAP_KEY}, else {DEFAULT_BOOTSTRAP}; see ads --help)")
    p.add_argument("--command-config", metavar="FILE",
                   help="properties file with client configs (librdkafka names), over "
                        "the profile's")


def resolve_settings(args: argparse.Namespace) -> None:
    """Fills in `args.bootstrap_server` where the flag was not given (flag, environment,
    profile, default) and `args.client_properties` (the profile's, then
    `--command-config`'s); records where the address came from, for error messages."""
    path, named = profile_path()
    profile: dict[str, str] = {}
    if named or path.is_file():
        profile = read_properties(str(path), f"the profile ({PROFILE_ENV})" if named
                                  else "the profile")
    if args.bootstrap_server:
        args.bootstrap_source = "--bootstrap-server"
    elif os.environ.get(BOOTSTRAP_ENV):
        args.bootstrap_server, args.bootstrap_source = os.environ[BOOTSTRAP_ENV], BOOTSTRAP_ENV
    elif profile.get(BOOTSTRAP_KEY):
        args.bootstrap_server, args.bootstrap_source = profile[BOOTSTRAP_KEY], str(path)
    else:
        args.bootstrap_server, args.bootstrap_source = DEFAULT_BOOTSTRAP, "the default"
    props = {k: v for k, v in profile.items() if k != BOOTSTRAP_KEY}
    if getattr(args, "command_config", None):
        props.update(read_properties(args.command_config))
    args.client_properties = props


def check_reachable(args: argparse.Namespace) -> None:
    """Raises `CommandError` unless one bootstrap server accepts a TCP connection within
    `CONNECT_TIMEOUT_S` (checked once per command): the client libraries would retry for
    their whole timeout and then report only a timeout."""
    if getattr(args, "reachable", False):
        return
    try:
        servers = parse_servers(args.bootstrap_server)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    reason = "timed out"
    for i, (host, port) in enumerate(servers):
        # Each server its share of what is left, so one that never answers does not use up
        # the time of those after it.
        left = (deadline - time.monotonic()) / (len(servers) - i)
        if left <= 0:
            break
        try:
            with socket.create_connection((host, port), timeout=left):
                args.reachable = True
                return
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
    path, _ = profile_path()
    raise CommandError(
        f"cannot connect to {args.bootstrap_server} (from {args.bootstrap_source}): {reason}."
        f" Is a broker listening there? Give its address with --bootstrap-server, "
        f"{BOOTSTRAP_ENV} or {BOOTSTRAP_KEY} in {path}.")


def read_properties(path: str, what: str = "--command-config") -> dict[str, str]:
    """A `--command-config` file or the profile, read by `ads.common.properties` (Java's
    `.properties` rules). Values lose trailing blanks: Kafka's clients trim them, librdkafka
    would not."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path!r}: {exc.strerror}") from exc
    try:
        props = parse_properties(data)
    except PropertiesError as exc:
        raise UsageError(f"{path}:{exc.line}: {exc}") from exc
    return {key: value.rstrip(" \t\f") for key, value in props.items()}


def client_config(args: argparse.Namespace, defaults: dict[str, Any] | None = None,
                  overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"logger": _client_log}
    conf.update(defaults or {})
    if args.client_properties:
        from ads.client import ClientConfigError
        from ads.client.security import librdkafka_properties

        try:
            conf.update(librdkafka_properties(args.client_properties))
        except ClientConfigError as exc:
            raise UsageError(f"invalid client configuration: {exc}") from exc
    check_reachable(args)
    conf["bootstrap.servers"] = args.bootstrap_server
    conf.update(overrides or {})
    return conf


def add_command(p: argparse.ArgumentParser, name: str, func: Command) -> None:
    """A verb that takes the client arguments and runs `func` under `run_command`."""
    add_client_arguments(p)
    p.set_defaults(func=run_command(name, func))


def admin_client(args: argparse.Namespace) -> AdminClient:
    """confluent-kafka's AdminClient with the command's client settings."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - when a verb needs it

    return make_client(AdminClient, client_config(args))


def make_client(factory: Callable[[dict[str, Any]], T], conf: dict[str, Any]) -> T:
    """Builds a client; a property the library refuses is the user's usage error."""
    try:
        return factory(conf)
    except (KafkaException, ValueError, TypeError) as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if isinstance(err, KafkaError) else str(err)
        raise UsageError(f"invalid client configuration: {text}") from exc


def connection_factory(args: argparse.Namespace) -> ConnectionFactory:
    """Blocking connections secured as `--command-config` says; its files are read once
    per command. A property that cannot be used is a usage error."""
    from ads.client import ClientConfigError, ConnectionFactory

    factory = getattr(args, "connection_factory", None)
    if isinstance(factory, ConnectionFactory):
        return factory
    check_reachable(args)
    try:
        factory = ConnectionFactory(args.client_properties, client_id="ads-cli",
                                    timeout_s=TIMEOUT_S)
    except ClientConfigError as exc:
        raise UsageError(f"invalid client configuration: {exc}") from exc
    args.connection_factory = factory
    return factory


def connect_broker(args: argparse.Namespace, host: str, port: int) -> Connection:
    """A blocking protocol connection (`ads.client`), for what the AdminClient lacks,
    authenticated as the command's client properties say."""
    from ads.client import ClientError

    factory = connection_factory(args)
    try:
        return factory(host, port)
    except ClientError as exc:
        raise CommandError(str(exc)) from exc


def parse_assignments(items: Iterable[str], flag: str) -> dict[str, str]:
    """`k=v` strings into a dict; a missing `=` or an empty key is a usage error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"invalid {flag} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "0": "\0"}


def unescape(text: str) -> str:
    r"""Interprets `\n`, `\t`, `\r`, `\0` and `\\`, so they can be typed in a shell."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def describe_error(err: KafkaError, bootstrap: str, subject: str | None = None) -> str:
    """One human line for a client error, in the words of Kafka's tools where they exist."""
    code = err.code()
    if code == KafkaError.TOPIC_ALREADY_EXISTS and subject:
        return f"Topic '{subject}' already exists."
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART and subject:
        return f"Topic '{subject}' does not exist."
    if code in _UNREACHABLE:
        return f"cannot reach {bootstrap} within {TIMEOUT_S:g} s ({err.str()})"
    text = err.str()
    name = err.name()
    return text if name in text else f"{text} ({name})"


def result(future: concurrent.futures.Future[Any], args: argparse.Namespace,
           subject: str | None = None) -> Any:
    """Waits for one admin future, turning its failure into a `CommandError`."""
    try:
        return future.result(timeout=TIMEOUT_S + 5)
    except KafkaException as exc:
        raise CommandError(describe_error(exc.args[0], args.bootstrap_server, subject)) from exc
    except concurrent.futures.TimeoutError as exc:
        raise CommandError(f"cannot reach {args.bootstrap_server} within "
                           f"{TIMEOUT_S:g} s") from exc


def kafka_error_code(exc: KafkaException) -> int | None:
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else None


def run_command(name: str, func: Command) -> Command:
    """Wraps a command so expected failures become one line on stderr and an exit status."""

    def wrapper(args: argparse.Namespace) -> int:
        try:
            if hasattr(args, "bootstrap_server"):
                resolve_settings(args)
            return func(args)
        except UsageError as exc:
            print(f"ads {name}: {exc}", file=sys.stderr)
            return 2
        except CommandError as exc:
            print(f"ads {name}: {exc}", file=sys.stderr)
            return 1
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            line = (describe_error(err, args.bootstrap_server) if isinstance(err, KafkaError)
                    else str(exc))
            print(f"ads {name}: {line}", file=sys.stderr)
            return 1

    return wrapper


def print_table(rows: list[tuple[object, ...]]) -> None:
    """Left-aligned columns, the first row a header, as Kafka's tools print them."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def coordinator_connection(args: argparse.Namespace, key: str, key_type: int) -> Connection:
    """A connection to the coordinator of a group (key type 0) or transactional id (1),
    for what the AdminClient lacks."""
    from ads.client import ClientError
    from ads.protocol import messages as m
    from ads.protocol.errors import ErrorCode

    try:
        host, port = parse_servers(args.bootstrap_server)[0]
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    conn = connect_broker(args, host, port)
    what = "group" if key_type == 0 else "transactional id"
    try:
        found = conn.request(m.ApiKey.FIND_COORDINATOR, 3,
                             m.FindCoordinatorRequest(key=key, key_type=key_type))
    except ClientError as exc:
        conn.close()
        raise CommandError(f"cannot reach {args.bootstrap_server}: {exc}") from exc
    assert isinstance(found, m.FindCoordinatorResponse)
    if found.error_code != ErrorCode.NONE:
        conn.close()
        raise CommandError(f"no coordinator for {what} '{key}': "
                           f"{ErrorCode(found.error_code).name}")
    if (found.host, found.port) != (host, port):
        conn.close()
        conn = connect_broker(args, found.host, found.port)
    return conn
