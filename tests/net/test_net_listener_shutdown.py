"""The listener's shutdown closes every connection, including those the kernel accepted
just before it stopped: none is left for the garbage collector once the loop ends (its
ResourceWarning the suite turns into a failure of whatever test runs next).

asyncio makes an accepted connection a loop pass after the accept; one made after the
server was closed was left half-built (the transport and its socket never closed). Which
pass the shutdown falls in is what varies, so it is tried at each of the first few."""

from __future__ import annotations

import asyncio
import gc
import socket

import pytest

from ads.net.server import KafkaListener


def _never_called(frame: memoryview, conn: object) -> bytes:
    raise AssertionError("no request is sent")


async def _start_connect_stop(passes: int, clients: list[socket.socket]) -> int:
    listener = KafkaListener(_never_called, "127.0.0.1", 0, 1 << 20)
    _, port = await listener.start()
    clients += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
    for _ in range(passes):
        await asyncio.sleep(0)
    listener.stop_accepting()
    await listener.drain(grace_s=1.0)
    return listener.connection_count


@pytest.mark.parametrize("passes", range(5))
def test_net_listener_stop_closes_connections_accepted_while_stopping(passes: int) -> None:
    clients: list[socket.socket] = []
    # Its own loop, ended right after the drain, as a broker's is when it stops.
    assert asyncio.run(_start_connect_stop(passes, clients)) == 0
    for sock in clients:
        sock.close()
    gc.collect()
