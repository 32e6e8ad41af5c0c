"""The `ads` command line: `ads broker` and the client commands (`topics`, `produce`,
`consume`, ...), which work against any Kafka-protocol broker."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys

from ads.cli import clients
from ads.cli.settings import settings_help

# What a shell reports for a command that SIGPIPE ended (`yes | head` leaves it in $?).
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser of `ads`, complete for the command `argv` names (only its module is
    imported); `ads --help` lists every command and where the client settings come from."""
    parser = argparse.ArgumentParser(
        prog="ads", description="ADS: a Kafka-compatible log", epilog=settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    clients.add_parsers(sub, argv[0] if argv else None)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser(argv).parse_args(argv)
        result: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        # The reader of our output left (`ads ... | head`): end quietly, as Unix tools do,
        # with nothing left for the interpreter to flush into the closed pipe at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return result


def _stdout_reader_gone() -> bool:
    """Whether the broken pipe is standard output's (not, say, a socket's): the write end
    of a pipe whose read end is closed polls as an error."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


if __name__ == "__main__":
    sys.exit(main())
