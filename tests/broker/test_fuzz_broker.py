"""Hostile frames against a real broker process while a real client keeps using it.

A fuzz client sends hostile frames over real sockets: random bytes, valid requests of every
API and version with random values, the same bent (truncated, huge counts, bad versions,
unknown tags...), and size prefixes that lie (oversized, negative, shorter or longer than
what follows). Meanwhile confluent-kafka produces and consumes on its own connections. The
broker must never die, must answer each frame with a response carrying its correlation id or
close that one connection, must keep serving the real client every message in order, must
stay within bounded memory, and must log a line for every connection it closes and no
traceback. `tools/fuzz.sh` runs it with more frames (`ADS_FUZZ_EXAMPLES`).
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from hypothesis import given, note
from hypothesis import strategies as st

from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.errors import ProtocolError
from broker_process import BrokerProcess
from conftest import create_topic
from fuzz_support import any_request_frame, fuzz_settings, hostile, hostile_frames
from kafka_wire import recv_exactly

MAX_REQUEST = 1_000_000
# Peak resident memory the broker may reach while fuzzed (a fresh one uses about 100 MB).
MAX_PEAK_RSS_KB = 400 * 1024

pytestmark = [pytest.mark.broker_process, pytest.mark.slow]

_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ads")
_PREFIXES = ["exact"] * 6 + ["oversized", "negative", "zero", "short", "long"]


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


class LiveTraffic(threading.Thread):
    """A confluent-kafka producer and consumer using the broker throughout the fuzzing."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.produced: list[bytes] = []
        self.consumed: list[bytes] = []
        self.errors: list[str] = []
        self._stop_at: float | None = None
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()
        self.join(60)

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0,
                             "enable.idempotence": True})
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "live",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([self.topic])

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(f"delivery failed: {err}")

        try:
            i = 0
            next_at = 0.0
            deadline = None
            while True:
                if not self._stopping.is_set() and time.monotonic() >= next_at:
                    next_at = time.monotonic() + 0.01
                    value = f"live-{i}".encode()
                    producer.produce(self.topic, value, on_delivery=delivered)
                    self.produced.append(value)
                    i += 1
                producer.poll(0)
                msg = consumer.poll(0.05)
                if msg is not None:
                    if msg.error():
                        self.errors.append(f"consume failed: {msg.error()}")
                    else:
                        self.consumed.append(msg.value())
                if self._stopping.is_set():
                    if deadline is None:
                        producer.flush(30)
                        deadline = time.monotonic() + 30
                    if len(self.consumed) >= len(self.produced) or time.monotonic() > deadline:
                        break
        finally:
            consumer.close()


class FuzzClient:
    """Sends one hostile frame at a time and sees what the broker does with it."""

    def __init__(self, bootstrap: str, advertised: dict[int, tuple[int, int]]) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.advertised = advertised
        self.sock: socket.socket | None = None
        self.answered = 0
        # (local port, the bytes the broker took as the closing frame's size and body)
        self.closed: list[tuple[int, bytes]] = []

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=5)
            self.sock.settimeout(1.0)
        return self.sock

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, prefix: str, frame: bytes) -> None:
        sock = self._connect()
        port = sock.getsockname()[1]
        size = {"exact": len(frame), "oversized": MAX_REQUEST + 1, "negative": -len(frame) - 1,
                "zero": 0, "short": max(len(frame) // 2, 1), "long": len(frame) + 100}[prefix]
        try:
            sock.sendall(struct.pack(">i", size) + frame)
        except (BrokenPipeError, ConnectionResetError):
            self._drop()
            return
        if prefix == "long":
            self._drop()  # the broker waits for bytes that never come: hang up
            return
        try:
            head = recv_exactly(sock, 4)
            if head is None:
                self.closed.append((port, struct.pack(">i", size) + frame[:max(size, 0)]))
                self._drop()
                return
            body = recv_exactly(sock, struct.unpack(">i", head)[0])
        except TimeoutError:
            self._drop()  # a long poll, a rebalance, or acks=0: nothing to see
            return
        except ConnectionResetError:
            self.closed.append((port, struct.pack(">i", size) + frame[:max(size, 0)]))
            self._drop()
            return
        assert body is not None and len(body) >= 4
        self.answered += 1
        if prefix == "exact":
            assert _header_ok(frame), "a frame whose header does not parse was answered"
            assert body[:4] == frame[4:8], "the answer carries another correlation id"
        else:
            self._drop()  # the rest of the frame is garbage the broker reads next


def _header_ok(frame: bytes) -> bool:
    try:
        codec.decode_request_header(frame)
    except ProtocolError as exc:
        # An ApiVersions version we do not know is answered anyway (KIP-511).
        return getattr(exc, "api_key", None) == m.ApiKey.API_VERSIONS and getattr(
            exc, "correlation_id", None) is not None
    return True


def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    from kafka_wire import RawConnection  # noqa: PLC0415

    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="fuzz", client_software_version="1"))
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def _frames(advertised: dict[int, tuple[int, int]]) -> st.SearchStrategy[tuple[str, bytes]]:
    # Mostly requests the broker serves, so the handlers behind the decoders see them too.
    served = [(key, v) for key, (lo, hi) in sorted(advertised.items())
              for v in range(lo, hi + 1) if key in m.API_KEYS]
    return st.tuples(st.sampled_from(_PREFIXES), st.one_of(
        hostile_frames(), any_request_frame(), any_request_frame(served),
        any_request_frame(served), any_request_frame(served).flatmap(hostile),
        any_request_frame(served).flatmap(hostile)))


