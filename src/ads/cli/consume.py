r"""`ads consume TOPIC`: print records to standard output, like `kafka-console-consumer.sh`
with kcat's `-f` format.

Without `--group` the consumer assigns itself the partitions (all, or `--partition`) and
commits nothing; with `--group` it subscribes as a member of that group and commits as it
goes. Each record is rendered through `--format`: `%t` topic, `%p` partition, `%o` offset,
`%k` key, `%v` / `%s` value, `%h` headers as `k=v,k=v`, `%T` timestamp in ms, `%%` a
percent sign, and `\n`, `\t`, `\r`, `\\` escapes. Keys, values and header values print as
UTF-8 with U+FFFD for invalid bytes, and a null as `null`. The default format is `%v\n`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from ads.cli.common import (
    TIMEOUT_S,
    CommandError,
    UsageError,
    add_client_arguments,
    client_config,
    describe_error,
    make_client,
    run_command,
    unescape,
)

DEFAULT_FORMAT = r"%v\n"
# Upper bound on records taken from librdkafka per call; output is written per batch.
_BATCH = 500
# How long one consume call may block, so --timeout-ms and Ctrl-C are noticed promptly.
_POLL_S = 0.2

# Errors after which waiting longer cannot help.
_FATAL = frozenset({
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION,
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.INVALID_GROUP_ID, KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._AUTHENTICATION,
})

Renderer = Callable[[Message], str]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    p = sub.add_parser("consume", help=help_text)
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the log start offset (with --group: when nothing is "
                        "committed yet)")
    p.add_argument("--offset", help="start offset: a number (needs --partition), "
                                    "'earliest' or 'latest' (default)")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    p.add_argument("--timeout-ms", type=int, metavar="MS",
                   help="stop after MS milliseconds without a record (default: never)")
    p.add_argument("--group", metavar="G", help="consume as a member of group G")
    p.add_argument("--format", default=DEFAULT_FORMAT, metavar="FMT",
                   help=r"output template: %%t %%p %%o %%k %%v %%s %%h %%T, \n \t "
                        r"(default '%%v\n')")
    add_client_arguments(p)
    p.set_defaults(func=run_command("consume", consume))


def _text(data: bytes | str | None) -> str:
    if data is None:
        return "null"
    if isinstance(data, str):
        return data
    return data.decode("utf-8", "replace")


def _headers(msg: Message) -> str:
    headers = msg.headers()
    if not headers:
        return ""
    pairs = headers.items() if isinstance(headers, dict) else headers
    return ",".join(f"{k}={_text(v)}" for k, v in pairs)


def _timestamp(msg: Message) -> str:
    kind, ts = msg.timestamp()
    return "-1" if kind == TIMESTAMP_NOT_AVAILABLE else str(ts)


_FIELDS: dict[str, Callable[[Message], str]] = {
    "t": lambda m: m.topic() or "",
    "p": lambda m: str(m.partition()),
    "o": lambda m: str(m.offset()),
    "k": lambda m: _text(m.key()),
    "v": lambda m: _text(m.value()),
    "s": lambda m: _text(m.value()),
    "h": _headers,
    "T": _timestamp,
}


def compile_format(fmt: str) -> Renderer:
    """Turns a `--format` template into a function of one message; UsageError if invalid."""
    template: list[str] = []
    getters: list[Callable[[Message], str]] = []
    literal: list[str] = []

    def close_literal() -> None:
        text = unescape("".join(literal))
        template.append(text.replace("{", "{{").replace("}", "}}"))
        literal.clear()

    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            literal.append(ch)
            i += 1
            continue
        code = fmt[i + 1] if i + 1 < len(fmt) else ""
        if code == "%":
            literal.append("%")
        elif code in _FIELDS:
            close_literal()
            template.append("{%d}" % len(getters))  # noqa: UP031 - builds a format string
            getters.append(_FIELDS[code])
        else:
            shown = f"%{code}" if code else "a lone %"
            raise UsageError(f"invalid --format: unknown field {shown}; "
                             "use %t %p %o %k %v %s %h %T or %%")
        i += 2
    close_literal()
    pattern = "".join(template)
    if not getters:
        return lambda _m: pattern.format()
    if len(getters) == 1:
        only = getters[0]
        return lambda m: pattern.format(only(m))
    return lambda m: pattern.format(*[g(m) for g in getters])


def _start_offset(args: argparse.Namespace) -> int:
    if args.from_beginning:
        return OFFSET_BEGINNING
    if args.offset is None or args.offset == "latest":
        return OFFSET_END
    if args.offset == "earliest":
        return OFFSET_BEGINNING
    try:
        offset = int(args.offset)
    except ValueError:
        raise UsageError(f"invalid --offset {args.offset!r}: "
                         "expected a number, 'earliest' or 'latest'") from None
    if offset < 0:
        raise UsageError("--offset must not be negative")
    if args.partition is None:
        raise UsageError("a numeric --offset needs --partition")
    return offset


def _check_usage(args: argparse.Namespace) -> None:
    if args.from_beginning and args.offset is not None:
        raise UsageError("--from-beginning and --offset cannot be used together")
    if args.group is not None and (args.offset is not None or args.partition is not None):
        raise UsageError("--group cannot be combined with --offset or --partition")
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError("--max-messages must be at least 1")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise UsageError("--timeout-ms must not be negative")
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition must not be negative")


def consume(args: argparse.Namespace) -> int:
    _check_usage(args)
    render = compile_format(args.format)
    start = _start_offset(args)
    if args.group is None:
        # librdkafka insists on a group.id; in assign mode with no commits it is never used.
        defaults = {"group.id": f"ads-console-consumer-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False}
    else:
        defaults = {"enable.auto.commit": True}
    defaults |= {"enable.partition.eof": False,
                 "auto.offset.reset": "earliest" if start == OFFSET_BEGINNING else "latest"}
    overrides = {} if args.group is None else {"group.id": args.group}
    consumer = make_client(Consumer, client_config(args, defaults, overrides))
    progress = _Progress()
    # Ctrl-C sets a flag the loop checks between polls: a KeyboardInterrupt raised inside
    # one of the client library's callbacks would be swallowed there, and the command would
    # go on waiting for records (seen under load).
    previous = signal.signal(signal.SIGINT, lambda _sig, _frame: progress.stop())
    try:
        partitions = _partitions(consumer, args)
        if args.group is None:
            consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
        else:
            consumer.subscribe([args.topic])
        _loop(consumer, args, render, progress)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
        consumer.close()
    print(f"Processed a total of {progress.count} messages", file=sys.stderr)
    return 0


@dataclass(slots=True)
class _Progress:
    """Records written so far; kept outside the loop so Ctrl-C does not lose the count."""

    count: int = 0
    stopped: bool = False  # Ctrl-C

    def stop(self) -> None:
        self.stopped = True


def _partitions(consumer: Consumer, args: argparse.Namespace) -> list[int]:
    try:
        md = consumer.list_topics(args.topic, timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise CommandError(describe_error(exc.args[0], args.bootstrap_server)) from exc
    topic = md.topics.get(args.topic)
    if topic is None:
        raise CommandError(f"Topic '{args.topic}' does not exist.")
    if topic.error is not None:
        raise CommandError(describe_error(topic.error, args.bootstrap_server, args.topic))
    if args.partition is None:
        return sorted(topic.partitions)
    if args.partition not in topic.partitions:
        raise CommandError(f"Partition {args.partition} of topic '{args.topic}' does not "
                           f"exist (it has {len(topic.partitions)}).")
    return [args.partition]


def _loop(consumer: Consumer, args: argparse.Namespace, render: Renderer,
          progress: _Progress) -> None:
    limit: int | None = args.max_messages
    idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    out = sys.stdout
    last_record = time.monotonic()
    while (limit is None or progress.count < limit) and not progress.stopped:
        wait = _POLL_S if idle_s is None else max(0.0, min(_POLL_S, idle_s))
        want = _BATCH if limit is None else min(_BATCH, limit - progress.count)
        chunk: list[str] = []
        for msg in consumer.consume(num_messages=want, timeout=wait):
            err = msg.error()
            if err is None:
                chunk.append(render(msg))
            elif err.fatal() or err.code() in _FATAL:
                raise CommandError(describe_error(err, args.bootstrap_server, args.topic))
        if chunk:
            last_record = time.monotonic()
            try:
                out.write("".join(chunk))
                out.flush()
            except BrokenPipeError:
                _silence_stdout()
                return
            progress.count += len(chunk)
        elif idle_s is not None and time.monotonic() - last_record >= idle_s:
            break


def _silence_stdout() -> None:
    """After the reader went away, point stdout at /dev/null so exit does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return
