"""`ads bench produce|consume|share-consume|e2e|suite`: benchmarks that work against any
Kafka-protocol broker, and the side-by-side suite that compares ADS with librdkafka's mock broker.

Each tool prints a progress line on stderr while it runs and a summary at the end; with
`--json` the summary is one JSON object on stdout, for scripts.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from ads.bench import consume as bconsume
from ads.bench import e2e as be2e
from ads.bench import produce as bproduce
from ads.bench import share as bshare
from ads.bench.produce import CLIENTS, COMPRESSION, BenchError
from ads.cli.common import (
    CommandError,
    UsageError,
    add_client_arguments,
    parse_assignments,
    run_command,
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               help_text: str) -> None:
    p = sub.add_parser("bench", help=help_text)
    tools = p.add_subparsers(dest="bench_command", required=True)

    pp = tools.add_parser("produce", help="producer throughput and latency "
                                          "(like kafka-producer-perf-test.sh)")
    _common(pp)
    pp.add_argument("--num-records", type=int, required=True, metavar="N")
    size = pp.add_mutually_exclusive_group()
    size.add_argument("--record-size", type=int, default=100, metavar="BYTES")
    size.add_argument("--payload-file", metavar="FILE",
                      help="values are the file's lines, chosen at random")
    pp.add_argument("--throughput", type=float, default=-1, metavar="RECORDS_PER_S",
                    help="target rate (-1: unlimited)")
    _producer_flags(pp)
    pp.add_argument("--batch-size", type=int, metavar="BYTES")
    pp.add_argument("--compression", choices=COMPRESSION, default="none")
    pp.add_argument("--partitions", type=int, metavar="N",
                    help="create the topic with N partitions if it is missing")
    pp.add_argument("--round-robin", action="store_true",
                    help="spread records over the partitions in turn instead of the "
                         "client's partitioner")
    pp.add_argument("--client", choices=CLIENTS, default="confluent-kafka")
    pp.add_argument("--warm-up", action="store_true",
                    help="send one record first and time from its acknowledgement: the "
                         "client's set-up is reported as ready_ms, not counted")
    pp.set_defaults(func=run_command("bench produce", _produce))

    pc = tools.add_parser("consume", help="consumer throughput "
                                          "(like kafka-consumer-perf-test.sh)")
    _common(pc)
    pc.add_argument("--num-records", type=int, required=True, metavar="N",
                    help="records to read (per round)")
    pc.add_argument("--group", metavar="G", help="consume as a member of group G "
                                                 "(default: assign every partition)")
    pc.add_argument("--last", type=int, metavar="N",
                    help="read only the last N records of each partition")
    pc.add_argument("--rounds", type=int, default=1, metavar="R",
                    help="read the same records R times (assign mode)")
    pc.add_argument("--timeout-ms", type=int, default=10_000, metavar="MS",
                    help="stop after MS without a record (default 10000)")
    pc.add_argument("--client", choices=CLIENTS, default="confluent-kafka")
    pc.set_defaults(func=run_command("bench consume", _consume))

    _add_share_consume(tools)

    pe = tools.add_parser("e2e", help="end-to-end latency at a fixed rate "
                                      "(like Kafka's EndToEndLatency)")
    _common(pe)
    pe.add_argument("--num-records", type=int, required=True, metavar="N")
    pe.add_argument("--throughput", type=float, default=10_000, metavar="RECORDS_PER_S",
                    help="records per second (default 10000)")
    pe.add_argument("--record-size", type=int, default=100, metavar="BYTES")
    _producer_flags(pe)
    pe.add_argument("--partition", type=int, default=0)
    pe.add_argument("--partitions", type=int, metavar="N",
                    help="create the topic with N partitions if it is missing")
    pe.set_defaults(func=run_command("bench e2e", _e2e))

    ps = tools.add_parser("suite", help="ADS versus librdkafka's mock broker or Apache "
                                        "Kafka, side by side (W1-W12; takes minutes)")
    ps.add_argument("--output-dir", default="bench-results", metavar="DIR",
                    help="results go to DIR/<timestamp>/ (default bench-results)")
    ps.add_argument("--workloads", default="W1,W2,W3,W4,W5,W6,W7,W8,W9,W10,W11,W12",
                    metavar="W1,W2,...")
    ps.add_argument("--reps", type=int, default=3, help="repetitions per broker (default 3)")
    ps.add_argument("--quick", action="store_true",
                    help="tiny workloads, one repetition: checks the suite works")
    ps.add_argument("--profile", action="store_true",
                    help="profile the ADS broker with py-spy: a flame graph per workload")
    ps.add_argument("--docs", default="docs/benchmarks.md", metavar="FILE",
                    help="update the results block of FILE (default docs/benchmarks.md; "
                         "never with --quick)")
    ps.add_argument("--no-docs", action="store_true", help="do not update any docs file")
    ps.add_argument("--keep-data", action="store_true", help="keep the ADS data directory")
    ps.add_argument("--ads-set", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config for the ADS broker (repeatable)")
    ps.add_argument("--peer", choices=["mock", "kafka", "both"], default="mock",
                    help="what ADS is measured against: librdkafka's mock broker (default), "
                         "Apache Kafka's broker (one KRaft node from --kafka-jars; three "
                         "for W9 and W10), or both")
    ps.add_argument("--kafka-jars", metavar="DIR",
                    help="Kafka's broker jar and its dependencies, for --peer kafka|both "
                         "(default tests/kafka_reference/target/jars of this checkout, "
                         "which `make test-deps` fills)")
    ps.add_argument("--json", action="store_true", help="print the results as JSON")
    ps.set_defaults(func=run_command("bench suite", _suite))


def _add_share_consume(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pq = tools.add_parser("share-consume", help="share group (KIP-932) throughput, "
                                                "optionally against a classic consumer")
    _common(pq)
    pq.add_argument("--num-records", type=int, required=True, metavar="N",
                    help="records to read (produce them first)")
    pq.add_argument("--consumers", type=int, default=1, metavar="K",
                    help="share consumers of the group, one thread each (default 1)")
    pq.add_argument("--compare", action="store_true",
                    help="also read the records with a classic group consumer")
    pq.add_argument("--timeout-ms", type=int, default=10_000, metavar="MS",
                    help="stop after MS without a record (default 10000)")
    pq.set_defaults(func=run_command("bench share-consume", _share_consume))


def _common(p: argparse.ArgumentParser) -> None:
    add_client_arguments(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")


def _producer_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--acks", choices=["all", "-1", "0", "1"], default="1")
    p.add_argument("--linger-ms", type=float, default=5.0)
    p.add_argument("--producer-prop", action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka producer property (repeatable)")


def _config(args: argparse.Namespace, flag_values: list[str] | None = None) -> dict[str, str]:
    conf = dict(args.client_properties)
    conf.update(parse_assignments(flag_values or [], "--producer-prop"))
    return conf


def _positive(value: int, flag: str) -> None:
    if value <= 0:
        raise UsageError(f"{flag} must be positive")


def _produce(args: argparse.Namespace) -> int:
    _positive(args.num_records, "--num-records")
    payloads: list[bytes] = []
    if args.payload_file:
        try:
            payloads = [line for line in Path(args.payload_file).read_bytes().split(b"\n")
                        if line]
        except OSError as exc:
            raise UsageError(f"cannot read --payload-file: {exc.strerror}") from exc
        if not payloads:
            raise UsageError("--payload-file holds no non-empty line")
    else:
        _positive(args.record_size, "--record-size")
    opts = bproduce.ProduceOptions(
        bootstrap=args.bootstrap_server, topic=args.topic, num_records=args.num_records,
        record_size=args.record_size, payloads=payloads, throughput=args.throughput,
        acks=args.acks, linger_ms=args.linger_ms, batch_size=args.batch_size,
        compression=args.compression, partitions=args.partitions,
        round_robin=args.round_robin, client=args.client,
        config=_config(args, args.producer_prop), progress=True, warm_up=args.warm_up)
    report = _guarded(bproduce.run_produce, opts)
    if report["failed"]:
        _emit(args, report)
        raise CommandError(f"{report['failed']} records failed: {report['first_error']}")
    return _emit(args, report)


def _consume(args: argparse.Namespace) -> int:
    _positive(args.num_records, "--num-records")
    _positive(args.rounds, "--rounds")
    opts = bconsume.ConsumeOptions(
        bootstrap=args.bootstrap_server, topic=args.topic, num_records=args.num_records,
        group=args.group, last=args.last, rounds=args.rounds,
        timeout_s=args.timeout_ms / 1000.0, client=args.client, config=_config(args),
        progress=True)
    return _emit(args, _guarded(bconsume.run_consume, opts))


def _share_consume(args: argparse.Namespace) -> int:
    _positive(args.num_records, "--num-records")
    _positive(args.consumers, "--consumers")
    opts = bshare.ShareConsumeOptions(
        bootstrap=args.bootstrap_server, topic=args.topic, num_records=args.num_records,
        consumers=args.consumers, timeout_s=args.timeout_ms / 1000.0, compare=args.compare,
        config=_config(args))
    return _emit(args, _guarded(bshare.run_share_consume, opts))


def _e2e(args: argparse.Namespace) -> int:
    _positive(args.num_records, "--num-records")
    conf = _config(args)
    opts = be2e.E2EOptions(
        bootstrap=args.bootstrap_server, topic=args.topic, num_records=args.num_records,
        rate=args.throughput, record_size=args.record_size, acks=args.acks,
        linger_ms=args.linger_ms, partition=args.partition, partitions=args.partitions,
        producer_config={**conf, **parse_assignments(args.producer_prop, "--producer-prop")},
        consumer_config=conf, progress=True)
    return _emit(args, _guarded(be2e.run_e2e, opts))


def _suite(args: argparse.Namespace) -> int:
    from ads.bench import suite  # noqa: PLC0415 - the suite's imports only when it runs

    _positive(args.reps, "--reps")
    workloads = tuple(w.strip().upper() for w in args.workloads.split(",") if w.strip())
    peers = ("mock", "kafka") if args.peer == "both" else (args.peer,)
    jars = _kafka_jars(args.kafka_jars) if "kafka" in peers else None
    opts = suite.SuiteOptions(
        output_dir=Path(args.output_dir), workloads=workloads, reps=args.reps,
        peers=peers, kafka_jars=jars,
        profile=args.profile, keep_data=args.keep_data, ads_sets=tuple(args.ads_set),
        docs=None if args.no_docs or args.quick else Path(args.docs),
        command="ads " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["bench"]
        else "ads bench suite")
    if args.quick:
        opts = suite.quick_options(opts)
    results, run_dir = _guarded(lambda o: suite.run_suite(o), opts)
    if args.json:
        print(json.dumps(results, sort_keys=True))
    else:
        from ads.bench.report import markdown_table  # noqa: PLC0415

        print(markdown_table(results))
        print(f"results in {run_dir}")
    return 0


def _kafka_jars(flag: str | None) -> Path:
    """The --kafka-jars directory, or this checkout's copy of Kafka's jars."""
    from ads.bench.kafka import kafka_jars_problem  # noqa: PLC0415 - only for the suite

    if flag is not None:
        jars = Path(flag)
    else:
        # src/ads/cli/bench.py: the checkout is three folders up from the package
        checkout = Path(__file__).resolve().parents[3]
        jars = checkout / "tests" / "kafka_reference" / "target" / "jars"
        if not jars.is_dir():
            raise UsageError(f"--peer kafka needs Kafka's jars: {jars} does not exist "
                             "(`make test-deps` fills it) and no --kafka-jars DIR was given")
    problem = kafka_jars_problem(jars)
    if problem is not None:
        raise UsageError(f"--kafka-jars: {problem}")
    return jars


def _guarded(fn: Any, opts: Any) -> Any:
    try:
        return fn(opts)
    except BenchError as exc:
        raise CommandError(str(exc)) from exc


def _emit(args: argparse.Namespace, report: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return 0
    print(summary_line(report))
    return 0


def summary_line(report: dict[str, Any]) -> str:
    """Kafka's perf tools' one-line summary, in words."""
    tool = report["tool"]
    if tool == "consume":
        first = report["time_to_first_record_ms"]
        return (f"{report['records']} records in {report['elapsed_s']:.2f} s: "
                f"{report['records_per_s']:,.0f} records/s ({report['mb_per_s']:.2f} MB/s) "
                f"after the first record, which came after "
                f"{'-' if first is None else f'{first:.0f}'} ms")
    if tool == "share-consume":
        share = report["share"]
        line = (f"{share['records']} records by {report['consumers']} share consumers: "
                f"{share['records_per_s']:,.0f} records/s ({share['mb_per_s']:.2f} MB/s), "
                f"{share['redelivered']} delivered again")
        if "classic" in report:
            line += (f"; a classic group consumer {report['classic']['records_per_s']:,.0f}"
                     f" records/s ({report['share_over_classic']:.2f}x)")
        return line
    lat = report["latency_ms"]
    parts = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in lat.items())
    if tool == "e2e":
        rtts = ", ".join(f"{kind} {'-' if report[key] is None else report[key]} µs"
                         for kind, key in (("produce", "produce_rtt_p50_us"),
                                           ("fetch", "fetch_rtt_p50_us")))
        return (f"{report['received']}/{report['sent']} records at {report['send_rate']:,.0f} "
                f"records/s, {report['requests_per_s']:,.0f} requests/s, "
                f"{report['fetch_requests_per_s']:,.0f} fetches/s; round trip p50: {rtts}; "
                f"end-to-end latency ms: {parts}")
    return (f"{report['acknowledged']} records sent, {report['records_per_s']:,.1f} records/s "
            f"({report['mb_per_s']:.2f} MB/s); latency ms: {parts}")
