"""The broker's own CPU per request, measured over raw sockets (no client library).

    python tools/broker_cpu.py HOST:PORT BROKER_PID [--requests N]

Sends, one at a time and waiting for each answer: single-record produce requests (acks=1);
produce-then-fetch pairs where the fetch (max_wait_ms=500) is parked first and woken by the
append; and empty fetches (max_wait_ms=0, as a consumer with fetch.wait.max.ms=0 sends
them). For each it prints requests/s and the broker process's CPU time per request, read
from /proc/PID/stat (user + system, so the kernel's socket and wake-up work is included,
and each apart).
The broker must run on this machine; the topic `broker-cpu` is created if missing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from ads.bench.saturate import produce_frame
from ads.bench.stats import cpu_times
from ads.client import Connection
from ads.protocol import codec
from ads.protocol import messages as m

TOPIC = "broker-cpu"
F, C = m.FetchRequest, m.CreateTopicsRequest


def _connect(address: str) -> Connection:
    # Requests go out pre-encoded with send_frame, so the timing covers only the broker.
    return Connection.connect(address, client_id="broker-cpu", timeout_s=None)


def process_cpu(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds so far (tools/loop_floor.py too)."""
    times = cpu_times(pid)
    if times is None:
        raise SystemExit(f"process {pid} is gone")
    return times


def fetch_request(offset: int, max_wait_ms: int) -> bytes:
    """A whole Fetch v11 frame of partition 0 from `offset` (tools/broker_cpu_inprocess.py too)."""
    body = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic=TOPIC, partitions=[F.FetchTopic.FetchPartition(
                 partition=0, current_leader_epoch=-1, fetch_offset=offset,
                 log_start_offset=-1, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")
    return codec.encode_request(m.ApiKey.FETCH, 11, 1, "broker-cpu", body)


def produce_request() -> bytes:
    """A whole Produce v9 frame (acks=1) of one 100-byte record for partition 0."""
    return produce_frame(TOPIC, 0, 1, 100)


def _measure(label: str, pid: int, count: int, one: Callable[[int], None]) -> None:
    (user, system), start = process_cpu(pid), time.perf_counter()
    for i in range(count):
        one(i)
    elapsed = time.perf_counter() - start
    user_after, system_after = process_cpu(pid)
    user_us = (user_after - user) / count * 1e6
    system_us = (system_after - system) / count * 1e6
    print(f"{label}: {count / elapsed:,.0f}/s, broker CPU {user_us + system_us:.0f} µs each "
          f"(user {user_us:.0f}, system {system_us:.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address")
    parser.add_argument("pid", type=int)
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    producer, fetcher = _connect(args.address), _connect(args.address)
    create = C(topics=[C.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1,
                                        assignments=[], configs=[])],
               timeout_ms=10_000, validate_only=False)
    producer.request(m.ApiKey.CREATE_TOPICS, 7, create)
    listing = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            m.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    answer = producer.request(m.ApiKey.LIST_OFFSETS, 7, listing)
    assert isinstance(answer, m.ListOffsetsResponse)
    end = answer.topics[0].partitions[0].offset
    produce = produce_request()
    n = args.requests

    def one_produce(_: int) -> None:
        producer.send_frame(produce)
        producer.receive_frame()

    _measure("1-record produce", args.pid, n, one_produce)
    end += n

    def one_pair(i: int) -> None:
        fetcher.send_frame(fetch_request(end + i, 500))
        time.sleep(0.0005)  # parked before the append
        producer.send_frame(produce)
        producer.receive_frame()
        fetcher.receive_frame()

    _measure("produce + the long-polling fetch it wakes", args.pid, n, one_pair)
    end += n
    empty = fetch_request(end, 0)

    def one_empty(_: int) -> None:
        fetcher.send_frame(empty)
        fetcher.receive_frame()

    _measure("empty fetch (max_wait_ms=0)", args.pid, n, one_empty)


if __name__ == "__main__":
    main()
