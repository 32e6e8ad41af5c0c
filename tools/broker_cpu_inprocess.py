"""The broker's Python CPU per request in process: through the dispatcher, no sockets.

    python tools/broker_cpu_inprocess.py [--requests N] [--runs R]

Starts an in-process broker (`ads.testing.EmbeddedBroker`) and, on its event loop, hands
its dispatcher pre-encoded frames as the network layer would: single-record produce
requests (acks=1), produce-then-fetch pairs where the fetch (max_wait_ms=500) is parked
first and woken by the append, and empty fetches (max_wait_ms=0), the three kinds of
`tools/broker_cpu.py`. For each it prints the event-loop thread's CPU time per request
(`time.thread_time`), the best of R runs: decode, dispatch, handler, replica manager,
storage and encode, and for the pair the loop passes that wake the parked fetch, without
the network layer, the kernel's socket work and the client. Which build it measures is
the one `import ads` finds (`ADS_PURE_PYTHON=1`: the sources; `ads.COMPILED` is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

from broker_cpu import TOPIC, fetch_request, produce_request  # this script's folder

import ads
from ads.client import Connection
from ads.net.server import ConnectionInfo, Response
from ads.protocol import messages as m
from ads.testing.embedded import EmbeddedBroker

C = m.CreateTopicsRequest
Dispatch = Callable[[memoryview, ConnectionInfo], Response | Awaitable[Response]]


def _frame(data: bytes) -> memoryview:
    # What the network layer hands the dispatcher: the frame without its size, writable
    # for produce requests.
    return memoryview(bytearray(data))[4:]


class Bench:
    def __init__(self, dispatch: Dispatch, count: int) -> None:
        self.dispatch = dispatch
        self.count = count
        self.end = 0  # the partition's log end offset
        self.conn = ConnectionInfo(1, "127.0.0.1:1", host="127.0.0.1")
        self.produce = _frame(produce_request())

    async def _call(self, frame: memoryview) -> None:
        result = self.dispatch(frame, self.conn)
        if inspect.isawaitable(result):
            await result

    async def run(self) -> dict[str, float]:
        n, out = self.count, {}
        started = time.thread_time()
        for _ in range(n):
            await self._call(self.produce)
        out["1-record produce"] = time.thread_time() - started
        self.end += n
        started = time.thread_time()
        for i in range(n):
            parked = asyncio.ensure_future(self._call(_frame(fetch_request(self.end + i, 500))))
            await asyncio.sleep(0)  # the fetch parks before the append
            await self._call(self.produce)
            await parked
        out["produce + the long-polling fetch it wakes"] = time.thread_time() - started
        self.end += n
        empty = _frame(fetch_request(self.end, 0))
        started = time.thread_time()
        for _ in range(n):
            await self._call(empty)
        out["empty fetch (max_wait_ms=0)"] = time.thread_time() - started
        return {label: seconds / n * 1e6 for label, seconds in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"compiled modules: {', '.join(ads.COMPILED) or 'none (pure Python)'}")
    with EmbeddedBroker() as broker:
        client = Connection.connect(broker.bootstrap_servers, client_id="broker-cpu",
                                    timeout_s=30)
        client.request(m.ApiKey.CREATE_TOPICS, 7, C(topics=[C.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10_000, validate_only=False))
        client.close()
        assert broker.broker is not None
        bench = Bench(broker.broker.dispatcher, args.requests)
        runs = [broker.run(bench.run(), timeout_s=600) for _ in range(args.runs)]
    for label in runs[0]:
        print(f"{label}: {min(r[label] for r in runs):.1f} µs of the loop thread's CPU each")


if __name__ == "__main__":
    main()
