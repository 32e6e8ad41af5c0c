"""The read-only web console: server-rendered pages that refresh themselves.

Every page is rendered here in full; `static/console.js` fetches the page's own address
with `?fragment=1` every two seconds and swaps the `<main>` it gets in, so tables update
without a reload and nothing is rendered twice in two languages. The overview's plots are
drawn by uPlot (vendored in `static/`, MIT licence beside it) from `/api/series`.

Every text taken from the broker's data (topic and group names, keys, values, headers,
configs, client ids) passes through `html.escape`: a record holding `<script>` is shown as
text. Pages change nothing; with `console.read.only=false` the topic and group pages carry
forms that POST to the delete actions (`actions.py`), with the token those check.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from ads.broker.http import observed, records_view
from ads.broker.http.observed import ObservedBroker, PartitionView
from ads.coordinator.group.classic import decode_assignment
from ads.metadata.model import encode_topic_id
from ads.protocol.errors import DecodeError

_NAV = (("/", "Overview"), ("/topics", "Topics"), ("/groups", "Groups"))


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _table(headers: Iterable[str], rows: Iterable[Iterable[object]], css: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
                   for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _link(href: str, text: object) -> str:
    return f'<a href="{_e(href)}">{_e(text)}</a>'


def _quote(name: str) -> str:
    return quote(name, safe="")


def _layout(title: str, main: str, refresh: bool = True, extra_head: str = "") -> bytes:
    nav = "".join(f'<a href="{href}">{text}</a>' for href, text in _NAV)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)} · ADS console</title>
<link rel="stylesheet" href="/static/console.css">{extra_head}</head>
<body data-refresh="{'on' if refresh else 'off'}">
<header><span class="brand">ADS</span><nav>{nav}</nav>
<span id="updated" class="muted"></span></header>
<main id="main">{main}</main>
<script src="/static/console.js"></script>
</body></html>""".encode()


def not_found(path: str) -> bytes:
    return _layout("Not found", f"<h1>Not found</h1><p>No page at <code>{_e(path)}</code>.</p>",
                   refresh=False)


def notice(title: str, message: str, back: str) -> bytes:
    """The page answering a console action."""
    return _layout(title, f'<h1>{_e(title)}</h1><p class="notice">{_e(message)}</p>'
                          f"<p>{_link(back, 'Back')}</p>", refresh=False)


def _delete_form(action: str, token: str, what: str) -> str:
    """A POST form for a delete action; console.js asks to confirm it."""
    return (f'<form method="post" action="{_e(action)}" class="danger" '
            f'data-confirm="Delete {_e(what)}? This cannot be undone.">'
            f'<input type="hidden" name="csrf_token" value="{_e(token)}">'
            f'<button type="submit">Delete {_e(what)}</button></form>')


def page(broker: ObservedBroker, path: str, query: Mapping[str, str],
         token: str | None = None) -> bytes | None:
    """The page at `path` (the whole document, or its `<main>` with `fragment=1`); `token`
    (set when the console may write) puts delete buttons on the topic and group pages."""
    parts = [p for p in path.split("/") if p]
    rendered: tuple[str, str] | None
    extra = ""
    if not parts:
        rendered = ("Overview", _overview(broker))
        extra = ('<link rel="stylesheet" href="/static/uPlot.min.css">'
                 '<script src="/static/uPlot.iife.min.js"></script>')
    elif parts == ["topics"]:
        rendered = ("Topics", _topics(broker))
    elif len(parts) == 2 and parts[0] == "topics":
        rendered = _topic(broker, parts[1], token)
    elif len(parts) == 3 and parts[0] == "topics" and parts[2] == "messages":
        rendered = _messages(broker, parts[1], query)
    elif parts == ["groups"]:
        rendered = ("Groups", _groups(broker))
    elif len(parts) == 2 and parts[0] == "groups":
        rendered = _group(broker, parts[1], token)
    else:
        return None
    if rendered is None:
        return None
    title, main = rendered
    if query.get("fragment") == "1":
        return main.encode()
    return _layout(title, main, refresh=parts[-1:] != ["messages"], extra_head=extra)


def api(broker: ObservedBroker, path: str, query: Mapping[str, str]) -> Any:
    """JSON of what the pages show, for scripts (`/api/topics`, `/api/groups`)."""
    if path == "/topics":
        return [_partition_json(p) for p in observed.partitions(broker)]
    if path == "/groups":
        shares: dict[str, list[dict[str, Any]]] = {}
        for v in observed.share_partitions(broker):
            shares.setdefault(v.group_id, []).append(
                {"topic": v.topic, "partition": v.partition, **asdict(v.counts)})
        return [{"group": g.group_id, "state": g.state, "type": g.group_type,
                 "lag": g.total_lag,
                 "offsets": [{"topic": o.topic, "partition": o.partition,
                              "committed": o.committed, "high_watermark": o.high_watermark,
                              "lag": o.lag} for o in g.offsets],
                 "share_partitions": shares.get(g.group_id, [])}
                for g in observed.groups(broker)]
    return None


