"""Broker-bound saturation (the suite's W11): produce requests pipelined over raw sockets by
a client that costs almost nothing, so the broker is what runs out.

Each connection keeps `in_flight` Produce requests outstanding (acks=1, one partition per
request, the partitions taken in turn), sending a new one for each answer. On a cluster the
connections are dealt over the brokers leading the topic's partitions, each sending only
to the partitions its broker leads. The requests are encoded once: the same bytes go out
again and again, and an answer is only counted by its size prefix (one in `CHECK_EVERY` is
decoded and must carry no error, so a broker refusing them cannot pass for a fast one).
One thread drives every connection: the client's CPU is a small fraction of the broker's,
which leaves the machine's other cores to the broker.

Figures per request size: requests/s, records/s, the broker's CPU time per request (user +
system, read from `/proc`, so the kernel's socket work counts) and the cores it used.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from ads.bench.produce import BenchError, quiet_admin
from ads.bench.stats import cpu_seconds, rate
from ads.protocol import codec
from ads.protocol import messages as m
from ads.records.batch import build_batch

PRODUCE_VERSION = 9  # within both ADS's and Kafka 4's supported range (v3 and up)
CHECK_EVERY = 1000
_SIZE = struct.Struct(">i")
_P = m.ProduceRequest


@dataclass(frozen=True, slots=True)
class SaturateOptions:
    bootstrap: str
    topic: str
    connections: int = 4
    in_flight: int = 8
    records_per_request: int = 1
    record_size: int = 100
    duration_s: float = 5.0
    warm_up_s: float = 0.5  # sent before the measured part (connections, first appends)
    broker_pids: tuple[int, ...] = ()  # whose CPU time is read; none: not reported


def produce_frame(topic: str, partition: int, records: int, record_size: int) -> bytes:
    """A whole Produce frame (acks=1) of one batch of `records` records for `partition`."""
    batch = build_batch([(None, b"x" * record_size)] * records)
    return codec.encode_request(m.ApiKey.PRODUCE, PRODUCE_VERSION, 0, "ads-bench-saturate", _P(
        transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[_P.TopicProduceData(
            name=topic, partition_data=[_P.TopicProduceData.PartitionProduceData(
                index=partition, records=bytes(batch))])]))


def _check(frame: bytes) -> None:
    _, body = codec.decode_response(m.ApiKey.PRODUCE, PRODUCE_VERSION, frame)
    if not isinstance(body, m.ProduceResponse):
        raise BenchError(f"saturate: a Produce request answered {type(body).__name__}")
    for topic in body.responses:
        for p in topic.partition_responses:
            if p.error_code:
                raise BenchError(f"saturate: partition {p.index} answered error {p.error_code}")


class _Conn:
    """One connection: its socket, the bytes still to send, and what came back so far."""

    __slots__ = ("sock", "frames", "out", "inbuf", "answered", "next_frame")

    def __init__(self, address: tuple[str, int], frames: list[bytes]) -> None:
        self.frames = frames  # one request per partition this connection writes to
        self.sock = socket.create_connection(address, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.out = bytearray()
        self.inbuf = bytearray()
        self.answered = 0
        self.next_frame = 0

    def queue_next(self) -> None:
        self.out += self.frames[self.next_frame % len(self.frames)]
        self.next_frame += 1

    def take_answers(self) -> list[bytes]:
        """Whole answers received, removed from the buffer; only the sampled ones are kept."""
        sampled: list[bytes] = []
        buf, pos = self.inbuf, 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            self.answered += 1
            if self.answered % CHECK_EVERY == 1:
                sampled.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        del buf[:pos]
        return sampled


def _leaders(bootstrap: str, topic: str) -> dict[tuple[str, int], list[int]]:
    """Per leader's address, the partitions of `topic` it leads."""
    admin = quiet_admin(bootstrap)
    md = admin.list_topics(topic, timeout=30)
    found = md.topics.get(topic)
    if found is None or found.error is not None:
        raise BenchError(f"saturate: no topic {topic!r} ({found and found.error})")
    out: dict[tuple[str, int], list[int]] = {}
    for p in sorted(found.partitions.values(), key=lambda p: p.id):
        broker = md.brokers.get(p.leader)
        if broker is None or broker.host is None:
            raise BenchError(f"saturate: partition {p.id} of {topic!r} has no leader")
        out.setdefault((broker.host, broker.port), []).append(p.id)
    return out


def _flush(sel: selectors.BaseSelector, c: _Conn) -> None:
    """Sends what the socket takes now; waits for it to be writable only while bytes are
    left (a socket with nothing to send would otherwise wake the loop without end)."""
    if c.out:
        sent = c.sock.send(c.out)
        del c.out[:sent]
    events = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0)
    if sel.get_key(c.sock).events != events:
        sel.modify(c.sock, events, c)


def _drive(conns: list[_Conn], until: float) -> int:
    """Keeps every connection's pipeline full until `until`; returns the answers counted."""
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
        _flush(sel, c)
    counted = 0
    try:
        while time.monotonic() < until:
            for key, events in sel.select(timeout=0.5):
                c = key.data
                if events & selectors.EVENT_READ:
                    data = c.sock.recv(1 << 20)
                    if not data:
                        raise BenchError("saturate: the broker closed a connection")
                    c.inbuf += data
                    before = c.answered
                    for frame in c.take_answers():
                        _check(frame)
                    for _ in range(c.answered - before):
                        c.queue_next()
                    counted += c.answered - before
                _flush(sel, c)
    finally:
        sel.close()
    return counted


def _broker_cpu(pids: tuple[int, ...]) -> float | None:
    total = 0.0
    for pid in pids:
        seconds = cpu_seconds(pid)
        if seconds is None:
            return None
        total += seconds
    return total


def run_saturate(opts: SaturateOptions) -> dict[str, Any]:
    """Runs one saturation phase; returns its figures."""
    if opts.connections < 1 or opts.in_flight < 1:
        raise BenchError("saturate: connections and in_flight must be positive")
    leaders = list(_leaders(opts.bootstrap, opts.topic).items())
    conns = []
    try:
        for i in range(opts.connections):
            address, partitions = leaders[i % len(leaders)]
            c = _Conn(address, [produce_frame(opts.topic, p, opts.records_per_request,
                                              opts.record_size) for p in partitions])
            conns.append(c)
            c.next_frame = i // len(leaders)  # each connection starts on its own partition
            for _ in range(opts.in_flight):
                c.queue_next()
        _drive(conns, time.monotonic() + opts.warm_up_s)
        cpu0 = _broker_cpu(opts.broker_pids)
        t0 = time.monotonic()
        answered = _drive(conns, t0 + opts.duration_s)
        elapsed = time.monotonic() - t0
        cpu1 = _broker_cpu(opts.broker_pids)
    finally:
        for c in conns:
            c.sock.close()
    if not answered:
        raise BenchError("saturate: no request was answered")
    result: dict[str, Any] = {
        "requests": answered, "elapsed_s": round(elapsed, 3),
        "requests_per_s": round(rate(answered, elapsed), 1),
        "records_per_s": round(rate(answered * opts.records_per_request, elapsed), 1),
        "records_per_request": opts.records_per_request,
    }
    if cpu0 is not None and cpu1 is not None:
        cpu = cpu1 - cpu0
        result["broker_cpu_us_per_request"] = round(cpu / answered * 1e6, 2)
        result["broker_cores"] = round(cpu / elapsed, 3)
    return result
