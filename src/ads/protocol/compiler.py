"""Compiles straight-line encoders and decoders for one struct class at one version.

Theory of operation: a generated class lists its fields in `_FIELDS`. Interpreting that
table for every request would cost a loop iteration, a few attribute lookups and a dispatch
per field; on the produce and fetch paths that is most of the time spent. Instead the first
use of (class, version) writes Python source specialised to that version, with

- consecutive fixed-width fields read or written by one precompiled `struct.Struct` call,
- nested structs and arrays of structs inlined as loops (no call per element),
- fields absent from the version reduced to a default assignment (decode) or to nothing,
- the tagged-field section reduced to one byte when no tagged field is set,

compiles it once and caches the function on the class. Identical sources for different
versions of a class share one code object.

Decoders work on a memoryview with local `pos`/`end`; they check every length and count
against the bytes left (so a hostile count cannot allocate) and let `struct.error`,
`IndexError` and `ValueError` (UTF-8) escape on truncated or invalid input; the caller
(`Struct.decode_at`) turns those into `DecodeError`. Encoders append to `Writer.buf`; a
records field goes through `write_records`, which may start a new chunk, so the local
buffer is re-read after it.

Wire layouts are those of `types.py`; nullable structs are one signed byte (-1 null,
1 present) followed by the struct, as Kafka writes them. Tagged fields are written only when
they differ from their default, in ascending tag order; unknown tags are skipped on decode.

Crash recovery: nothing persists here; a decode either returns a whole object or raises.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from ads.protocol.errors import DecodeError, UnsupportedVersionError
from ads.protocol.schema import MAX_VERSION, MISSING, Field, StructBase
from ads.protocol.types import (
    read_uvarint,
    skip_tagged_fields,
    truncated,
    uvarint,
    write_records,
    write_tagged_fields,
)

_FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
}
_NULL_MARKER = {False: b"\xff\xff", True: b"\xff\xff\xff\xff"}


class _PackByCount(dict[int, Callable[..., bytes]]):
    """`struct.Struct("><n><code>").pack` by n, for arrays of one fixed-width kind: a
    Metadata response packs three int32 arrays per partition, and building a format string
    for each (then finding its Struct in `struct`'s cache) was most of its encoding time.
    Counts up to `KEEP` are kept; longer arrays are rare and pay for their own Struct."""

    KEEP = 256

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code

    def __missing__(self, n: int) -> Callable[..., bytes]:
        pack = struct.Struct(f">{n}{self.code}").pack
        if n <= self.KEEP:
            self[n] = pack
        return pack

_PACKS = {code: _PackByCount(code) for code, _ in _FIXED.values()}

_SHARED: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _bad_length(n: int, what: str) -> DecodeError:
    return DecodeError(f"invalid length {n} for {what}")


def _too_many(n: int, left: int) -> DecodeError:
    return DecodeError(f"count {n} exceeds the {left} bytes left")


def _bad_tag(tag: int) -> DecodeError:
    return DecodeError(f"tagged field {tag} overruns its declared size")


_BASE_NS: dict[str, Any] = {
    "_new": object.__new__,
    "_ruv": read_uvarint,
    "_skip_tags": skip_tagged_fields,
    "_bad_length": _bad_length,
    "_too_many": _too_many,
    "_bad_tag": _bad_tag,
    "_truncated": truncated,
    "_UUID": uuid.UUID,
    "_unpack_from": struct.unpack_from,
    "_uvarint": uvarint,
    "_write_records": write_records,
    "_write_tags": write_tagged_fields,
}


def _within(rng: tuple[int, int], version: int) -> bool:
    return rng[0] <= version <= rng[1]


def check_version(cls: type[StructBase], version: int) -> None:
    valid = getattr(cls, "VALID_VERSIONS", (0, MAX_VERSION))
    if not _within(valid, version):
        api_key = getattr(cls, "API_KEY", None)
        raise UnsupportedVersionError(-1 if api_key is None else api_key, version)


class _Gen:
    """Source writer for one (class, version)."""

    def __init__(self, cls: type[StructBase], version: int) -> None:
        self.version = version
        self.flexible = cls._FLEXIBLE is not None and version >= cls._FLEXIBLE
        self.lines: list[str] = []
        self.depth = 1
        self.ns: dict[str, Any] = dict(_BASE_NS)
        self.names: dict[tuple[Any, ...], str] = {}
        self.counter = 0

    # -- plumbing

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def const(self, obj: Any, key: tuple[Any, ...] | None = None) -> str:
        k = key if key is not None else ("id", id(obj))
        name = self.names.get(k)
        if name is None:
            name = f"_k{len(self.names)}"
            self.names[k] = name
            self.ns[name] = obj
        return name

    def tmp(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def packer(self, codes: str) -> str:
        return self.const(struct.Struct(">" + codes).pack, ("pack", codes))

    def unpacker(self, codes: str) -> str:
        return self.const(struct.Struct(">" + codes).unpack_from, ("unpack", codes))

    def present(self, f: Field) -> bool:
        return _within(f.versions, self.version)

    def is_tagged(self, f: Field) -> bool:
        return self.flexible and f.tag is not None and _within(f.tagged, self.version)

    def nullable(self, f: Field) -> bool:
        return _within(f.nullable, self.version)

    def compact(self, f: Field) -> bool:
        return self.flexible and _within(f.flexible, self.version)

    def literal(self, value: Any) -> str:
        if value is None or isinstance(value, (bool, int, float, str, bytes)):
            return repr(value)
        return self.const(value)

    def default_expr(self, f: Field) -> str:
        if f.default is MISSING:
            return "[]" if f.kind == "array" else f"{self.const(f.struct)}()"
        return self.literal(f.default)

    def compile(self, src: str, name: str, cls: type[StructBase]) -> Callable[..., Any]:
        key = (cls, src, tuple(self.names))
        fn = _SHARED.get(key)
        if fn is None:
            code = compile(src, f"<ads.protocol {cls.__qualname__} v{self.version}>", "exec")
            # The source is ours, built from the committed schema tables; no input data
            # ever reaches it.
            exec(code, self.ns)  # noqa: S102
            fn = self.ns[name]
            _SHARED[key] = fn
        return fn

    def min_size(self, kind: str, cls: type[StructBase] | None, compact: bool) -> int:
        fixed = _FIXED.get(kind)
        if fixed:
            return fixed[1]
        if kind == "uuid":
            return 16
        if kind == "string":
            return 1 if compact else 2
        if kind in ("bytes", "records", "array"):
            return 1 if compact else 4
        assert cls is not None
        total = 1 if self.flexible else 0
        for f in cls._FIELDS:
            if self.present(f) and not self.is_tagged(f):
                if f.kind == "struct" and self.nullable(f):
                    total += 1
                else:
                    total += self.min_size(f.kind, f.struct, self.compact(f))
        return total

    # -- decoding

    def flush_unpack(self, run: list[tuple[str, tuple[str, int]]]) -> None:
        if not run:
            return
        codes = "".join(code for _, (code, _) in run)
        targets = ", ".join(t for t, _ in run) + ("," if len(run) == 1 else "")
        self.line(f"{targets} = {self.unpacker(codes)}(buf, pos)")
        self.line(f"pos += {sum(size for _, (_, size) in run)}")
        run.clear()

    def read_uvarint(self, name: str) -> None:
        self.line(f"{name} = buf[pos]")
        self.line("pos += 1")
        self.line(f"if {name} > 127:")
        self.line(f"    {name}, pos = _ruv(buf, pos - 1)")

    def read_length(self, name: str, compact: bool, wide: bool) -> None:
        """A signed length or count into `name`; -1 is the null marker."""
        if compact:
            self.read_uvarint(name)
            self.line(f"{name} -= 1")
        else:
            self.line(f"{name}, = {self.unpacker('i' if wide else 'h')}(buf, pos)")
            self.line(f"pos += {4 if wide else 2}")

    def dec_struct(self, cls: type[StructBase], var: str) -> None:
        self.line(f"{var} = _new({self.const(cls)})")
        run: list[tuple[str, tuple[str, int]]] = []
        tagged: list[Field] = []
        for f in cls._FIELDS:
            target = f"{var}.{f.name}"
            if not self.present(f) or self.is_tagged(f):
                self.line(f"{target} = {self.default_expr(f)}")
                if self.present(f):
                    tagged.append(f)
                continue
            fixed = _FIXED.get(f.kind)
            if fixed:
                run.append((target, fixed))
                continue
            self.flush_unpack(run)
            self.dec_value(f, f.kind, target, self.nullable(f), self.compact(f))
        self.flush_unpack(run)
        if self.flexible:
            self.dec_tags(var, tagged)

    def dec_value(self, f: Field, kind: str, target: str, nullable: bool, compact: bool) -> None:
        fixed = _FIXED.get(kind)
        if fixed:
            self.flush_unpack([(target, fixed)])
            return
        if kind == "uuid":
            self.line(f"{target} = _UUID(bytes=bytes(buf[pos:pos + 16]))")
            self.line("pos += 16")
            return
        if kind == "struct":
            assert f.struct is not None
            var = self.tmp("o")
            if nullable:
                marker = self.tmp("m")
                self.line(f"{marker} = buf[pos]")
                self.line("pos += 1")
                self.line(f"if {marker} > 127:")
                self.line(f"    {target} = None")
                self.line("else:")
                self.depth += 1
            self.dec_struct(f.struct, var)
            self.line(f"{target} = {var}")
            if nullable:
                self.depth -= 1
            return
        n = self.tmp("n")
        self.read_length(n, compact, wide=kind != "string")
        self.line(f"if {n} < 0:")
        self.depth += 1
        if nullable:
            self.line(f"if {n} != -1:")
            self.line(f"    raise _bad_length({n}, {f.name!r})")
            self.line(f"{target} = None")
        else:
            self.line(f"raise _bad_length({n}, {f.name!r})")
        self.depth -= 1
        self.line("else:")
        self.depth += 1
        if kind == "array":
            self.dec_array(f, target, n, compact)
        else:
            end = self.tmp("e")
            self.line(f"{end} = pos + {n}")
            self.line(f"if {end} > end:")
            self.line(f"    raise _truncated({f.name!r})")
            if kind == "string":
                self.line(f"{target} = str(buf[pos:{end}], 'utf-8')")
            else:
                self.line(f"{target} = buf[pos:{end}]")
            self.line(f"pos = {end}")
        self.depth -= 1

    def dec_array(self, f: Field, target: str, n: str, compact: bool) -> None:
        element = f.element
        assert element is not None
        size = self.min_size(element, f.struct, compact)
        limit = f"{n} * {size}" if size > 1 else n
        self.line(f"if {limit} > end - pos:")
        self.line(f"    raise _too_many({n}, end - pos)")
        fixed = _FIXED.get(element)
        if fixed:
            code, width = fixed
            self.line(f"{target} = list(_unpack_from('>%d{code}' % {n}, buf, pos))")
            self.line(f"pos += {n} * {width}")
            return
        items = self.tmp("l")
        self.line(f"{items} = []")
        self.line(f"for _ in range({n}):")
        self.depth += 1
        if element == "struct":
            assert f.struct is not None
            var = self.tmp("o")
            self.dec_struct(f.struct, var)
        else:
            var = self.tmp("x")
            self.dec_value(f, element, var, False, compact)
        self.line(f"{items}.append({var})")
        self.depth -= 1
        self.line(f"{target} = {items}")

    def dec_tags(self, var: str, tagged: list[Field]) -> None:
        if not tagged:
            self.line("if buf[pos] == 0:")
            self.line("    pos += 1")
            self.line("else:")
            self.line("    pos = _skip_tags(buf, pos)")
            return
        count = self.tmp("t")
        self.read_uvarint(count)
        self.line(f"if {count} > end - pos:")
        self.line(f"    raise _too_many({count}, end - pos)")
        self.line(f"for _ in range({count}):")
        self.depth += 1
        tag, size, tag_end = self.tmp("g"), self.tmp("z"), self.tmp("e")
        self.read_uvarint(tag)
        self.read_uvarint(size)
        self.line(f"{tag_end} = pos + {size}")
        self.line(f"if {tag_end} > end:")
        self.line("    raise _truncated('tagged field')")
        keyword = "if"
        for f in sorted(tagged, key=lambda f: f.tag or 0):
            self.line(f"{keyword} {tag} == {f.tag}:")
            self.depth += 1
            self.dec_value(f, f.kind, f"{var}.{f.name}", self.nullable(f), self.compact(f))
            self.line(f"if pos > {tag_end}:")
            self.line(f"    raise _bad_tag({f.tag})")
            self.depth -= 1
            keyword = "elif"
        self.line(f"pos = {tag_end}")
        self.depth -= 1

    # -- encoding

    def flush_pack(self, run: list[tuple[str, str]], buf: str) -> None:
        if not run:
            return
        codes = "".join(code for _, code in run)
        self.line(f"{buf} += {self.packer(codes)}({', '.join(e for e, _ in run)})")
        run.clear()

    def write_length(self, expr: str, compact: bool, wide: bool, buf: str) -> None:
        if compact:
            k = self.tmp("k")
            self.line(f"{k} = {expr} + 1")
            self.line(f"if {k} < 128:")
            self.line(f"    {buf}.append({k})")
            self.line("else:")
            self.line(f"    {buf} += _uvarint({k})")
        else:
            self.line(f"{buf} += {self.packer('i' if wide else 'h')}({expr})")

    def enc_struct(self, cls: type[StructBase], var: str, buf: str) -> None:
        run: list[tuple[str, str]] = []
        tagged: list[Field] = []
        for f in cls._FIELDS:
            if not self.present(f):
                continue
            if self.is_tagged(f):
                tagged.append(f)
                continue
            fixed = _FIXED.get(f.kind)
            if fixed:
                run.append((f"{var}.{f.name}", fixed[0]))
                continue
            self.flush_pack(run, buf)
            self.enc_value(f, f.kind, f"{var}.{f.name}", self.nullable(f), self.compact(f), buf)
        self.flush_pack(run, buf)
        if self.flexible:
            self.enc_tags(var, tagged, buf)

    def enc_value(self, f: Field, kind: str, expr: str, nullable: bool, compact: bool,
                  buf: str) -> None:
        fixed = _FIXED.get(kind)
        if fixed:
            self.line(f"{buf} += {self.packer(fixed[0])}({expr})")
            return
        v = self.tmp("v")
        self.line(f"{v} = {expr}")
        if kind == "uuid":
            self.line(f"{buf} += {v}.bytes")
            return
        if kind == "records":
            assert buf == "b", "records fields are never tagged"
            self.line(f"_write_records(w, {v}, {compact})")
            self.line("b = w.buf")
            return
        if nullable:
            self.line(f"if {v} is None:")
            if kind == "struct" or compact:
                self.line(f"    {buf}.append({255 if kind == 'struct' else 0})")
            else:
                self.line(f"    {buf} += {_NULL_MARKER[kind != 'string']!r}")
            self.line("else:")
            self.depth += 1
        if kind == "struct":
            assert f.struct is not None
            if nullable:
                self.line(f"{buf}.append(1)")
            self.enc_struct(f.struct, v, buf)
        elif kind == "string":
            data = self.tmp("d")
            self.line(f"{data} = {v}.encode('utf-8')")
            self.write_length(f"len({data})", compact, False, buf)
            self.line(f"{buf} += {data}")
        elif kind == "bytes":
            self.write_length(f"len({v})", compact, True, buf)
            self.line(f"{buf} += {v}")
        else:
            self.enc_array(f, v, compact, buf)
        if nullable:
            self.depth -= 1

    def enc_array(self, f: Field, v: str, compact: bool, buf: str) -> None:
        element = f.element
        assert element is not None
        self.write_length(f"len({v})", compact, True, buf)
        fixed = _FIXED.get(element)
        if fixed:
            packs = self.const(_PACKS[fixed[0]], ("packs", fixed[0]))
            self.line(f"if {v}:")
            self.line(f"    {buf} += {packs}[len({v})](*{v})")
            return
        item = self.tmp("x")
        self.line(f"for {item} in {v}:")
        self.depth += 1
        if element == "struct":
            assert f.struct is not None
            self.enc_struct(f.struct, item, buf)
        else:
            self.enc_value(f, element, item, False, compact, buf)
        self.depth -= 1

    def enc_tags(self, var: str, tagged: list[Field], buf: str) -> None:
        if not tagged:
            self.line(f"{buf}.append(0)")
            return
        fields = self.tmp("tg")
        self.line(f"{fields} = []")
        for f in sorted(tagged, key=lambda f: f.tag or 0):
            v = self.tmp("v")
            self.line(f"{v} = {var}.{f.name}")
            self.line(f"if {self.non_default(f, v)}:")
            self.depth += 1
            sub = self.tmp("s")
            self.line(f"{sub} = bytearray()")
            self.enc_value(f, f.kind, v, self.nullable(f), self.compact(f), sub)
            self.line(f"{fields}.append(({f.tag}, {sub}))")
            self.depth -= 1
        self.line(f"if {fields}:")
        self.line(f"    _write_tags({buf}, {fields})")
        self.line("else:")
        self.line(f"    {buf}.append(0)")

    def non_default(self, f: Field, expr: str) -> str:
        """An expression that is true when a tagged field differs from its default."""
        if f.default is None:
            return f"{expr} is not None"
        if f.kind == "struct":
            assert f.struct is not None
            inner = [self.non_default(sf, f"{expr}.{sf.name}") for sf in f.struct._FIELDS]
            return f"({expr} is not None and ({' or '.join(inner) or 'False'}))"
        if f.kind in ("array", "bytes"):
            return f"({expr} is None or len({expr}) != 0)"
        return f"{expr} != {self.literal(f.default)}"


def _source(gen: _Gen, cls: type[StructBase], decoder: bool) -> str:
    if decoder:
        gen.dec_struct(cls, "o")
        return ("def _decode(buf, pos):\n    end = len(buf)\n" + "\n".join(gen.lines)
                + "\n    return o, pos\n")
    gen.enc_struct(cls, "o", "b")
    return "def _encode(o, w):\n    b = w.buf\n" + "\n".join(gen.lines) + "\n"


def build_encoder(cls: type[StructBase], version: int) -> Callable[[Any, Any], None]:
    """Compile (or fetch) the encoder of `cls` at `version` and cache it on the class."""
    check_version(cls, version)
    gen = _Gen(cls, version)
    fn = gen.compile(_source(gen, cls, False), "_encode", cls)
    cls._ENC[version] = fn
    return fn


def build_decoder(cls: type[StructBase], version: int) -> Callable[[memoryview, int], Any]:
    """Compile (or fetch) the decoder of `cls` at `version` and cache it on the class."""
    check_version(cls, version)
    gen = _Gen(cls, version)
    fn = gen.compile(_source(gen, cls, True), "_decode", cls)
    cls._DEC[version] = fn
    return fn


def source_of(cls: type[StructBase], version: int, *, decoder: bool) -> str:
    """The generated source of a decoder or encoder, for reading and debugging."""
    check_version(cls, version)
    return _source(_Gen(cls, version), cls, decoder)
