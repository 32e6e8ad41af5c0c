"""`ads top`: a live terminal view of a broker from its `/metrics` (`http.listener`).

Every interval it scrapes `/metrics`, parses it with prometheus_client's parser and shows,
per topic, records and bytes in and bytes out per second (differences of the counters over
the time between two scrapes), the log size and high watermarks; per group, its state and
lag; and the broker's connections, request rate and partitions needing attention. Drawn
with rich; `--once` prints a single frame (two scrapes `--interval` apart) and exits, for
scripts and for terminals without cursor control.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ads.cli.common import CommandError, run_command

# The width of a frame printed to a pipe: wider than any row, which then sets the width.
_UNBOUNDED = 100_000
_TOPIC_RATES = ("ads_topic_messages_in_total", "ads_topic_bytes_in_total",
                "ads_topic_bytes_out_total")


@dataclass
class Snapshot:
    """The figures `ads top` shows, from one scrape."""

    time_s: float
    topics: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    group_lag: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    group_state: dict[str, str] = field(default_factory=dict)
    group_partitions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    broker: dict[str, float] = field(default_factory=dict)


def parse(text: str, time_s: float) -> Snapshot:
    snap = Snapshot(time_s)
    requests = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name, labels = s.name, s.labels
            if name in _TOPIC_RATES:
                snap.topics[labels["topic"]][name] = s.value
            elif name in ("ads_log_size_bytes", "ads_partition_high_watermark"):
                row = snap.topics[labels["topic"]]
                row[name] = row.get(name, 0.0) + s.value
            elif name == "ads_group_lag":
                snap.group_lag[labels["group"]] += s.value
                snap.group_partitions[labels["group"]] += 1
            elif name == "ads_group_committed_offset":
                snap.group_lag.setdefault(labels["group"], 0.0)
            elif name == "ads_group_state":
                snap.group_state[labels["group"]] = labels["state"]
                snap.group_lag.setdefault(labels["group"], 0.0)
            elif name == "ads_requests_total":
                requests += s.value
            elif not labels and name in (
                    "ads_connections", "ads_under_replicated_partitions",
                    "ads_offline_partitions", "ads_under_min_isr_partitions",
                    "ads_leader_partitions", "ads_brokers"):
                snap.broker[name] = s.value
    snap.broker["requests"] = requests
    return snap


def scrape(url: str) -> Snapshot:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - user's URL
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        raise CommandError(f"cannot read {url}: {exc}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise CommandError(
            f"cannot read {url}: {reason}; is that the broker's http.listener? It is off "
            "unless set (e.g. --set http.listener=127.0.0.1:9644 on ads broker)") from exc
    return parse(text, time.monotonic())


def _rate(before: Snapshot, after: Snapshot, topic: str, name: str) -> float:
    span = max(after.time_s - before.time_s, 1e-6)
    now = after.topics.get(topic, {}).get(name, 0.0)
    then = before.topics.get(topic, {}).get(name, now)
    return max(now - then, 0.0) / span


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"


def frame(before: Snapshot, after: Snapshot, url: str, expand: bool = True) -> Group:
    """One screen: the broker line, the topics table and the groups table; `expand`:
    as wide as the console, else as wide as the rows need."""
    span = max(after.time_s - before.time_s, 1e-6)
    b = after.broker
    requests = max(b.get("requests", 0.0) - before.broker.get("requests", 0.0), 0.0) / span
    head = Text(
        f"ADS {url}  connections {b.get('ads_connections', 0):.0f}  "
        f"requests/s {requests:,.1f}  leaders {b.get('ads_leader_partitions', 0):.0f}  "
        f"under-replicated {b.get('ads_under_replicated_partitions', 0):.0f}  "
        f"under-min-ISR {b.get('ads_under_min_isr_partitions', 0):.0f}  "
        f"offline {b.get('ads_offline_partitions', 0):.0f}", style="bold")
    topics = Table(title="topics", title_justify="left", expand=expand)
    topics.add_column("topic", overflow="fold")  # a name is never cut, at most folded
    for col in ("records in/s", "bytes in/s", "bytes out/s", "size", "high watermarks"):
        topics.add_column(col, justify="right")
    for name in sorted(after.topics):
        row = after.topics[name]
        topics.add_row(
            name, f"{_rate(before, after, name, _TOPIC_RATES[0]):,.1f}",
            _bytes(_rate(before, after, name, _TOPIC_RATES[1])),
            _bytes(_rate(before, after, name, _TOPIC_RATES[2])),
            _bytes(row.get("ads_log_size_bytes", 0.0)),
            f"{row.get('ads_partition_high_watermark', 0.0):,.0f}")
    groups = Table(title="consumer groups", title_justify="left", expand=expand)
    groups.add_column("group", overflow="fold")
    groups.add_column("state")
    for col in ("lag", "lag change/s", "partitions with lag figures"):
        groups.add_column(col, justify="right")
    for name in sorted(after.group_lag):
        lag = after.group_lag[name]
        change = (lag - before.group_lag.get(name, lag)) / span
        groups.add_row(name, after.group_state.get(name, "-"), f"{lag:,.0f}",
                       f"{change:+,.1f}", str(after.group_partitions.get(name, 0)))
    return Group(head, topics, groups)


def top(args: argparse.Namespace) -> int:
    url = args.url.rstrip("/")
    url = url if url.endswith("/metrics") else url + "/metrics"
    interval = max(args.interval, 0.1)
    before = scrape(url)
    if args.once:
        time.sleep(interval)
        after = scrape(url)
        if args.width is None and not sys.stdout.isatty():
            # A pipe or a file has no width: print whole rows rather than cut names to 80.
            Console(width=_UNBOUNDED, soft_wrap=True).print(
                frame(before, after, url, expand=False))
        else:
            Console(width=args.width).print(frame(before, after, url))
        return 0
    console = Console()
    with Live(console=console, auto_refresh=False, screen=False) as live:
        try:
            while True:
                time.sleep(interval)
                after = scrape(url)
                live.update(frame(before, after, url), refresh=True)
                before = after
        except KeyboardInterrupt:
            return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    p = sub.add_parser("top", help=help_text,
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:9644",
                   help="the broker's http.listener (default http://127.0.0.1:9644)")
    p.add_argument("--interval", type=float, default=2.0,
                   help="seconds between scrapes (default 2)")
    p.add_argument("--once", action="store_true",
                   help="print one frame (two scrapes an interval apart) and exit")
    p.add_argument("--width", type=int, default=None,
                   help="columns of the printed frame (default: the terminal's)")
    p.set_defaults(func=run_command("top", top))
