"""The checks of the exactly-once chaos scenario and its report.

Each check is a named verdict with a one-line summary (counts) and the first offending
items; `report` puts them with the fault timeline into the text written to
chaos-report.txt (and the same as JSON in chaos-report.json).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from chaos_clients import Copier, GroupReader, IdempotentWriter, OffsetSampler, Txn
from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

SHOWN = 12  # offending items listed per check; the counts cover them all

Records = dict[int, list[tuple[int, bytes]]]  # partition: [(offset, value)] in offset order


@dataclass
class Check:
    name: str
    passed: bool
    summary: str
    details: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"  {'PASS' if self.passed else 'FAIL'}  {self.name}: {self.summary}"]
        out += [f"          {d}" for d in self.details[:SHOWN]]
        if len(self.details) > SHOWN:
            out.append(f"          ... and {len(self.details) - SHOWN} more")
        return out


def read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str,
                timeout_s: float = 180.0) -> tuple[Records, bool]:
    """Every record of the topic as a fresh consumer of the isolation level reads it, up to
    the high watermark each partition had when asked; whether it got there (a
    read_committed reader stops at the last stable offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-verify-{topic}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=60)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: Records = {p: [] for p in range(partitions)}
        eof: dict[int, int] = {}
        deadline = time.monotonic() + timeout_s
        while (any(eof.get(p, -1) < end for p, end in ends.items())
               and time.monotonic() < deadline):
            for m in consumer.consume(1000, 0.5):
                err = m.error()
                if err is None:
                    got[m.partition()].append((m.offset(), m.value()))
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof[m.partition()] = m.offset()
        return got, all(eof.get(p, -1) >= end for p, end in ends.items())
    finally:
        consumer.close()


