"""The broker's own CPU per request, measured over raw sockets (no client library).

    python tools/broker_cpu.py HOST:PORT BROKER_PID [--requests N]

Sends, one at a time and waiting for each answer: single-record produce requests (acks=1);
produce-then-fetch pairs where the fetch (max_wait_ms=500) is parked first and woken by the
append; and empty fetches (max_wait_ms=0, as a consumer with fetch.wait.max.ms=0 sends
them). For each it prints requests/s and the broker process's CPU time per request, read
from /proc/PID/stat (user + system, so the kernel's socket and wake-up work is included).
The broker must run on this machine; the topic `broker-cpu` is created if missing.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from ads.protocol import codec
from ads.protocol import messages as m
from ads.records.batch import build_batch

TOPIC = "broker-cpu"
P, F, C = m.ProduceRequest, m.FetchRequest, m.CreateTopicsRequest


class _Conn:
    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def recv(self) -> bytes:
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fetch(offset: int, max_wait_ms: int) -> bytes:
    body = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic=TOPIC, partitions=[F.FetchTopic.FetchPartition(
                 partition=0, current_leader_epoch=-1, fetch_offset=offset,
                 log_start_offset=-1, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")
    return codec.encode_request(m.ApiKey.FETCH, 11, 1, "broker-cpu", body)


def _measure(label: str, pid: int, count: int, one: Callable[[int], None]) -> None:
    cpu, start = _cpu_seconds(pid), time.perf_counter()
    for i in range(count):
        one(i)
    elapsed, used = time.perf_counter() - start, _cpu_seconds(pid) - cpu
    print(f"{label}: {count / elapsed:,.0f}/s, broker CPU {used / count * 1e6:.0f} µs each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address")
    parser.add_argument("pid", type=int)
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    producer, fetcher = _Conn(args.address), _Conn(args.address)
    create = C(topics=[C.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1,
                                        assignments=[], configs=[])],
               timeout_ms=10_000, validate_only=False)
    producer.send(codec.encode_request(m.ApiKey.CREATE_TOPICS, 7, 1, "broker-cpu", create))
    producer.recv()
    listing = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            m.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    producer.send(codec.encode_request(m.ApiKey.LIST_OFFSETS, 7, 2, "broker-cpu", listing))
    _, answer = codec.decode_response(m.ApiKey.LIST_OFFSETS, 7, producer.recv())
    end = answer.topics[0].partitions[0].offset
    produce = codec.encode_request(m.ApiKey.PRODUCE, 9, 3, "broker-cpu", P(
        transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[P.TopicProduceData(
            name=TOPIC, partition_data=[P.TopicProduceData.PartitionProduceData(
                index=0, records=bytes(build_batch([(None, b"x" * 100)])))])]))
    n = args.requests

    def one_produce(_: int) -> None:
        producer.send(produce)
        producer.recv()

    _measure("1-record produce", args.pid, n, one_produce)
    end += n

    def one_pair(i: int) -> None:
        fetcher.send(_fetch(end + i, 500))
        time.sleep(0.0005)  # parked before the append
        producer.send(produce)
        producer.recv()
        fetcher.recv()

    _measure("produce + the long-polling fetch it wakes", args.pid, n, one_pair)
    end += n
    empty = _fetch(end, 0)

    def one_empty(_: int) -> None:
        fetcher.send(empty)
        fetcher.recv()

    _measure("empty fetch (max_wait_ms=0)", args.pid, n, one_empty)


if __name__ == "__main__":
    main()
