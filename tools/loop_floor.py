"""The floor under `tools/broker_cpu.py`: a server's CPU per round trip when it does nothing.

    python tools/loop_floor.py [--requests N] [--rounds R] [--frame-bytes B]

Starts, in a subprocess, the smallest asyncio server that speaks in Kafka's framing (a
4-byte size, then the frame): a `BufferedProtocol` on the default event loop that answers
every complete frame with a fixed 60-byte frame through `transport.write`, as the broker's
network layer does, but with no decoding, handler or encoding. A client on this machine
sends frames of `--frame-bytes` (100: about a one-record produce) one at a time, waiting
for each answer, and the server's CPU time per round trip is read from /proc/PID/stat as
`tools/broker_cpu.py` reads the broker's (user and system). What a Python broker on asyncio
pays per request before doing any of its own work: the loop's pass, the transport's read
and write, the system calls and the wake-ups.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import subprocess
import sys
import time

from broker_cpu import process_cpu  # this script's folder

_ANSWER = struct.pack(">i", 56) + bytes(56)


class _Answering(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self.buf = bytearray(1 << 16)
        self.view = memoryview(self.buf)
        self.have = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.have:]

    def buffer_updated(self, nbytes: int) -> None:
        self.have += nbytes
        pos = 0
        while self.have - pos >= 4:
            size = int.from_bytes(self.buf[pos:pos + 4], "big")
            if self.have - pos - 4 < size:
                break
            pos += 4 + size
            assert self.transport is not None
            self.transport.write(_ANSWER)
        if pos:
            self.buf[:self.have - pos] = self.buf[pos:self.have]
            self.have -= pos


async def _serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Answering, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def _receive(sock: socket.socket, n: int) -> None:
    while n:
        got = len(sock.recv(n))
        if not got:
            raise ConnectionError("the server closed the connection")
        n -= got


def _measure(port: int, pid: int, requests: int, frame_bytes: int) -> tuple[float, float]:
    frame = struct.pack(">i", frame_bytes) + bytes(frame_bytes)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        user, system = process_cpu(pid)
        for _ in range(requests):
            sock.sendall(frame)
            _receive(sock, len(_ANSWER))
        user_after, system_after = process_cpu(pid)
    return (user_after - user) / requests * 1e6, (system_after - system) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frame-bytes", type=int, default=100)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server process
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)],  # noqa: S603
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the server did not start")
        time.sleep(0.5)
        for _ in range(args.rounds):
            user, system = _measure(port, server.pid, args.requests, args.frame_bytes)
            print(f"asyncio server, nothing done per frame: server CPU {user + system:.0f} µs "
                  f"per round trip (user {user:.0f}, system {system:.0f})", flush=True)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