def open_transactions(bootstrap: str, topics: dict[str, int]) -> list[str]:
    """Partitions whose last stable offset is below the high watermark: a transaction
    still open there (empty once every transaction has its marker committed)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    specs = {TopicPartition(t, p): OffsetSpec.latest()
             for t, n in topics.items() for p in range(n)}
    lso = admin.list_offsets(specs, isolation_level=IsolationLevel.READ_COMMITTED,
                             request_timeout=30)
    hw = admin.list_offsets(specs, isolation_level=IsolationLevel.READ_UNCOMMITTED,
                            request_timeout=30)
    found = []
    for tp in specs:
        stable, high = lso[tp].result(60).offset, hw[tp].result(60).offset
        if stable != high:
            found.append(f"{tp.topic}-{tp.partition}: last stable offset {stable}, "
                         f"high watermark {high}")
    return found


def check_idempotent(writers: list[IdempotentWriter], got: Records, complete: bool) -> Check:
    problems: list[str] = []
    if not complete:
        problems.append("the topic could not be read to its high watermark")
    where: dict[bytes, list[tuple[int, int]]] = {}
    gaps = 0
    for p, records in got.items():
        offsets = [o for o, _ in records]
        if offsets != list(range(len(offsets))):
            gaps += 1
            first = next(i for i, o in enumerate(offsets) if o != i)
            problems.append(f"partition {p}: offsets not 0..{len(offsets) - 1} without gaps "
                            f"(offset {offsets[first]} where {first} was due)")
        for o, v in records:
            where.setdefault(v, []).append((p, o))
    acked = {v: at for w in writers for v, at in w.acked.items()}
    sent = {v for w in writers for v in w.sent}
    lost = [v for v in acked if v not in where]
    duplicated = {v: at for v, at in where.items() if len(at) > 1}
    # librdkafka acknowledges a record without its offset (None) when it infers that it
    # was written: its request's answer was lost, and a later one of the same producer was
    # acknowledged. Such a record must be in its partition, once.
    moved = [v for v, (p, o) in acked.items() if v in where
             and where[v][0] != (p, where[v][0][1] if o is None else o)]
    unknown_offset = sum(1 for _, o in acked.values() if o is None)
    foreign = [v for v in where if v not in sent]
    out_of_order = 0
    for p, records in got.items():
        last: dict[str, int] = {}
        for o, v in records:
            writer, _, n = v.decode(errors="replace").rpartition("-")
            if n.isdigit() and int(n) <= last.get(writer, -1):
                out_of_order += 1
                problems.append(f"partition {p} offset {o}: {v!r} after {writer}-"
                                f"{last[writer]:07d}")
            if n.isdigit():
                last[writer] = max(last.get(writer, -1), int(n))
    problems += [f"lost: {v!r} acknowledged at {acked[v]}" for v in lost]
    problems += [f"duplicated: {v!r} at {at}" for v, at in duplicated.items()]
    problems += [f"moved: {v!r} acknowledged at {acked[v]}, found at {where[v]}" for v in moved]
    problems += [f"never sent: {v!r} at {where[v]}" for v in foreign]
    unacked = sent - set(acked)
    failed = sum(len(w.failed) for w in writers)
    summary = (f"{len(acked)} acknowledged of {len(sent)} sent over {len(got)} partitions: "
               f"{len(lost)} lost, {len(duplicated)} duplicated, {len(moved)} at another "
               f"offset, {gaps} partitions with gaps, {out_of_order} out of order; "
               f"{len(unacked)} unacknowledged ({failed} failed), "
               f"{sum(1 for v in unacked if v in where)} of them written; "
               f"{unknown_offset} acknowledged without an offset")
    ok = complete and not (lost or duplicated or moved or foreign or gaps or out_of_order)
    return Check("idempotent_writes", ok and len(acked) > 0, summary, problems)


@dataclass
class TxnVerdicts:
    """The transactions as the final read_committed read of both topics shows them."""

    committed: list[Txn]
    aborted: list[Txn]
    unknown_visible: list[Txn]
    unknown_invisible: list[Txn]
    partial: list[tuple[Txn, int]]  # (transaction, records visible) neither whole nor none
    duplicated: list[str]
    foreign: list[str]
    complete: bool

    @property
    def hidden_values(self) -> set[tuple[str, bytes]]:
        """Records no read_committed reader may ever return: those of transactions never
        committed (aborted, and unknown ones found invisible)."""
        return {(t, v) for txn in self.aborted + self.unknown_invisible for t, _, v in
                txn.records}


def judge_transactions(txns: list[Txn], final: dict[str, Records], complete: bool
                       ) -> TxnVerdicts:
    seen: dict[tuple[str, bytes], list[tuple[int, int]]] = {}
    for topic, records in final.items():
        for p, rs in records.items():
            for o, v in rs:
                seen.setdefault((topic, v), []).append((p, o))
    v = TxnVerdicts([], [], [], [], [], [], [], complete)
    written = set()
    for txn in txns:
        visible = 0
        for topic, p, value in txn.records:
            written.add((topic, value))
            at = seen.get((topic, value), [])
            if at and at[0][0] == p:
                visible += 1
        _classify(v, txn, visible)
    v.duplicated = [f"{t} {val!r} at {at}" for (t, val), at in seen.items() if len(at) > 1]
    v.foreign = [f"{t} {val!r} at {at}" for (t, val), at in seen.items()
                 if (t, val) not in written]
    return v


def _classify(v: TxnVerdicts, txn: Txn, visible: int) -> None:
    """Files the transaction by its outcome and how many of its records are visible."""
    whole = visible == len(txn.records)
    if txn.outcome == "committed":
        v.committed.append(txn)
        if not whole:
            v.partial.append((txn, visible))
    elif txn.outcome == "aborted":
        v.aborted.append(txn)
        if visible:
            v.partial.append((txn, visible))
    elif whole:
        v.unknown_visible.append(txn)
    elif visible == 0:
        v.unknown_invisible.append(txn)
    else:
        v.partial.append((txn, visible))


def _txn_line(txn: Txn, visible: int) -> str:
    return (f"{txn.writer} #{txn.seq} ({txn.outcome}, planned {txn.planned}): {visible} of "
            f"{len(txn.records)} records visible; calls: {'; '.join(txn.calls) or 'none'}")


def check_committed(v: TxnVerdicts) -> Check:
    partial = [(t, n) for t, n in v.partial if t.outcome == "committed"]
    problems = [_txn_line(t, n) for t, n in partial]
    problems += [f"duplicated: {d}" for d in v.duplicated]
    problems += [f"written by no transaction: {f}" for f in v.foreign]
    if not v.complete:
        problems.insert(0, "the topics could not be read to their high watermarks")
    records = sum(len(t.records) for t in v.committed)
    ok = v.complete and not problems and len(v.committed) > 0
    return Check("committed_transactions_whole", ok,
                 f"{len(v.committed)} committed transactions ({records} records in two "
                 f"topics): {len(partial)} not whole, {len(v.duplicated)} records "
                 f"duplicated, {len(v.foreign)} records no transaction wrote", problems)


def check_unknown(v: TxnVerdicts) -> Check:
    partial = [(t, n) for t, n in v.partial if t.outcome == "unknown"]
    total = len(v.unknown_visible) + len(v.unknown_invisible) + len(partial)
    details = [_txn_line(t, n) for t, n in partial]
    details += [_txn_line(t, len(t.records)) for t in v.unknown_visible]
    details += [_txn_line(t, 0) for t in v.unknown_invisible]
    return Check("unknown_transactions_all_or_nothing", v.complete and not partial,
                 f"{total} transactions whose commit was not confirmed: "
                 f"{len(v.unknown_visible)} visible whole, {len(v.unknown_invisible)} "
                 f"invisible, {len(partial)} partly visible", details)


def check_aborted_at_end(v: TxnVerdicts, uncommitted_hidden: int) -> Check:
    partial = [(t, n) for t, n in v.partial if t.outcome == "aborted"]
    records = sum(len(t.records) for t in v.aborted)
    # Nothing aborted means nothing was checked: a run without aborts fails.
    return Check("aborted_never_read_at_end", v.complete and not partial and bool(v.aborted),
                 f"{len(v.aborted)} aborted transactions ({records} records, "
                 f"{uncommitted_hidden} of them in the logs as read_uncommitted sees them): "
                 f"{len(partial)} with records a read_committed reader returned",
                 [_txn_line(t, n) for t, n in partial])


def check_aborted_during_run(v: TxnVerdicts, readers: list[GroupReader], copier: Copier,
                             copier_source: str) -> Check:
    hidden = v.hidden_values
    written = {(t, val) for txn in v.committed + v.aborted + v.unknown_visible
               + v.unknown_invisible + [t for t, _ in v.partial] for t, _, val in txn.records}
    reads = [(r.name, t, p, o, val) for r in readers for t, p, o, val in r.read]
    reads += [(copier.name, copier_source, p, o, val) for p, o, val in copier.read]
    bad = [f"{who} read {t}-{p}@{o} {val!r} (never committed)" for who, t, p, o, val in reads
           if (t, val) in hidden]
    foreign = [f"{who} read {t}-{p}@{o} {val!r} (written by no transaction)"
               for who, t, p, o, val in reads if (t, val) not in written]
    return Check("aborted_never_read_during_run",
                 bool(reads) and bool(hidden) and not bad and not foreign,
                 f"{len(reads)} records read by read_committed consumers during the run, "
                 f"{len(hidden)} records of transactions never committed to avoid "
                 f"(group members and the copier): {len(bad)} from transactions never "
                 f"committed, {len(foreign)} written by no transaction", bad + foreign)


def check_copier(source: Records, source_complete: bool, sink: Records, sink_complete: bool
                 ) -> Check:
    expected = Counter((p, Copier.PREFIX + v) for p, rs in source.items() for _, v in rs)
    got = Counter((p, v) for p, rs in sink.items() for _, v in rs)
    missing = expected - got
    extra = got - expected
    duplicates = [k for k, n in got.items() if n > 1]
    problems = []
    if not (source_complete and sink_complete):
        problems.append("input or output could not be read to its high watermark")
    problems += [f"missing from the output: partition {p} {v!r} x{n}"
                 for (p, v), n in missing.items()]
    problems += [f"in the output, not in the committed input: partition {p} {v!r} x{n}"
                 for (p, v), n in extra.items()]
    ok = not problems and sum(expected.values()) > 0
    return Check("copier_exactly_once", ok,
                 f"{sum(expected.values())} committed input records, {sum(got.values())} "
                 f"output records: {sum(missing.values())} missing, {sum(extra.values())} "
                 f"extra ({len(duplicates)} duplicated)", problems)


def check_group_offsets(sampler: OffsetSampler) -> Check:
    back = []
    observations = 0
    for (group, topic, p), seen in sorted(sampler.history.items()):
        observations += len(seen)
        best_t, best = seen[0]
        for t, offset in seen[1:]:
            if offset < best:
                back.append(f"{group} {topic}-{p}: {best} at {best_t:.2f} s, then {offset} "
                            f"at {t:.2f} s")
            if offset >= best:
                best_t, best = t, offset
    return Check("group_offsets_monotonic", observations > 0 and not back,
                 f"{observations} committed offsets observed in {sampler.samples} samples "
                 f"of {len(sampler.history)} group partitions ({sampler.errors} samples "
                 f"failed): {len(back)} went back", back)


def report(header: list[str], checks: list[Check], timeline: list[str], clients: list[str],
           logs: list[str]) -> str:
    failed = [c.name for c in checks if not c.passed]
    verdict = ("PASS" if not failed else "FAIL: " + ", ".join(failed))
    lines = ["ADS chaos: exactly-once under failover", *header,
             f"result: {verdict} ({len(checks) - len(failed)} of {len(checks)} checks passed)",
             "", "checks"]
    for c in checks:
        lines += c.lines()
    lines += ["", "clients", *(f"  {c}" for c in clients)]
    lines += ["", "timeline (seconds from the start)", *(f"  {t}" for t in timeline)]
    lines += ["", "broker logs", *(f"  {s}" for s in logs)]
    return "\n".join(lines) + "\n"


def write_report(directory: Path, text: str, checks: list[Check], meta: dict[str, object]
                 ) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "chaos-report.txt"
    path.write_text(text)
    (directory / "chaos-report.json").write_text(json.dumps({
        **meta, "checks": [{"name": c.name, "passed": c.passed, "summary": c.summary,
                            "details": c.details} for c in checks]}, indent=2))
    return path