def _partition_json(p: PartitionView) -> dict[str, Any]:
    return {"topic": p.topic, "partition": p.partition, "leader": p.leader,
            "replicas": list(p.replicas), "isr": list(p.isr), "size_bytes": p.size_bytes,
            "segments": p.segments, "log_start_offset": p.log_start_offset,
            "log_end_offset": p.log_end_offset, "high_watermark": p.high_watermark}


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(i) for i in ids)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:,.1f} {unit}"


def _overview(broker: ObservedBroker) -> str:
    md = broker.metadata
    brokers = _table(
        ("id", "host", "port", "rack", "role"),
        ((_e(b.node_id), _e(b.host), _e(b.port), _e(b.rack or "—"),
          "controller" if b.node_id == md.controller_id else "broker")
         for b in sorted(md.brokers.values(), key=lambda b: b.node_id)))
    parts = observed.partitions(broker)
    counters = broker.metrics.topics
    topics: dict[str, list[int]] = {}
    for p in parts:
        row = topics.setdefault(p.topic, [0, 0, 0, 0])
        row[0] += 1
        row[1] += p.size_bytes
        row[2] += max(p.high_watermark, 0)
        row[3] += 1 if p.leader < 0 else 0
    topic_rows = (
        (_link(f"/topics/{_quote(name)}", name), n, _size(size), f"{records:,}",
         f"{counters[name][1]:,}" if name in counters else "0", offline)
        for name, (n, size, records, offline) in sorted(topics.items()))
    groups = observed.groups(broker)
    group_rows = ((_link(f"/groups/{_quote(g.group_id)}", g.group_id), _e(g.state),
                   f'<span class="lag">{g.total_lag:,}</span>') for g in groups)
    return f"""<h1>Cluster</h1>
<p class="muted">cluster id {_e(md.cluster_id)} · this broker {broker.node_id} ·
controller {md.controller_id}</p>
<section class="plots"><div><h2>Produce and fetch rates</h2><div id="rates-plot"></div></div>
<div><h2>Consumer lag (records)</h2><div id="lag-plot"></div>
<details id="lag-pick"><summary>groups plotted</summary><div class="choices"></div></details>
</div></section>
<h2>Brokers</h2>{brokers}
<h2>Topics</h2>{_table(("topic", "partitions", "size here", "high watermarks (sum)",
                        "records in since start", "offline"), topic_rows, "topics")}
<h2>Consumer groups</h2>{_table(("group", "state", "lag"), group_rows, "groups")}"""


def _topics(broker: ObservedBroker) -> str:
    parts = observed.partitions(broker)
    by_topic: dict[str, list[PartitionView]] = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(p)
    rows = []
    for name, ps in sorted(by_topic.items()):
        rf = len(ps[0].replicas) if ps else 0
        rows.append((_link(f"/topics/{_quote(name)}", name), len(ps), rf,
                     _size(sum(p.size_bytes for p in ps)),
                     f"{sum(max(p.high_watermark, 0) for p in ps):,}",
                     sum(1 for p in ps if len(p.isr) < len(p.replicas))))
    return "<h1>Topics</h1>" + _table(
        ("topic", "partitions", "replication factor", "size here", "high watermarks (sum)",
         "under-replicated"), rows, "topics")


def _topic(broker: ObservedBroker, name: str, token: str | None) -> tuple[str, str] | None:
    state = broker.metadata.topics.get(name)
    if state is None:
        return None
    rows = ((p.partition, p.leader if p.leader >= 0 else "offline", _ids(p.replicas),
             _ids(p.isr), _size(p.size_bytes) if p.local else "—",
             p.segments if p.local else "—", p.log_start_offset, p.log_end_offset,
             p.high_watermark,
             _link(f"/topics/{_quote(name)}/messages?partition={p.partition}", "messages")
             if p.leads else "")
            for p in observed.partitions(broker, name))
    configs = _table(("key", "value"), ((_e(k), _e(v)) for k, v in sorted(state.configs.items())))
    return name, f"""<h1>Topic {_e(name)}</h1>
<p class="muted">id {_e(encode_topic_id(state.topic_id))}</p>
<h2>Partitions</h2>{_table(("partition", "leader", "replicas", "ISR", "size", "segments",
                            "log start", "log end", "high watermark", ""), rows, "partitions")}
<h2>Configs set on the topic</h2>
{configs if state.configs else '<p class="muted">none: broker defaults apply</p>'}
{_delete_form(f"/topics/{_quote(name)}/delete", token, f"topic {name}") if token else ""}"""


