"""Full garbage collections of an `ads broker` with many partitions, with and without freezing.

    python tools/gc_pauses.py [--topics 6] [--partitions 1000] [--records 200000] [--rounds 2]

For each round, and in each round for `gc.freeze.enable=false` then `true`: starts a broker
process on a fresh data directory with `http.listener`, makes `--topics` topics of
`--partitions` partitions (one `ads bench produce` of 1,000 records each), produces
`--records` 100-byte records round robin over the first topic's partitions three times
(`ads bench produce --warm-up`, W8's shape), then reads `/metrics`: the number of full
(generation 2) collections, their total pause and the longest one, and the objects frozen.
Collections are counted from the end of start-up on.
"""

from __future__ import annotations

import argparse
import tempfile
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ads.bench.processes import AdsBrokerProcess, free_port
from ads.bench.produce import ProduceOptions, ensure_topic, run_produce


def _metrics(url: str) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:  # noqa: S310 - loopback
        body = answer.read().decode()
    return {(s.name, s.labels.get("generation", "")): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def _produce(bootstrap: str, topic: str, records: int, warm_up: bool = False) -> float:
    """`ads bench produce --round-robin` of 100-byte records, in this process."""
    report = run_produce(ProduceOptions(bootstrap=bootstrap, topic=topic, num_records=records,
                                        round_robin=True, warm_up=warm_up))
    return float(report["records_per_s"])


def one_broker(freeze: bool, args: argparse.Namespace) -> str:
    http = free_port()
    with tempfile.TemporaryDirectory(prefix="gc-pauses-") as tmp:
        broker = AdsBrokerProcess(Path(tmp) / "data", Path(tmp) / "broker.log", (
            f"http.listener=127.0.0.1:{http}", f"gc.freeze.enable={str(freeze).lower()}"))
        broker.start()
        try:
            for t in range(args.topics):
                ensure_topic(broker.bootstrap, f"gc-{t}", args.partitions)
                _produce(broker.bootstrap, f"gc-{t}", 1000)
            rates = [_produce(broker.bootstrap, "gc-0", args.records, warm_up=True)
                     for _ in range(3)]
            m = _metrics(f"http://127.0.0.1:{http}")
        finally:
            broker.stop()
    return (f"gc.freeze.enable={str(freeze).lower():5}  full collections "
            f"{m[('ads_gc_collections_total', '2')]:.0f}, paused "
            f"{m[('ads_gc_pause_seconds_total', '2')] * 1e3:.0f} ms in all, longest "
            f"{m[('ads_gc_longest_pause_seconds', '2')] * 1e3:.1f} ms; frozen objects "
            f"{m[('ads_gc_frozen_objects', '')]:,.0f}; records/s "
            + ", ".join(f"{r:,.0f}" for r in rates))

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for _ in range(args.rounds):
        for freeze in (False, True):
            print(one_broker(freeze, args), flush=True)


if __name__ == "__main__":
    main()
