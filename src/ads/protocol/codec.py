"""Request and response framing: size prefix, headers, and the message body.

Byte layout of a frame (Kafka's protocol guide):

    int32 size                      bytes that follow (the frame excludes these 4 bytes)
    request header v0               int16 api_key, int16 api_version, int32 correlation_id
    request header v1               v0 + nullable string client_id (always int16 length,
                                    even in flexible versions, so any broker can read it)
    request header v2               v1 + tagged fields
    response header v0              int32 correlation_id
    response header v1              v0 + tagged fields
    body                            the message at api_version (see messages.py)

A request uses header v2 when its version is flexible, else v1 (v0 only for
ControlledShutdown v0). A response uses header v1 when flexible, else v0, except
ApiVersions responses, which always use v0 so a client that does not yet know the broker's
versions can read them. Versions above an API's newest are judged by its open-ended flexible
range, so a newer client's ApiVersions header still parses (KIP-511); the broker answers it
with `encode_api_versions_fallback`, in the v0 layout.

Crash recovery: nothing persists here. A frame decodes whole or raises a ProtocolError;
trailing bytes after a body are ignored (as Kafka's generated readers do), but nothing is
ever read past the end of the frame.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ads.protocol.base import Message
from ads.protocol.errors import (
    DecodeError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from ads.protocol.messages import API_KEYS, ApiKey
from ads.protocol.types import BytesLike, Writer, skip_tagged_fields, truncated

_HEADER_START = struct.Struct(">hhi")
_SIZE_AND_HEADER_START = struct.Struct(">ihhi")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_API_VERSION_RANGE = struct.Struct(">hhh")
_FALLBACK_HEAD = struct.Struct(">iihi")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _classes(api_key: int) -> tuple[str, type[Message], type[Message]]:
    entry = API_KEYS.get(api_key)
    if entry is None:
        raise UnknownApiKeyError(api_key, -1, -1)
    return entry


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    flexible = _classes(api_key)[1].FLEXIBLE_VERSIONS
    return 2 if flexible is not None and api_version >= flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    flexible = _classes(api_key)[2].FLEXIBLE_VERSIONS
    return 1 if flexible is not None and api_version >= flexible else 0


def _as_view(frame: BytesLike) -> memoryview:
    return frame if type(frame) is memoryview else memoryview(frame)


def _header_rest(buf: memoryview, header_version: int) -> tuple[str | None, int]:
    """Client id and the body offset of a request header whose first 8 bytes are read."""
    pos = 8
    client_id = None
    if header_version >= 1:
        if len(buf) < 10:
            raise truncated("client id")
        (n,) = _I16.unpack_from(buf, 8)
        pos = 10
        if n >= 0:
            end = pos + n
            if end > len(buf):
                raise truncated("client id")
            try:
                client_id = str(buf[pos:end], "utf-8")
            except UnicodeDecodeError as exc:
                raise DecodeError(f"client id is not valid UTF-8: {exc}") from exc
            pos = end
        elif n != -1:
            raise DecodeError(f"invalid client id length {n}")
    if header_version >= 2:
        pos = skip_tagged_fields(buf, pos)
    return client_id, pos


def decode_request_header(frame: BytesLike) -> tuple[RequestHeader, int]:
    """Parse a request header; returns it and the offset of the body within `frame`.

    The api key, version and correlation id are read first, so every error past them
    carries the correlation id. Raises UnknownApiKeyError for an API no schema defines,
    UnsupportedVersionError (with `.header` when the rest parsed) for a version outside
    the schema's range, DecodeError for a malformed header.
    """
    buf = _as_view(frame)
    if len(buf) < 8:
        raise truncated("request header")
    api_key, api_version, correlation_id = _HEADER_START.unpack_from(buf, 0)
    entry = API_KEYS.get(api_key)
    if entry is None:
        raise UnknownApiKeyError(api_key, api_version, correlation_id)
    lo, hi = entry[1].VALID_VERSIONS
    supported = lo <= api_version <= hi
    try:
        client_id, pos = _header_rest(buf, request_header_version(api_key, api_version))
    except DecodeError as exc:
        if not supported:
            raise UnsupportedVersionError(api_key, api_version, correlation_id) from exc
        exc.correlation_id = correlation_id
        raise
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if not supported:
        raise UnsupportedVersionError(api_key, api_version, correlation_id, header)
    return header, pos


def decode_request_body(api_key: int, api_version: int, frame: BytesLike,
                        offset: int) -> Message:
    """The request body that starts at `offset` of `frame` (after the header)."""
    request_class = _classes(api_key)[1]
    body, _ = request_class.decode_at(_as_view(frame), offset, api_version)
    return body


def decode_request(frame: BytesLike) -> tuple[RequestHeader, Message]:
    buf = _as_view(frame)
    header, offset = decode_request_header(buf)
    try:
        body = decode_request_body(header.api_key, header.api_version, buf, offset)
    except DecodeError as exc:
        exc.correlation_id = header.correlation_id
        raise
    return header, body


def _check_body(body: Message, expected: type[Message]) -> None:
    if type(body) is not expected:
        raise TypeError(f"expected a {expected.__name__}, got {type(body).__name__}")


def encode_request(api_key: int, api_version: int, correlation_id: int,
                   client_id: str | None, body: Message) -> bytes:
    """A whole request frame, size prefix included (client side: tests and tools)."""
    _check_body(body, _classes(api_key)[1])
    header_version = request_header_version(api_key, api_version)
    w = Writer()
    w.buf += _SIZE_AND_HEADER_START.pack(0, api_key, api_version, correlation_id)
    if header_version >= 1:
        w.string(client_id)
    if header_version >= 2:
        w.buf.append(0)
    body.encode_into(w, api_version)
    _I32.pack_into(w.buf, 0, len(w.buf) - 4)
    return bytes(w.buf)


def decode_response(api_key: int, api_version: int,
                    frame: BytesLike) -> tuple[int, Message]:
    """Correlation id and body of a response frame (without its size prefix)."""
    response_class = _classes(api_key)[2]
    buf = _as_view(frame)
    if len(buf) < 4:
        raise truncated("response header")
    (correlation_id,) = _I32.unpack_from(buf, 0)
    pos = 4
    if response_header_version(api_key, api_version) >= 1:
        pos = skip_tagged_fields(buf, pos)
    body, _ = response_class.decode_at(buf, pos, api_version)
    return correlation_id, body


def encode_response(api_key: int, api_version: int, correlation_id: int,
                    body: Message) -> list[Any]:
    """A response frame as chunks: byte runs (bytearray) and file regions, in wire order.

    The first chunk starts with the size prefix, computed from len() of every chunk.
    """
    _check_body(body, _classes(api_key)[2])
    w = Writer(chunked=True)
    w.buf += _SIZE_AND_CORRELATION.pack(0, correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        w.buf.append(0)
    body.encode_into(w, api_version)
    chunks = w.chunks()
    _I32.pack_into(chunks[0], 0, sum(len(c) for c in chunks) - 4)
    return chunks


def encode_api_versions_fallback(correlation_id: int, error_code: int,
                                 api_ranges: list[tuple[int, int, int]]) -> bytes:
    """ApiVersions response in the v0 layout, size prefix included (KIP-511).

    Sent when a client asks with a version the broker does not know: error_code (normally
    UNSUPPORTED_VERSION) and (api_key, min_version, max_version) ranges, so the client can
    retry with a version both sides support.
    """
    out = bytearray(_FALLBACK_HEAD.pack(0, correlation_id, error_code, len(api_ranges)))
    for api_key, min_version, max_version in api_ranges:
        out += _API_VERSION_RANGE.pack(api_key, min_version, max_version)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