def _int(query: Mapping[str, str], key: str) -> int | None:
    value = query.get(key, "").strip()
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _messages(broker: ObservedBroker, name: str, query: Mapping[str, str]
              ) -> tuple[str, str] | None:
    state = broker.metadata.topics.get(name)
    if state is None:
        return None
    partition = _int(query, "partition") or 0
    count = _int(query, "count") or 20
    offset, timestamp = _int(query, "offset"), _int(query, "timestamp")
    fmt = query.get("format", "text")
    fmt = fmt if fmt in records_view.FORMATS else "text"
    isolation = query.get("isolation", records_view.READ_COMMITTED)
    if isolation not in records_view.ISOLATION_LEVELS:
        isolation = records_view.READ_COMMITTED
    form = _messages_form(partition, count, offset, timestamp, fmt, isolation)
    title = f"{name} messages"
    head = f"<h1>Messages of {_link(f'/topics/{_quote(name)}', name)}</h1>{form}"
    if not 0 <= partition < len(state.partitions):
        return title, head + f'<p class="error">no partition {partition}</p>'
    try:
        result = records_view.read_records(broker, name, partition, count, offset, timestamp,
                                           isolation)
    except records_view.RecordsUnavailableError as exc:
        return title, head + f'<p class="error">{_e(exc)}</p>'
    rows = ((r.record.offset, r.record.timestamp,
             "" if r.control else f"<pre>{_e(records_view.show(r.record.key, fmt))}</pre>",
             "" if r.control else f"<pre>{_e(records_view.show(r.record.value, fmt))}</pre>",
             "<br>".join(f"{_e(k)}: {_e(records_view.show(v, fmt))}"
                         for k, v in r.record.headers),
             f'<span class="mark">{_e(r.mark)}</span>' if r.mark else "")
            for r in result.records)
    return title, head + _messages_summary(partition, result) + _table(
        ("offset", "timestamp", "key", "value", "headers", "transaction"), rows, "messages")


def _messages_form(partition: int, count: int, offset: int | None, timestamp: int | None,
                   fmt: str, isolation: str) -> str:
    options = "".join(f'<option value="{f}"{" selected" if f == fmt else ""}>{f}</option>'
                      for f in records_view.FORMATS)
    levels = "".join(f'<option value="{i}"{" selected" if i == isolation else ""}>{i}</option>'
                     for i in records_view.ISOLATION_LEVELS)
    return f"""<form method="get" class="filters">
<label>partition <input name="partition" type="number" min="0" value="{partition}"></label>
<label>count <input name="count" type="number" min="1" max="{records_view.MAX_RECORDS}"
value="{count}"></label>
<label>from offset <input name="offset" type="number" value="{_e(offset if offset is not None
                                                                 else '')}"></label>
<label>from timestamp (ms) <input name="timestamp" type="number"
value="{_e(timestamp if timestamp is not None else '')}"></label>
<label>show as <select name="format">{options}</select></label>
<label>isolation <select name="isolation">{levels}</select></label>
<button type="submit">show</button></form>"""


def _messages_summary(partition: int, result: records_view.RecordPage) -> str:
    if result.isolation == records_view.READ_COMMITTED:
        what = (f"offsets {result.log_start_offset} to {result.end - 1} readable with "
                f"read_committed (last stable offset {result.end}, high watermark "
                f"{result.high_watermark}); records of aborted transactions and "
                "transaction markers left out")
    else:
        what = (f"offsets {result.log_start_offset} to {result.end - 1} below the high "
                "watermark, read_uncommitted: records of aborted transactions and "
                "transaction markers included and marked")
    return (f'<p class="muted" id="messages-summary">partition {partition}: {what}; '
            f"{len(result.records)} shown from {result.start}</p>")


def _groups(broker: ObservedBroker) -> str:
    rows = ((_link(f"/groups/{_quote(g.group_id)}", g.group_id), _e(g.state),
             _e(g.group_type), _e(g.protocol_type or "—"), len(g.offsets),
             f'<span class="lag">{g.total_lag:,}</span>') for g in observed.groups(broker))
    return "<h1>Consumer groups</h1>" + _table(
        ("group", "state", "type", "protocol", "partitions committed", "lag"), rows, "groups")


