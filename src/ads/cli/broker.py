"""`ads broker`: run one broker in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ads.broker.config import BrokerConfig, ConfigError, load_broker_config
from ads.broker.server import Broker
from ads.common.gc_policy import GcPolicy
from ads.metadata.store import MetadataUnavailableError, NodeIdInUseError
from ads.storage.errors import LogDirInUseError
from ads.storage.open_files import raise_process_limit

log = logging.getLogger("ads")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    p = sub.add_parser("broker", help=help_text)
    p.add_argument("--config", help="server.properties file with Kafka config keys")
    p.add_argument("--data-dir", help="log directory (log.dirs)")
    p.add_argument("--host", help="listener host")
    p.add_argument("--port", type=int, help="listener port")
    p.add_argument("--node-id", type=int, help="node.id")
    p.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="join the cluster kept in this ZooKeeper (zookeeper.connect); "
                        "without it the broker keeps its metadata in its data directory")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key (repeatable; wins over file and flags)")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    p.set_defaults(func=run)


def _flags(args: argparse.Namespace) -> dict[str, str]:
    flags: dict[str, str] = {}
    if args.data_dir:
        flags["log.dirs"] = args.data_dir
    if args.node_id is not None:
        flags["node.id"] = str(args.node_id)
    if args.zookeeper:
        flags["zookeeper.connect"] = args.zookeeper
    if args.host is not None or args.port is not None:
        host = args.host if args.host is not None else "127.0.0.1"
        port = args.port if args.port is not None else 9092
        flags["listeners"] = f"PLAINTEXT://{host}:{port}"
    return flags


# Line breaks and other control characters a message may carry, as escapes. Messages quote
# names clients choose (group ids, member ids, transactional ids): one with a line break
# would otherwise start a line of its own, which a reader could take for the broker's.
_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(32), 0x7F, 0x85]} | {
    0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x2028: "\\u2028", 0x2029: "\\u2029"}


class OneLineFormatter(logging.Formatter):
    """One line per log record: the message's control characters are escaped (a traceback
    that follows it keeps its lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = record.message.translate(_ESCAPES)
        return super().formatMessage(record)


def run(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO), handlers=[handler])
    try:
        config, warnings = load_broker_config(args.config, _flags(args), args.set)
    except ConfigError as exc:
        print(f"ads broker: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"ads broker: cannot read config: {exc}", file=sys.stderr)
        return 2
    for w in warnings:
        log.warning("%s", w)
    return asyncio.run(_serve(config))


async def _serve(config: BrokerConfig) -> int:
    raise_process_limit()  # the process's own: segment files are bounded by half of it
    try:
        broker = Broker(config)  # reads TLS keys and certificates; resolves host names
    except ConfigError as exc:  # what only start-up can check (host names, TLS and SASL)
        print(f"ads broker: invalid configuration: {exc}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except (MetadataUnavailableError, NodeIdInUseError, LogDirInUseError) as exc:
        log.error("cannot start: %s", exc)  # noqa: TRY400 - a clear line, not a traceback
        return 2
    except OSError as exc:
        log.error("cannot start: %s", exc)  # noqa: TRY400 - a clear line, not a traceback
        return 1
    gc_policy = _gc_policy(broker, config)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    gc_policy.uninstall()
    return 0


def _gc_policy(broker: Broker, config: BrokerConfig) -> GcPolicy:
    """The process's collector timed, and kept off long-lived objects (`ads.common.gc_policy`)."""
    policy = GcPolicy(freeze=config.get_bool("gc.freeze.enable"))
    policy.install()
    if policy.freeze:
        broker.schedule("gc-full-collection", config.get_int("gc.full.collection.interval.ms"),
                        policy.collect_all)
    return policy
