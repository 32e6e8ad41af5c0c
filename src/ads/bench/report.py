"""What the suite leaves behind: the Markdown table, PNG plots, flame graphs, and the block
of `docs/benchmarks.md` that holds the latest results.

Flame graphs are drawn here from py-spy's collapsed stacks (`frame;frame;frame count` per
line) as self-contained SVG, so one recording gives both the picture and the table of top
frames, and no other tool is needed.
"""

from __future__ import annotations

import html
import math
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOCS_BEGIN = "<!-- bench-suite:begin -->"
DOCS_END = "<!-- bench-suite:end -->"
NAMES = {"ads": "ADS", "mock": "mock", "kafka": "Kafka",
         "ads-3": "ADS, 3 brokers (W9, W10)", "kafka-3": "Kafka, 3 KRaft nodes (W9, W10)"}
COLOURS = {"ads": "#2b6cb0", "mock": "#c05621", "kafka": "#2f855a"}


def sides(results: dict[str, Any]) -> list[str]:
    """ADS, then the peers it ran against (results written before peers: the mock)."""
    return list(results.get("sides") or ("ads", "mock"))


def _name(side: str) -> str:
    return NAMES.get(side, side)


def _ratios(summary: dict[str, Any], peers: list[str]) -> dict[str, float | None]:
    ratios = summary.get("ratios")
    if ratios is None:  # one peer, written before `ratios`
        return {peers[0]: summary.get("ratio")} if peers else {}
    return {peer: ratios.get(peer) for peer in peers}


