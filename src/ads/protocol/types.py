"""Primitive types of the Kafka wire protocol: a `Reader` and a `Writer`.

Byte layout (all integers big-endian, as in Kafka's protocol guide):

    int8 / int16 / int32 / int64     1 / 2 / 4 / 8 bytes, two's complement
    uint16 / uint32                  2 / 4 bytes, unsigned
    float64                          8 bytes, IEEE 754 double
    bool                             1 byte; 0 is false, anything else true
    uuid                             16 bytes; decoded as `uuid.UUID`, all-zero = "no id"
    unsigned varint                  7 bits a byte, low group first, high bit = "more";
                                     at most 5 bytes (32 bits); varlong at most 10
    varint / varlong                 zigzag ((n << 1) ^ (n >> 31|63)) then unsigned varint
    string                           int16 length N, then N bytes UTF-8; nullable: N = -1
    compact string                   unsigned varint N+1, then N bytes; nullable: 0 = null
    bytes                            int32 length N, then N bytes; nullable: N = -1
    compact bytes                    unsigned varint N+1, then N bytes; nullable: 0 = null
    array                            int32 count, then the elements; nullable: -1
    compact array                    unsigned varint count+1, then elements; nullable: 0
    tagged fields                    unsigned varint count, then per field: unsigned varint
                                     tag, unsigned varint size, size bytes (tags ascending)

Decoded strings are `str`; decoded bytes are `memoryview` slices of the input (no copy), so
a decoded value keeps the input buffer alive.

Crash recovery: nothing here persists anything. Decoding is all-or-nothing: any malformed
input (truncation, a negative length other than the null marker, a count larger than the
bytes left, invalid UTF-8, an over-long varint) raises `DecodeError` and no partial value
escapes; the reader's position is then unspecified.
"""

from __future__ import annotations

import struct
from collections.abc import Sized
from typing import Any, Literal, overload
from uuid import UUID

from ads.protocol.errors import DecodeError

ZERO_UUID = UUID(int=0)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

NULL_INT16 = b"\xff\xff"
NULL_INT32 = b"\xff\xff\xff\xff"

BytesLike = bytes | bytearray | memoryview


def truncated(what: str = "value") -> DecodeError:
    return DecodeError(f"truncated input while reading {what}")


def read_uvarint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 32 bits at `pos`; returns (value, next position)."""
    end = len(buf)
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise truncated("unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFF:
                raise DecodeError("unsigned varint exceeds 32 bits")
            return value, pos
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


def read_uvarlong(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 64 bits at `pos`; returns (value, next position)."""
    end = len(buf)
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise truncated("unsigned varlong")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFFFFFFFFFF:
                raise DecodeError("unsigned varlong exceeds 64 bits")
            return value, pos
        shift += 7
        if shift > 63:
            raise DecodeError("unsigned varlong longer than 10 bytes")


