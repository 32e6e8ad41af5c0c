"""`ads broker`: run one broker in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ads.broker.config import BrokerConfig, ConfigError, load_broker_config
from ads.broker.server import Broker
from ads.metadata.store import MetadataUnavailableError, NodeIdInUseError

log = logging.getLogger("ads")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("broker", help="run a broker")
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


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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
    try:
        broker = Broker(config)
    except ConfigError as exc:  # what only start-up can check (host names, SASL settings)
        print(f"ads broker: invalid configuration: {exc}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except (MetadataUnavailableError, NodeIdInUseError) as exc:
        log.error("cannot start: %s", exc)  # noqa: TRY400 - a clear line, not a traceback
        return 2
    except OSError as exc:
        log.error("cannot start: %s", exc)  # noqa: TRY400 - a clear line, not a traceback
        return 1
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    return 0
