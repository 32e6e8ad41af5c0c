"""Full garbage collections of an `ads broker` with many partitions, with and without freezing.

    python tools/gc_pauses.py [--topics 6] [--partitions 1000] [--records 200000] [--rounds 2]

For each round, and in each round for `gc.freeze.enable=false` then `true`: starts a broker
process on a fresh data directory with `http.listener`, makes `--topics` topics of
`--partitions` partitions (one `ads bench produce` of 1,000 records each), produces
`--records` 100-byte records round robin over the first topic's partitions three times
(`ads bench produce --warm-up`, W8's shape), then reads `/metrics`: the number of full
(generation 2) collections, their total pause and the longest one, and the objects frozen.
Collections are counted from the end of start-up on. Each partition keeps three files
open: 6,000 partitions need about 18,000 descriptors (`ulimit -n`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ads.bench.processes import free_port

_ADS = [sys.executable, "-m", "ads.cli.main"]


def _metrics(url: str) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:  # noqa: S310 - loopback
        body = answer.read().decode()
    return {(s.name, s.labels.get("generation", "")): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def _produce(bootstrap: str, *args: str) -> dict[str, float]:
    done = subprocess.run([*_ADS, "bench", "produce", "--bootstrap-server", bootstrap,  # noqa: S603
                           "--record-size", "100", "--round-robin", "--json", *args],
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode:
        raise RuntimeError(f"ads bench produce {' '.join(args)}: {done.stderr}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def _wait_until_ready(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if _metrics(url).get(("ads_broker_ready", "")) == 1:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError("the broker did not start")


def one_broker(freeze: bool, args: argparse.Namespace) -> str:
    port, http = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="gc-pauses-") as tmp:
        broker = subprocess.Popen(  # noqa: S603
            [*_ADS, "broker", "--data-dir", str(Path(tmp) / "data"), "--port", str(port),
             "--log-level", "WARNING", "--set", f"http.listener=127.0.0.1:{http}",
             "--set", f"gc.freeze.enable={str(freeze).lower()}"],
            stdout=subprocess.DEVNULL, stderr=(Path(tmp) / "broker.log").open("wb"))
        try:
            url, bootstrap = f"http://127.0.0.1:{http}", f"127.0.0.1:{port}"
            _wait_until_ready(url)
            for t in range(args.topics):
                _produce(bootstrap, "--topic", f"gc-{t}", "--partitions", str(args.partitions),
                         "--num-records", "1000")
            rates = [_produce(bootstrap, "--topic", "gc-0", "--num-records", str(args.records),
                              "--linger-ms", "5", "--warm-up")["records_per_s"]
                     for _ in range(3)]
            m = _metrics(url)
        except Exception:
            sys.stderr.write((Path(tmp) / "broker.log").read_text(errors="replace")[-3000:])
            raise
        finally:
            broker.terminate()
            broker.wait(30)
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