def read_varint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def read_varlong(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    n, pos = read_uvarlong(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def uvarint(value: int) -> bytes:
    """Encoding of an unsigned varint (also used for varlongs; no width check)."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ValueError(f"varint out of range: {value}")
    return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong(value: int) -> bytes:
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong out of range: {value}")
    return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def skip_tagged_fields(buf: memoryview | bytes, pos: int) -> int:
    """Position after the tagged-field section at `pos` (its fields are not interpreted)."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    if count > end - pos:
        raise DecodeError(f"{count} tagged fields exceed the {end - pos} bytes left")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > end:
            raise truncated("tagged field")
    return pos


def write_tagged_fields(buf: bytearray, fields: list[tuple[int, BytesLike]]) -> None:
    """Append a tagged-field section; `fields` must already be in ascending tag order."""
    buf += uvarint(len(fields))
    for tag, data in fields:
        buf += uvarint(tag)
        buf += uvarint(len(data))
        buf += data


class Writer:
    """Output buffer of the encoders.

    With `chunked=True`, a records value that is not bytes-like (a file region: any object
    with `__len__`) is kept as its own chunk instead of being copied; `chunks()` returns the
    byte runs and regions in wire order. Without it such a value raises TypeError.
    """

    __slots__ = ("buf", "_chunks")

    def __init__(self, *, chunked: bool = False) -> None:
        self.buf = bytearray()
        self._chunks: list[Any] | None = [] if chunked else None

    def __len__(self) -> int:
        if self._chunks is None:
            return len(self.buf)
        return sum(len(c) for c in self._chunks) + len(self.buf)

    def int8(self, value: int) -> None:
        self.buf += _I8.pack(value)

    def int16(self, value: int) -> None:
        self.buf += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.buf += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.buf += _I64.pack(value)

    def uint16(self, value: int) -> None:
        self.buf += _U16.pack(value)

    def uint32(self, value: int) -> None:
        self.buf += _U32.pack(value)

    def float64(self, value: float) -> None:
        self.buf += _F64.pack(value)

    def boolean(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def uuid(self, value: UUID) -> None:
        self.buf += value.bytes

    def uvarint(self, value: int) -> None:
        self.buf += uvarint(value)

    def varint(self, value: int) -> None:
        self.buf += varint(value)

    def varlong(self, value: int) -> None:
        self.buf += varlong(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.buf += NULL_INT16
            return
        data = value.encode("utf-8")
        self.buf += _I16.pack(len(data))
        self.buf += data

    def compact_string(self, value: str | None) -> None:
        if value is None:
            self.buf.append(0)
            return
        data = value.encode("utf-8")
        self.buf += uvarint(len(data) + 1)
        self.buf += data

    def bytes_(self, value: BytesLike | None) -> None:
        if value is None:
            self.buf += NULL_INT32
            return
        self.buf += _I32.pack(_nbytes(value))
        self.buf += value

    def compact_bytes(self, value: BytesLike | None) -> None:
        if value is None:
            self.buf.append(0)
            return
        self.buf += uvarint(_nbytes(value) + 1)
        self.buf += value

    def array_length(self, count: int | None) -> None:
        self.buf += NULL_INT32 if count is None else _I32.pack(count)

    def compact_array_length(self, count: int | None) -> None:
        self.buf += uvarint(0 if count is None else count + 1)

    def tagged_fields(self, fields: list[tuple[int, BytesLike]]) -> None:
        write_tagged_fields(self.buf, fields)

    def records(self, value: Any, flexible: bool) -> None:
        write_records(self, value, flexible)

    def region(self, value: Sized) -> None:
        """Place a non-bytes chunk (a file region) at the current position."""
        if self._chunks is None:
            raise TypeError(
                f"{type(value).__name__} is not bytes-like; use encode_chunks() to send it")
        if self.buf:
            self._chunks.append(self.buf)
            self.buf = bytearray()
        self._chunks.append(value)

    def getvalue(self) -> bytes:
        if self._chunks:
            raise TypeError("output holds file regions; use chunks()")
        return bytes(self.buf)

    def chunks(self) -> list[Any]:
        """Byte runs (bytearray) and regions in wire order; adjacent bytes are joined."""
        out = list(self._chunks or ())
        if self.buf or not out:
            out.append(self.buf)
        return out


def _nbytes(value: BytesLike) -> int:
    return value.nbytes if isinstance(value, memoryview) else len(value)


def write_records(w: Writer, value: Any, flexible: bool) -> None:
    """A records field: nullable bytes whose value may also be a file region."""
    buf = w.buf
    if value is None:
        if flexible:
            buf.append(0)
        else:
            buf += NULL_INT32
        return
    if isinstance(value, (bytes, bytearray, memoryview)):
        n = _nbytes(value)
        buf += uvarint(n + 1) if flexible else _I32.pack(n)
        buf += value
        return
    n = len(value)
    buf += uvarint(n + 1) if flexible else _I32.pack(n)
    w.region(value)


class Reader:
    """Cursor over a bytes-like input; every read checks bounds and raises DecodeError."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data: BytesLike, pos: int = 0) -> None:
        self.buf = data if isinstance(data, memoryview) else memoryview(data)
        if self.buf.format != "B" or self.buf.ndim != 1:
            self.buf = self.buf.cast("B")
        self.pos = pos
        self.end = len(self.buf)

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, what: str) -> memoryview:
        pos = self.pos
        end = pos + n
        if end > self.end:
            raise truncated(what)
        self.pos = end
        return self.buf[pos:end]

    def _fixed(self, s: struct.Struct, what: str) -> Any:
        pos = self.pos
        if pos + s.size > self.end:
            raise truncated(what)
        self.pos = pos + s.size
        return s.unpack_from(self.buf, pos)[0]

    def int8(self) -> int:
        return int(self._fixed(_I8, "int8"))

    def int16(self) -> int:
        return int(self._fixed(_I16, "int16"))

    def int32(self) -> int:
        return int(self._fixed(_I32, "int32"))

    def int64(self) -> int:
        return int(self._fixed(_I64, "int64"))

    def uint16(self) -> int:
        return int(self._fixed(_U16, "uint16"))

    def uint32(self) -> int:
        return int(self._fixed(_U32, "uint32"))

    def float64(self) -> float:
        return float(self._fixed(_F64, "float64"))

    def boolean(self) -> bool:
        return self._take(1, "bool")[0] != 0

    def uuid(self) -> UUID:
        return UUID(bytes=bytes(self._take(16, "uuid")))

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos)
        return value

    def uvarlong(self) -> int:
        value, self.pos = read_uvarlong(self.buf, self.pos)
        return value

    def varint(self) -> int:
        value, self.pos = read_varint(self.buf, self.pos)
        return value

    def varlong(self) -> int:
        value, self.pos = read_varlong(self.buf, self.pos)
        return value

    @overload
    def _length(self, compact: bool, wide: bool, nullable: Literal[False], what: str) -> int: ...
    @overload
    def _length(self, compact: bool, wide: bool, nullable: bool, what: str) -> int | None: ...

    def _length(self, compact: bool, wide: bool, nullable: bool, what: str) -> int | None:
        if compact:
            n = self.uvarint() - 1
        elif wide:
            n = self.int32()
        else:
            n = self.int16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError(f"invalid {what} length {n}")
        return n

    @overload
    def _text(self, n: int) -> str: ...
    @overload
    def _text(self, n: int | None) -> str | None: ...

    def _text(self, n: int | None) -> str | None:
        if n is None:
            return None
        try:
            return str(self._take(n, "string"), "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"string is not valid UTF-8: {exc}") from None

    def string(self) -> str:
        return self._text(self._length(False, False, False, "string"))

    def nullable_string(self) -> str | None:
        return self._text(self._length(False, False, True, "string"))

    def compact_string(self) -> str:
        return self._text(self._length(True, False, False, "string"))

    def compact_nullable_string(self) -> str | None:
        return self._text(self._length(True, False, True, "string"))

    @overload
    def _blob(self, n: int) -> memoryview: ...
    @overload
    def _blob(self, n: int | None) -> memoryview | None: ...

    def _blob(self, n: int | None) -> memoryview | None:
        return None if n is None else self._take(n, "bytes")

    def bytes_(self) -> memoryview:
        return self._blob(self._length(False, True, False, "bytes"))

    def nullable_bytes(self) -> memoryview | None:
        return self._blob(self._length(False, True, True, "bytes"))

    def compact_bytes(self) -> memoryview:
        return self._blob(self._length(True, False, False, "bytes"))

    def compact_nullable_bytes(self) -> memoryview | None:
        return self._blob(self._length(True, False, True, "bytes"))

    def array_length(self, *, compact: bool, nullable: bool, min_element_size: int = 1
                     ) -> int | None:
        """Element count of an array, checked against the bytes left before any allocation."""
        n = self._length(compact, True, nullable, "array")
        if n is not None and n * max(min_element_size, 1) > self.end - self.pos:
            raise DecodeError(f"array of {n} elements exceeds the {self.end - self.pos} "
                              "bytes left")
        return n

    def tagged_fields(self) -> dict[int, memoryview]:
        """The raw tagged fields of a section, by tag."""
        count = self.uvarint()
        if count > self.end - self.pos:
            raise DecodeError(f"{count} tagged fields exceed the bytes left")
        fields: dict[int, memoryview] = {}
        for _ in range(count):
            tag = self.uvarint()
            fields[tag] = self._take(self.uvarint(), "tagged field")
        return fields

    def skip_tagged_fields(self) -> None:
        self.tagged_fields()

