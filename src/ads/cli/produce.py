"""`ads produce TOPIC`: one record per line of standard input, like
`kafka-console-producer.sh`.

Lines are bytes: the trailing `\\n` (and a `\\r` before it) is dropped and nothing else is
decoded. With `--key-separator` the part before the first separator is the key, and a line
without it stops the command (Kafka's `parse.key=true`); lines before it are still
delivered. Records are handed to librdkafka, which batches them; at end of input the
producer is flushed and any delivery error makes the exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any, BinaryIO

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from ads.cli.common import (
    TIMEOUT_S,
    CommandError,
    UsageError,
    add_client_arguments,
    client_config,
    describe_error,
    make_client,
    parse_assignments,
    run_command,
    unescape,
)

# A record not acknowledged this long after it was read fails the command.
_MESSAGE_TIMEOUT_MS = 30_000
# Delivery reports are served every this many lines; back pressure is `BufferError`.
_POLL_EVERY = 1000


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    p = sub.add_parser("produce", help=help_text)
    p.add_argument("topic")
    p.add_argument("--key-separator", metavar="SEP",
                   help=r"split each line into key SEP value at the first SEP (\t allowed)")
    p.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                   help="header added to every record (repeatable)")
    p.add_argument("--partition", type=int, help="write every record to this partition")
    p.add_argument("--acks", choices=["all", "-1", "1", "0"],
                   help="acknowledgements to wait for (default all)")
    p.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                   help="compression codec (default none)")
    add_client_arguments(p)
    p.set_defaults(func=run_command("produce", produce))


class _Deliveries:
    """Counts delivery reports; keeps the first failure for the closing message."""

    __slots__ = ("failed", "first_error")

    def __init__(self) -> None:
        self.failed = 0
        self.first_error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = err


def _binary_stdin() -> BinaryIO:
    stream: Any = sys.stdin
    return stream.buffer if hasattr(stream, "buffer") else stream


def _lines(stream: Iterable[bytes | str]) -> Iterable[bytes]:
    for raw in stream:
        line = raw.encode("utf-8") if isinstance(raw, str) else raw
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line


def _key_separator(args: argparse.Namespace) -> bytes | None:
    if args.key_separator is None:
        return None
    separator = unescape(args.key_separator).encode("utf-8")
    if not separator:
        raise UsageError("--key-separator must not be empty")
    return separator


def _producer_config(args: argparse.Namespace) -> dict[str, Any]:
    """The client configuration: --acks and --compression over the files' and defaults."""
    overrides: dict[str, Any] = {}
    if args.acks is not None:
        overrides["acks"] = args.acks
    if args.compression is not None:
        overrides["compression.type"] = args.compression
    return client_config(args, defaults={"acks": "all",
                                         "message.timeout.ms": _MESSAGE_TIMEOUT_MS},
                         overrides=overrides)


def _flush_timeout_s(conf: dict[str, Any]) -> float:
    # A --command-config may raise the delivery timeout; the final flush waits that long.
    timeout_ms = conf.get("delivery.timeout.ms", conf["message.timeout.ms"])
    try:
        return int(timeout_ms) / 1000 + TIMEOUT_S
    except ValueError:
        return _MESSAGE_TIMEOUT_MS / 1000 + TIMEOUT_S


def produce(args: argparse.Namespace) -> int:
    headers = [(k, v.encode("utf-8"))
               for k, v in parse_assignments(args.header, "--header").items()] or None
    separator = _key_separator(args)
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition must not be negative")
    conf = _producer_config(args)
    deliveries = _Deliveries()
    conf["on_delivery"] = deliveries
    producer = make_client(Producer, conf)
    _check_topic(producer, args)
    flush_s = _flush_timeout_s(conf)

    topic = args.topic
    extra: dict[str, Any] = {}
    if headers:
        extra["headers"] = headers
    if args.partition is not None:
        extra["partition"] = args.partition
    sent = 0
    missing_separator: int | None = None
    try:
        for number, line in enumerate(_lines(_binary_stdin()), start=1):
            key: bytes | None = None
            value = line
            if separator is not None:
                key, found, value = line.partition(separator)
                if not found:
                    missing_separator = number
                    break
            try:
                _send(producer, topic, value, key, extra)
            except KafkaException as exc:
                # Refused before sending (e.g. larger than message.max.bytes).
                _flush(producer, args, deliveries, sent, flush_s)
                err = describe_error(exc.args[0], args.bootstrap_server, topic)
                raise CommandError(f"line {number}: {err}") from exc
            sent += 1
            if sent % _POLL_EVERY == 0:
                producer.poll(0)
    except KeyboardInterrupt:
        _flush(producer, args, deliveries, sent, flush_s)
        return 130
    _flush(producer, args, deliveries, sent, flush_s)
    if missing_separator is not None:
        raise CommandError(f"No key separator found on line {missing_separator}")
    return 0


def _send(producer: Producer, topic: str, value: bytes, key: bytes | None,
          extra: dict[str, Any]) -> None:
    """Hands one record to the producer, serving delivery reports while its queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, **extra)
            return
        except BufferError:
            producer.poll(0.1)


def _check_topic(producer: Producer, args: argparse.Namespace) -> None:
    """Fails fast, in a bounded time, on an unreachable cluster or a missing topic."""
    try:
        md = producer.list_topics(args.topic, timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise CommandError(describe_error(exc.args[0], args.bootstrap_server)) from exc
    topic = md.topics.get(args.topic)
    if topic is None:
        raise CommandError(f"Topic '{args.topic}' does not exist.")
    if topic.error is not None and topic.error.code() != KafkaError.LEADER_NOT_AVAILABLE:
        raise CommandError(describe_error(topic.error, args.bootstrap_server, args.topic))
    if (args.partition is not None and topic.error is None
            and args.partition not in topic.partitions):
        raise CommandError(f"Partition {args.partition} of topic '{args.topic}' does not "
                           f"exist (it has {len(topic.partitions)}).")


def _flush(producer: Producer, args: argparse.Namespace, deliveries: _Deliveries,
           sent: int, timeout_s: float) -> None:
    remaining = producer.flush(timeout_s)
    if deliveries.first_error is not None:
        err = describe_error(deliveries.first_error, args.bootstrap_server, args.topic)
        raise CommandError(f"{deliveries.failed} of {sent} records not delivered: {err}")
    if remaining:
        raise CommandError(f"{remaining} of {sent} records not acknowledged in time")
