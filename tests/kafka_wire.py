"""Raw Kafka requests over a blocking ``ads.client`` connection, for tests that must send
exact (or malformed) bytes and see what the broker answers or whether it hangs up."""

from __future__ import annotations

import socket
from typing import Any

from ads.client import ClientError, Connection


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    """`n` bytes from a plain socket, or None when the peer closes first."""
    data = bytearray()
    while len(data) < n:
        got = sock.recv(n - len(data))
        if not got:
            return None
        data += got
    return bytes(data)


class RawConnection:
    def __init__(self, bootstrap: str, timeout: float = 10.0,
                 source_host: str | None = None) -> None:
        self.conn = Connection.connect(bootstrap, client_id="raw-test", timeout_s=timeout,
                                       source_host=source_host)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.conn.send_frame(data)

    def recv_frame(self) -> bytes | None:
        """Reads one response frame; None when the broker closed the connection."""
        try:
            return bytes(self.conn.receive_frame())
        except ClientError as exc:
            if exc.closed:
                return None
            raise

    def request(self, api_key: int, version: int, body: Any) -> Any:
        return self.conn.request(api_key, version, body)

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF) within `timeout`."""
        if self.conn.closed:
            return True
        sock = self.conn.sock
        sock.settimeout(timeout)
        try:
            data = sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""
