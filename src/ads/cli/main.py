"""The `ads` command line: `ads broker` and the client commands (`topics`, `produce`,
`consume`, ...), which work against any Kafka-protocol broker."""

from __future__ import annotations

import argparse
import sys

from ads.cli import broker, clients


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ads", description="ADS: a Kafka-compatible log")
    sub = parser.add_subparsers(dest="command", required=True)
    broker.add_parser(sub)
    clients.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