def test_fuzz_broker_survives_hostile_frames(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "d", None, f"socket.request.max.bytes={MAX_REQUEST}",
                         "auto.create.topics.enable=false").start()
    try:
        assert proc.proc is not None
        pid = proc.proc.pid
        create_topic(proc.bootstrap, "live")
        traffic = LiveTraffic(proc.bootstrap, "live")
        traffic.start()
        advertised = _advertised(proc.bootstrap)
        client = FuzzClient(proc.bootstrap, advertised)

        # No shrinking: the broker's state moves on, so a replay would not be the same run.
        @fuzz_settings(300, shrink=False)
        @given(_frames(advertised))
        def fuzz(case: tuple[str, bytes]) -> None:
            note(f"frame {case!r}")
            client.send(*case)
            assert proc.proc is not None and proc.proc.poll() is None, "the broker died"

        fuzz()
        client._drop()
        traffic.stop()
        assert traffic.errors == []
        assert len(traffic.produced) > 0
        assert traffic.consumed == traffic.produced
        assert client.answered > 0 and client.closed, (client.answered, len(client.closed))
        assert _status_kb(pid, "VmHWM") < MAX_PEAK_RSS_KB
        _check_log(proc.log(), client.closed)
    finally:
        proc.stop()


def _check_log(log: str, closed: list[tuple[int, bytes]]) -> None:
    assert "Traceback" not in log, log[-5000:]
    # One line per event: nothing a client sends (a client id with a line break) splits one.
    stray = [line for line in log.splitlines() if not _LOG_LINE.match(line)]
    assert stray == [], stray[:5]
    assert "unexpected error" not in log and "error handling" not in log, log[-5000:]
    for port, sent in closed:
        if re.search(rf"127\.0\.0\.1:{port}\b", log):
            continue  # a warning naming this connection and why it was closed
        # Otherwise a request the broker does not serve: its refusal is logged once per
        # client and reason (INFO), naming the API and version.
        api_key, version = struct.unpack_from(">hh", sent, 4)
        name = m.ApiKey(api_key).name if api_key in m.API_KEYS else f"api {api_key}"
        assert re.search(rf"refused a request .*{name} v{version} is not supported", log), (
            port, sent[:16])


def test_fuzz_broker_log_lines_cannot_be_forged(tmp_path: Path) -> None:
    # A group id is the client's text and the coordinator logs it: a line break in it is
    # escaped, so it cannot start a line that looks like the broker's.
    proc = BrokerProcess(tmp_path / "d", None, "group.initial.rebalance.delay.ms=0").start()
    forged = "g\n2099-01-01 00:00:00,000 ERROR ads: forged"
    consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": forged,
                         "auto.offset.reset": "earliest"})
    try:
        create_topic(proc.bootstrap, "t")
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 30
        while "preparing to rebalance" not in proc.log() and time.monotonic() < deadline:
            consumer.poll(0.1)
        log = proc.log()
        assert "group g\\n2099-01-01 00:00:00,000 ERROR ads: forged preparing" in log, log
        assert [line for line in log.splitlines() if not _LOG_LINE.match(line)] == []
    finally:
        consumer.close()
        proc.stop()
