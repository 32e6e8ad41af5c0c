"""A minimal raw Kafka client over a blocking socket, for tests that must send exact bytes."""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from ads.protocol import codec

_correlation = itertools.count(1)


class RawConnection:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes | None:
        """Reads one response frame; None when the broker closed the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        corr = next(_correlation)
        self.send_raw(codec.encode_request(api_key, version, corr, "raw-test", body))
        frame = self.recv_frame()
        assert frame is not None, "broker closed the connection"
        got_corr, response = codec.decode_response(api_key, version, frame)
        assert got_corr == corr
        return response

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""
