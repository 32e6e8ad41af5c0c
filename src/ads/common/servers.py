"""Bootstrap server lists, as every client (the command line, Spark, tools) is given them."""

from __future__ import annotations


def parse_servers(servers: str) -> list[tuple[str, int]]:
    """``host:port`` pairs of a comma-separated bootstrap list; ``PLAINTEXT://`` style
    prefixes and IPv6 brackets are dropped. Raises ValueError for a malformed entry or an
    empty list."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out