def _fmt(value: float | None, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit in ("ms", "s"):
        return f"{value:.2f}" if value < 100 else f"{value:,.0f}"
    if unit == "MB/s":
        return f"{value:,.1f}"
    if unit == "cores":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def _cell(summary: dict[str, Any] | None, unit: str) -> str:
    if not summary or summary.get("median") is None:
        return "-"
    text = _fmt(summary["median"], unit)
    if summary.get("n", 0) > 1:
        text += f" ({_fmt(summary['min'], unit)}–{_fmt(summary['max'], unit)})"
    return text


def _resources(summary: dict[str, Any] | None) -> str:
    if not summary or summary.get("cpu_s") is None:
        return "-"
    text = f"{summary['cpu_s']:.1f} s / {summary['rss_max_mb']:.0f} MB"
    if summary.get("client_cpu_s") is not None:
        text += f" (client {summary['client_cpu_s']:.1f} s)"
    return text


def markdown_table(results: dict[str, Any]) -> str:
    """One row per workload: medians (min–max) of ADS and each peer with the ratio ADS /
    peer, each broker's CPU time and memory, and the CPU time of the clients measuring it."""
    all_sides = sides(results)
    peers = all_sides[1:]
    head = ["workload", "metric", "ADS median (min–max)"]
    for peer in peers:
        head += [f"{_name(peer)} median (min–max)", f"ADS / {_name(peer)}"]
    head += [f"{_name(side)} CPU / max RSS (client CPU)" for side in all_sides]
    head.append("notes")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for wl in results["workloads"]:
        s = wl["summary"]
        better = " ↑" if wl["higher_is_better"] else " ↓"
        cells = [f"{wl['id']} {wl['title']}", wl["metric_label"], _cell(s.get("ads"), wl["unit"])]
        for peer, ratio in _ratios(s, peers).items():
            cells += [_cell(s.get(peer), wl["unit"]),
                      "-" if ratio is None else f"{ratio:.2f}×{better}"]
        cells += [_resources(s.get(side)) for side in all_sides]
        cells.append(wl.get("note", ""))
        lines.append("| " + " | ".join(cells) + " |")
        for extra in wl.get("extra_metrics", []):
            es = extra["summary"]
            cells = ["", extra["label"], _cell(es.get("ads"), extra["unit"])]
            for peer, ratio in _ratios(es, peers).items():
                cells += [_cell(es.get(peer), extra["unit"]),
                          "-" if ratio is None else f"{ratio:.2f}×"]
            cells += [""] * (len(all_sides) + 1)
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def brokers_table(results: dict[str, Any]) -> str:
    """Per broker: launch to the first answered request, CPU time and peak memory over the
    whole run; empty for results that do not have them."""
    brokers = results.get("brokers") or {}
    rows = [side for side in sides(results) if side in brokers]
    rows += [f"{side}-3" for side in sides(results) if f"{side}-3" in brokers]
    if not rows:
        return ""
    lines = ["| broker | process start to first answered request | CPU over the run "
             "| peak RSS over the run |", "|---|---|---|---|"]
    for side in rows:
        facts = brokers[side]
        start = facts.get("start_to_answer_s")
        text = "-" if start is None else f"{start:.2f} s"
        if facts.get("format_s") is not None:
            text += f" (after {facts['format_s']:.2f} s of storage format)"
        cpu, rss = facts.get("cpu_s"), facts.get("rss_peak_mb")
        lines.append(f"| {_name(side)} | {text} | {'-' if cpu is None else f'{cpu:.1f} s'} "
                     f"| {'-' if rss is None else f'{rss:,.0f} MB'} |")
    return "\n".join(lines)


def machine_line(machine: dict[str, Any]) -> str:
    return (f"{machine.get('cpu_model', '?')}, {machine.get('cores', '?')} cores, "
            f"{machine.get('memory_gb', '?')} GiB memory, Linux {machine.get('kernel', '?')}, "
            f"Python {machine.get('python', '?')}, librdkafka {machine.get('librdkafka', '?')}")


def results_markdown(results: dict[str, Any]) -> str:
    loop = results.get("loopback_mb_per_s")
    order = ", ".join(_name(side) for side in sides(results))
    parts = [
        f"Run {results['started']}: {machine_line(results['machine'])}.",
        "",
        f"Command: `{results['command']}` ({results['reps']} repetitions per broker, "
        f"alternating {order}, {order}, ...; ↑ higher is better, ↓ lower is better).",
        "",
    ]
    load = results.get("load_average")
    if load:
        parts += [f"1-minute load average while workloads ran: {load['min']:.2f}–"
                  f"{load['max']:.2f} (on {results['machine'].get('cores', '?')} cores; other "
                  "processes on the machine show up here and in the spread of the figures).",
                  ""]
    if loop:
        parts += [f"Loopback bandwidth measured in the same run (one TCP socket, Python "
                  f"sender and receiver): {loop:,.0f} MB/s.", ""]
    brokers = brokers_table(results)
    if brokers:
        parts += [brokers, ""]
    parts.append(markdown_table(results))
    if results.get("w9_over_w1") is not None:
        parts += ["", f"ADS replicated (W9, RF=3, acks=all) / ADS alone (W1, acks=1): "
                      f"{results['w9_over_w1']:.2f}×."]
    return "\n".join(parts) + "\n"


def update_docs(path: Path, block: str) -> bool:
    """Replaces the text between the suite's markers in `path`; False if there are none."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if start < 0 or end < start:
        return False
    new = text[:start + len(DOCS_BEGIN)] + "\n" + block.rstrip("\n") + "\n" + text[end:]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(path)
    return True


# ----------------------------------------------------------------------------- plots

def plot_results(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """throughput.png (every broker per workload) and latency.png (percentiles)."""
    import matplotlib  # noqa: PLC0415 - optional dependency, needed only for plots

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    written: list[Path] = []
    all_sides = sides(results)
    rated = [w for w in results["workloads"] if w["higher_is_better"]]
    if rated:
        fig, axes = plt.subplots(1, len(rated), figsize=(2.6 * len(rated), 3.6), squeeze=False)
        for ax, wl in zip(axes[0], rated, strict=True):
            for i, side in enumerate(all_sides):
                s = wl["summary"].get(side)
                if not s or s.get("median") is None:
                    continue
                err = [[max(s["median"] - s["min"], 0)], [max(s["max"] - s["median"], 0)]]
                ax.bar(i, s["median"], yerr=err, color=COLOURS.get(side, "#718096"), capsize=4)
            ax.set_xticks(list(range(len(all_sides))), [_name(side) for side in all_sides])
            ax.set_title(f"{wl['id']}", fontsize=10)
            ax.set_ylabel(wl["unit"], fontsize=8)
            ax.tick_params(labelsize=7)
        fig.suptitle("Throughput per workload (median, min–max)", fontsize=11)
        fig.tight_layout()
        path = out_dir / "throughput.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    series = [w for w in results["workloads"] if w.get("latency")]
    if series:
        fig, axes = plt.subplots(1, len(series), figsize=(3.6 * len(series), 3.6),
                                 squeeze=False)
        for ax, wl in zip(axes[0], series, strict=True):
            for side in all_sides:
                lat = wl["latency"].get(side)
                if not lat:
                    continue
                keys = [k for k in ("p50", "p95", "p99", "p99.9", "max") if lat.get(k)]
                ax.plot(keys, [lat[k] for k in keys], marker="o",
                        color=COLOURS.get(side, "#718096"), label=_name(side))
            ax.set_yscale("log")
            ax.set_title(f"{wl['id']} {wl['latency_label']}", fontsize=9)
            ax.set_ylabel("ms", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=7)
        fig.suptitle("Latency percentiles (median run)", fontsize=11)
        fig.tight_layout()
        path = out_dir / "latency.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# ------------------------------------------------------------------------ profiles

def read_collapsed(lines: Iterable[str]) -> Counter[tuple[str, ...]]:
    """py-spy's raw output: `frame;frame;... count` per line, root first."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


@dataclass(frozen=True, slots=True)
class FrameShare:
    frame: str
    self_pct: float
    total_pct: float


def top_frames(stacks: Counter[tuple[str, ...]], limit: int = 12) -> list[FrameShare]:
    """The frames with the most samples on top of the stack (self), with their inclusive
    share (samples with the frame anywhere on the stack)."""
    total = sum(stacks.values())
    if not total:
        return []
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for stack, count in stacks.items():
        own[stack[-1]] += count
        for frame in set(stack):
            inclusive[frame] += count
    return [FrameShare(f, 100.0 * n / total, 100.0 * inclusive[f] / total)
            for f, n in own.most_common(limit)]


def flame_graph_svg(stacks: Counter[tuple[str, ...]], title: str) -> str:
    """A static flame graph: width is share of samples, root at the bottom; hover titles."""
    total = sum(stacks.values())
    width, row, pad = 1200.0, 16, 30
    tree: dict[str, Any] = {"n": 0, "kids": {}}
    depth = 0
    for stack, count in stacks.items():
        node = tree
        node["n"] += count
        for frame in stack:
            node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
            node["n"] += count
        depth = max(depth, len(stack))
    height = pad + row * (depth + 1) + 10
    rects: list[str] = []

    def draw(node: dict[str, Any], name: str, x: float, level: int) -> None:
        w = width * node["n"] / total if total else 0
        if w < 0.5:
            return
        y = height - 10 - row * (level + 1)
        hue = 20 + zlib.crc32(name.encode()) % 40
        label = html.escape(name)
        pct = 100.0 * node["n"] / total
        text = html.escape(name[: max(int(w / 7), 0)]) if w > 30 else ""
        rects.append(
            f'<g><title>{label} ({node["n"]} samples, {pct:.1f}%)</title>'
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" '
            f'fill="hsl({hue},85%,60%)"/>'
            f'<text x="{x + 3:.1f}" y="{y + row - 4}" font-size="11">{text}</text></g>')
        child_x = x
        for kid_name, kid in sorted(node["kids"].items()):
            draw(kid, kid_name, child_x, level + 1)
            child_x += width * kid["n"] / total

    x = 0.0
    for name, kid in sorted(tree["kids"].items()):
        draw(kid, name, x, 0)
        x += width * kid["n"] / total if total else 0
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
            f'font-family="monospace"><rect width="100%" height="100%" fill="#fff"/>'
            f'<text x="10" y="20" font-size="14">{html.escape(title)} '
            f'({total} samples)</text>{"".join(rects)}</svg>')
