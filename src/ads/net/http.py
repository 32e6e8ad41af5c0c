"""A small HTTP/1.1 server on the broker's event loop, for its operations endpoints.

The broker serves `/metrics`, `/healthz`, `/readyz` and its web console on
`http.listener` (docs/operations.md). The server runs on the broker's own event loop rather
than in a thread of its own: what it reports (partitions, purgatories, groups) is owned by
that loop and not thread-safe, so reading it from the loop is the only race-free way short
of copying it on every change, and a scrape then sees one consistent instant. Its cost to
the Kafka listener is the time of one handler call, bounded by what a page or a scrape
computes (milliseconds for thousands of partitions).

What it accepts, deliberately little: GET and HEAD, a request head of at most
`MAX_HEAD_BYTES` arriving within `HEAD_TIMEOUT_S`, no request body except on POST, whose
body is an HTML form (`application/x-www-form-urlencoded`, at most `MAX_FORM_BYTES`, within
the same time), one request per connection (`Connection: close`). At most
`max_connections` connections are open at once; one more is answered 503 and closed, so a
flood of HTTP clients never takes sockets or time from Kafka clients. Bad requests get
their 4xx status and a closed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from urllib.parse import parse_qsl, unquote, urlsplit

log = logging.getLogger("ads.net.http")

MAX_HEAD_BYTES = 16 << 10
MAX_FORM_BYTES = 4 << 10
FORM_TYPE = "application/x-www-form-urlencoded"
HEAD_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str  # percent-decoded, without the query
    query: Mapping[str, str]
    headers: Mapping[str, str]  # names in lower case
    form: Mapping[str, str] = field(default_factory=dict)  # a POST's fields
    body_length: int = 0  # bytes of form the head announces, read after it


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = field(default=())


HttpHandler = Callable[[HttpRequest], "HttpResponse | Awaitable[HttpResponse]"]


def text_response(status: int, text: str) -> HttpResponse:
    return HttpResponse(status, text.encode())


def parse_head(head: bytes) -> HttpRequest | HttpResponse:
    """The request of a head (request line and headers, CRLF-terminated), or the error
    response it gets."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError:
        return text_response(HTTPStatus.BAD_REQUEST, "malformed request line\n")
    if not version.startswith("HTTP/1."):
        return text_response(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/1.x only\n")
    headers = _headers(lines[1:])
    if headers is None:
        return text_response(HTTPStatus.BAD_REQUEST, "malformed header\n")
    if method not in ("GET", "HEAD", "POST"):
        return HttpResponse(HTTPStatus.METHOD_NOT_ALLOWED, b"GET, HEAD and POST only\n",
                            headers=(("Allow", "GET, HEAD, POST"),))
    if "transfer-encoding" in headers:
        return text_response(HTTPStatus.BAD_REQUEST, "no chunked request body is accepted\n")
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit():
        return text_response(HTTPStatus.BAD_REQUEST, "malformed content-length\n")
    length = int(length_text)
    if length and method != "POST":
        return text_response(HTTPStatus.BAD_REQUEST, "no request body is accepted\n")
    if length > MAX_FORM_BYTES:
        return text_response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large\n")
    if length and headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        return text_response(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"POST takes {FORM_TYPE}\n")
    parts = urlsplit(target)
    if not parts.path.startswith("/"):
        return text_response(HTTPStatus.BAD_REQUEST, "the target must be a path\n")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return HttpRequest(method, unquote(parts.path), query, headers, body_length=length)


def _headers(lines: list[str]) -> dict[str, str] | None:
    """Header lines by lower-case name, or None when one is malformed."""
    headers: dict[str, str] = {}
    for line in lines:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    return headers


def encode_response(response: HttpResponse, head_only: bool) -> bytes:
    status = HTTPStatus(response.status)
    lines = [f"HTTP/1.1 {status.value} {status.phrase}",
             f"Content-Type: {response.content_type}",
             f"Content-Length: {len(response.body)}",
             "Connection: close",
             "Cache-Control: no-store",
             "X-Content-Type-Options: nosniff"]
    lines.extend(f"{name}: {value}" for name, value in response.headers)
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


class HttpListener:
    """Serves `handler` on host:port; see the module docstring for what it accepts."""

    def __init__(self, handler: HttpHandler, host: str, port: int,
                 max_connections: int = 64) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._max_connections = max_connections
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connection_count = 0

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._serve, self._host, self._port, limit=MAX_HEAD_BYTES, reuse_address=True)
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connection_count += 1
        try:
            if self.connection_count > self._max_connections:
                await self._send(writer, text_response(
                    HTTPStatus.SERVICE_UNAVAILABLE, "too many HTTP connections\n"), False)
                return
            response, head_only = await self._answer(reader, writer)
            await self._send(writer, response, head_only)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connection_count -= 1
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> tuple[HttpResponse, bool]:
        peer = writer.get_extra_info("peername")
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            return text_response(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                                 "request head too large\n"), False
        except TimeoutError:
            return text_response(HTTPStatus.REQUEST_TIMEOUT, "request head too slow\n"), False
        request = parse_head(head[:-4])
        if isinstance(request, HttpResponse):
            log.info("HTTP request from %s refused: %d", peer, request.status)
            return request, False
        if request.body_length:
            try:
                body = await asyncio.wait_for(reader.readexactly(request.body_length),
                                              HEAD_TIMEOUT_S)
            except TimeoutError:
                return text_response(HTTPStatus.REQUEST_TIMEOUT, "request body too slow\n"), False
            try:
                form = dict(parse_qsl(body.decode("ascii"), keep_blank_values=True))
            except (UnicodeDecodeError, ValueError):
                log.info("HTTP request from %s refused: malformed form", peer)
                return text_response(HTTPStatus.BAD_REQUEST, "malformed form\n"), False
            request = replace(request, form=form)
        try:
            result = self._handler(request)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("HTTP %s %s from %s failed", request.method, request.path, peer)
            result = text_response(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error\n")
        return result, request.method == "HEAD"

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, response: HttpResponse,
                    head_only: bool) -> None:
        writer.write(encode_response(response, head_only))
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
