"""The `ads` command line."""
import sys


def main(argv: list[str] | None = None) -> int:
    print("ads: not yet", file=sys.stderr)
    return 2
