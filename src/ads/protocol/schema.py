"""The schema model shared by the generated messages and the compiler: `Field`, defaults and
`StructBase`, the class-level shape of a struct (its fields and compiled codecs) that the
compiler reads; `base.Struct` adds the methods. Imports go base -> compiler -> schema.

No byte format is defined here; see `types.py` for the encodings a field kind uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ads.protocol.types import Writer

MAX_VERSION = 0x7FFF
NO_VERSIONS = (1, 0)


class _Missing:
    """Default marker for list and struct fields: each instance gets a fresh empty value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct, as the schema defines it.

    kind: a primitive type name ("int8" ... "float64", "bool", "string", "bytes", "records",
    "uuid"), "struct" (then `struct` is the class) or "array" (then `element` is a primitive
    type name or "struct").
    Version ranges are inclusive (lo, hi); an empty range is (1, 0).
    default: the value of a new instance; MISSING means a fresh [] or a fresh default struct.
    flexible: the versions in which the field may use the compact encoding (Kafka lets a
    field opt out, e.g. the request header's client id).
    """

    name: str
    kind: str
    versions: tuple[int, int]
    nullable: tuple[int, int] = NO_VERSIONS
    tag: int | None = None
    tagged: tuple[int, int] = NO_VERSIONS
    default: Any = None
    struct: type[StructBase] | None = None
    element: str | None = None
    flexible: tuple[int, int] = (0, MAX_VERSION)


Encoder = Callable[[Any, Writer], None]
Decoder = Callable[[memoryview, int], tuple[Any, int]]


class StructBase:
    """What the compiler needs of a struct class: its fields, flexibility and codec caches."""

    __slots__ = ()

    _FIELDS: ClassVar[tuple[Field, ...]] = ()
    # First flexible version of the enclosing message (None: never flexible).
    _FLEXIBLE: ClassVar[int | None] = None
    _ENC: ClassVar[dict[int, Encoder]]
    _DEC: ClassVar[dict[int, Decoder]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._ENC = {}
        cls._DEC = {}
