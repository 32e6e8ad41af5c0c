"""Base classes of the generated message types.

Every generated struct class (messages and their nested structs) describes its fields in
`_FIELDS`, a tuple of `Field` in wire order. Encoding and decoding are not interpreted from
that table at run time: the first use of a (class, version) pair compiles straight-line
functions for it (see `compiler.py`), cached on the class; later calls cost one dict lookup.

Instances are plain mutable objects with `__slots__`: handlers build responses field by field.
Equality compares every field; `records` and `bytes` values compare by content.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, Self

from ads.protocol.compiler import build_decoder, build_encoder
from ads.protocol.errors import DecodeError
from ads.protocol.schema import Decoder, Encoder, StructBase
from ads.protocol.types import BytesLike, Reader, Writer

# Exceptions that a compiled decoder lets escape on malformed input, turned into DecodeError
# at the boundary so that the straight-line code needs no checks of its own for them.
_MALFORMED = (struct.error, IndexError, ValueError)


__all__ = ["Decoder", "Encoder", "Message", "Struct"]


class Struct(StructBase):
    """A struct of a message: the generated classes derive from it."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = []
        for name in self.__slots__:
            value = getattr(self, name)
            if isinstance(value, memoryview):
                text = f"<{value.nbytes} bytes>"
            else:
                text = repr(value)
            parts.append(f"{name}={text}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    def encode_into(self, writer: Writer, version: int) -> None:
        fn = type(self)._ENC.get(version) or build_encoder(type(self), version)
        fn(self, writer)

    def encode(self, version: int) -> bytes:
        """The encoding at `version`; TypeError if a records field holds a file region."""
        writer = Writer()
        self.encode_into(writer, version)
        return bytes(writer.buf)

    def encode_chunks(self, version: int) -> list[Any]:
        """The encoding as byte runs and file regions (from records fields), in wire order."""
        writer = Writer(chunked=True)
        self.encode_into(writer, version)
        return writer.chunks()

    @classmethod
    def decode(cls, data: BytesLike, version: int) -> Self:
        """Decode one value from the start of `data`; trailing bytes are ignored."""
        buf = data if type(data) is memoryview else memoryview(data)
        obj, _ = cls.decode_at(buf, 0, version)
        return obj

    @classmethod
    def decode_at(cls, buf: memoryview, pos: int, version: int) -> tuple[Self, int]:
        """Decode one value at `pos` of `buf`; returns it and the position after it."""
        fn = cls._DEC.get(version) or build_decoder(cls, version)
        try:
            return fn(buf, pos)
        except _MALFORMED as exc:
            raise DecodeError(f"malformed {cls.__qualname__} v{version}: {exc}") from exc

    @classmethod
    def decode_from(cls, reader: Reader, version: int) -> Self:
        obj, reader.pos = cls.decode_at(reader.buf, reader.pos, version)
        return obj


class Message(Struct):
    """A top-level schema: request, response, header or data (internal topic record)."""

    __slots__ = ()

    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    # First flexible version, or None when no version is flexible.
    FLEXIBLE_VERSIONS: ClassVar[int | None] = None
