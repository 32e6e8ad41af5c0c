"""Where a broker's CPU goes in W1 or W8: the broker process under `perf record` meanwhile.

    python tools/profile_broker.py OUT_DIR [--broker kafka|ads] [--workload W8|W1]
        [--reps 2] [--kafka-jars DIR]

Starts the broker as `ads bench suite` does (`--broker kafka`: `ads.bench.kafka.KafkaPeer`,
its JVM options and settings, `log.dirs` in OUT_DIR; `--broker ads`: `ads broker` from this
checkout, `ads.bench.processes.AdsBrokerProcess`), gives it the suite's warm-up (500,000
records of 100 B to a one-partition topic), makes the workload's topic (W8: 1,000
partitions; W1: one) and, with `perf record -g` attached to the broker process, runs its
produce `--reps` times (`ads bench produce --warm-up --linger-ms 5`, in this process; the
suite's `Sizes`: W8 200,000 records round robin, W1 1,000,000). Prints each repetition's
records/s and the broker's CPU seconds, the share of samples per shared object (the
kernel, the interpreter or libjvm, compiled code), then the symbols with the most
samples; `perf report -i OUT_DIR/perf.data
--no-children -S SYMBOL -g caller` shows how a symbol was reached. Needs `perf`, and for
Kafka the jars of `make test-deps`.
"""

from __future__ import annotations

import argparse
import subprocess
from contextlib import ExitStack
from pathlib import Path

from ads.bench.kafka import KafkaPeer
from ads.bench.processes import AdsBrokerProcess
from ads.bench.produce import ProduceOptions, run_produce
from ads.bench.stats import cpu_seconds
from ads.bench.suite import Sizes


def _produce(bootstrap: str, topic: str, records: int, round_robin: bool = False) -> float:
    """`ads bench produce --warm-up --linger-ms 5` of 100-byte records, in this process."""
    report = run_produce(ProduceOptions(bootstrap=bootstrap, topic=topic, num_records=records,
                                        round_robin=round_robin, warm_up=True))
    return float(report["records_per_s"])


def _cpu_s(pid: int) -> float:
    used = cpu_seconds(pid)
    if used is None:
        raise SystemExit(f"the broker (process {pid}) is gone")
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--broker", choices=("kafka", "ads"), default="kafka")
    parser.add_argument("--workload", choices=("W8", "W1"), default="W8")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--kafka-jars", type=Path,
                        default=Path(__file__).parent.parent / "tests/kafka_reference/target/jars")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    perf_data = args.out_dir / "perf.data"
    w8 = args.workload == "W8"
    with ExitStack() as stack:
        if args.broker == "kafka":
            broker: KafkaPeer | AdsBrokerProcess = stack.enter_context(
                KafkaPeer(args.kafka_jars, args.out_dir / "kafka"))
        else:
            broker = AdsBrokerProcess(args.out_dir / "ads-data",
                                      args.out_dir / "ads-broker.log").start()
            stack.callback(broker.stop)
        sizes, topic = Sizes(), args.workload.lower()
        broker.create_topic("warm-up", 1)
        _produce(broker.bootstrap, "warm-up", sizes.warmup_records)
        broker.create_topic(topic, sizes.w8_partitions if w8 else 1)
        records = sizes.w8_records if w8 else sizes.w1_records
        perf = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-p", str(broker.pid),  # noqa: S603,S607 - perf by name
                                 "-o", str(perf_data)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for rep in range(1, args.reps + 1):
                cpu = _cpu_s(broker.pid)
                rate = _produce(broker.bootstrap, topic, records, round_robin=w8)
                print(f"{args.workload} repetition {rep}: {rate:,.0f} records/s, the "
                      f"broker {_cpu_s(broker.pid) - cpu:.2f} s of CPU", flush=True)
        finally:
            perf.send_signal(2)  # perf writes its data on SIGINT
            perf.wait(60)
    for sort, count in (("dso", 6), ("dso,sym", 15)):
        report = subprocess.run(["perf", "report", "-i", str(perf_data), "--no-children",  # noqa: S603,S607 - perf by name
                                 "--sort", sort, "--stdio", "-g", "none"],
                                capture_output=True, text=True, check=True)
        lines = [line for line in report.stdout.splitlines() if line.strip() and line[0] != "#"]
        print("\n".join(lines[:count]))


if __name__ == "__main__":
    main()