def _members(broker: ObservedBroker, group_id: str) -> list[tuple[str, str, str, str]]:
    """(member, client id, host, assigned partitions) of a classic, KIP-848 or share
    group."""
    coordinator = broker.group_coordinator
    out = []
    described = coordinator.describe_group(group_id)
    if described.error == 0:
        for m in described.members:
            try:
                assigned = decode_assignment(m.assignment).assigned_partitions \
                    if m.assignment else []
                text = "; ".join(f"{tp.topic} {_ids(tp.partitions)}" for tp in assigned)
            except DecodeError:
                text = f"({len(m.assignment)} bytes, not the consumer protocol)"
            out.append((m.member_id, m.client_id, m.client_host, text))
        return out
    consumer = coordinator.describe_consumer_group(group_id)
    if consumer.error != 0:  # a KIP-932 share group's members: the same shape
        consumer = coordinator.describe_share_group(group_id)
    for cm in consumer.members:
        text = "; ".join(f"{a.topic_name} {_ids(a.partitions)}" for a in cm.assignment)
        out.append((cm.member_id, cm.client_id, cm.client_host, text))
    return out


def _empty_group(view: observed.GroupView) -> str:
    """What the members' place says of a group without members: since when it is empty
    (UTC), and where its committed offsets are."""
    since = ""
    if view.empty_since_ms is not None:
        when = datetime.fromtimestamp(view.empty_since_ms / 1000, tz=timezone.utc)
        since = (f' since <time datetime="{when.isoformat()}">'
                 f"{when:%Y-%m-%d %H:%M:%S} UTC</time>")
    if view.group_type == "share":
        offsets = "its share-partitions led by this broker are below"
    else:
        offsets = ("its committed offsets and their lag are below" if view.offsets
                   else "it has no committed offsets")
    return (f'<p id="group-empty">The group has no members: it is empty{since}; '
            f"{offsets}.</p>")


def _group(broker: ObservedBroker, group_id: str, token: str | None
           ) -> tuple[str, str] | None:
    view = next((g for g in observed.groups(broker) if g.group_id == group_id), None)
    if view is None:
        return None
    found = _members(broker, group_id)
    members = _table(("member", "client id", "host", "assignment"),
                     ((_e(a), _e(b), _e(c), _e(d)) for a, b, c, d in found)) if found \
        else _empty_group(view)
    if view.group_type == "share":
        progress = _share_progress(broker, group_id)
    else:
        rows = ((_e(o.topic), o.partition, o.committed,
                 "—" if o.high_watermark is None else o.high_watermark,
                 "—" if o.lag is None else f'<span class="lag">{o.lag:,}</span>')
                for o in view.offsets)
        progress = "<h2>Committed offsets and lag</h2>" + _table(
            ("topic", "partition", "committed", "high watermark", "lag"), rows, "offsets")
    action = ""
    if token and view.state in ("Empty", "Dead"):
        action = _delete_form(f"/groups/{_quote(group_id)}/delete", token, f"group {group_id}")
    elif token:
        action = '<p class="muted">Only a group without members can be deleted.</p>'
    return group_id, f"""<h1>Group {_e(group_id)}</h1>
<p class="muted">state {_e(view.state)} · type {_e(view.group_type)} ·
total lag <span id="total-lag" class="lag">{view.total_lag:,}</span></p>
<h2>Members</h2>{members}
{progress}
{action}"""


def _share_progress(broker: ObservedBroker, group_id: str) -> str:
    """A share group's share-partitions loaded on this broker, with their window."""
    views = observed.share_partitions(broker, group_id)
    head = "<h2>Share-partitions led by this broker</h2>"
    if not views:
        return head + ('<p class="muted" id="share-none">none loaded here: a share-partition '
                       "is loaded by its leader at the group's first share fetch of it; the "
                       "other partitions are on the brokers that lead them.</p>")
    rows = ((_e(v.topic), v.partition, v.counts.start_offset, v.counts.end_offset,
             f"{v.counts.in_flight:,}", f"{v.counts.acquired:,}",
             f"{v.counts.acknowledged:,}", f"{v.counts.archived:,}",
             f"{v.counts.redelivered:,}") for v in views)
    return head + _table(
        ("topic", "partition", "start offset", "end offset", "in flight", "acquired",
         "acknowledged", "archived", "redelivered"), rows, "share-partitions") + (
        '<p class="muted">In flight: records between the start and end offsets not yet '
        "acknowledged or archived. Acknowledged, archived and redelivered are counted "
        "since this broker loaded the share-partition.</p>")
