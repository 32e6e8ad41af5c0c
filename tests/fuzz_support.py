"""Hostile request frames for the fuzz tests: valid requests of every API and version built
from the message schemas, and the ways an attacker (or a broken client) bends them.

`request_frames(api_key, version)` draws a valid request frame (without its size prefix) with
random field values; `hostile(frame)` bends one: truncation, byte flips, insertions, lengths
and counts replaced by huge, negative or overflowing values, unknown tagged fields, a bad
version. Everything is driven by hypothesis, so a failure shrinks to a small frame.

`FUZZ_EXAMPLES` (environment `ADS_FUZZ_EXAMPLES`) scales the number of examples: the normal
suite runs a fixed, derandomized handful; `tools/fuzz.sh` runs many more.
"""

from __future__ import annotations

import os
import struct
import uuid
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.schema import Field, StructBase

# Examples per property in the normal suite; `tools/fuzz.sh` raises it.
FUZZ_EXAMPLES = int(os.environ.get("ADS_FUZZ_EXAMPLES", "0")) or None
# A fixed seed in the suite, so CI sees the same frames every run; random when scaled up.
DERANDOMIZE = FUZZ_EXAMPLES is None


def fuzz_settings(default_examples: int, *, shrink: bool = True, share: int = 1) -> Any:
    """Hypothesis settings of a fuzz property: `default_examples` in the suite, reproducible.

    `shrink=False` where a failure cannot be replayed (a broker whose state moved on).
    `share`: a property run once per API version gets 1/share of `ADS_FUZZ_EXAMPLES`."""
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    scaled = max(FUZZ_EXAMPLES // share, default_examples) if FUZZ_EXAMPLES else None
    return settings(
        max_examples=scaled or default_examples, derandomize=DERANDOMIZE,
        database=None, deadline=None, print_blob=True, phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much])


REQUEST_APIS: list[tuple[int, type[m.Message]]] = sorted(
    (key, classes[1]) for key, classes in m.API_KEYS.items())
# Every (api key, version) a request schema defines: a superset of what the broker
# advertises, since a hostile client may send any of them.
REQUEST_VERSIONS: list[tuple[int, int]] = [
    (key, v) for key, cls in REQUEST_APIS
    for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)]

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}


def _within(rng: tuple[int, int], version: int) -> bool:
    return rng[0] <= version <= rng[1]


def _small_int(kind: str) -> st.SearchStrategy[int]:
    lo, hi = _INT_RANGES[kind]
    return st.one_of(st.integers(-2, 5).filter(lambda n: lo <= n <= hi),
                     st.integers(lo, hi))


def _value(f: Field, kind: str, version: int, nullable: bool) -> st.SearchStrategy[Any]:
    if kind in _INT_RANGES:
        strategy: st.SearchStrategy[Any] = _small_int(kind)
    elif kind == "float64":
        strategy = st.floats(allow_nan=False)
    elif kind == "bool":
        strategy = st.booleans()
    elif kind == "uuid":
        strategy = st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
    elif kind == "string":
        strategy = st.text(max_size=12)
    elif kind in ("bytes", "records"):
        strategy = st.binary(max_size=80)
    elif kind == "struct":
        assert f.struct is not None
        strategy = struct_values(f.struct, version)
    elif kind == "array":
        assert f.element is not None
        element = _value(f, f.element, version, False)
        strategy = st.lists(element, max_size=3)
    else:
        raise AssertionError(f"unknown field kind {kind}")
    return st.one_of(st.none(), strategy) if nullable else strategy


def struct_values(cls: type[StructBase], version: int) -> st.SearchStrategy[Any]:
    """Instances of `cls` with every field present at `version` drawn at random."""
    fields = [f for f in cls._FIELDS if _within(f.versions, version)]

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        obj = cls()
        for f in fields:
            nullable = _within(f.nullable, version)
            # A tagged field is written only when it differs from its default: drawing the
            # default half of the time keeps frames short.
            if f.tag is not None and draw(st.booleans()):
                continue
            setattr(obj, f.name, draw(_value(f, f.kind, version, nullable)))
        return obj

    return build()


@st.composite
def request_frames(draw: st.DrawFn, api_key: int, version: int) -> bytes:
    """A valid request frame (no size prefix) of `api_key` at `version`."""
    cls = m.API_KEYS[api_key][1]
    body = draw(struct_values(cls, version))
    client_id = draw(st.one_of(st.none(), st.text(max_size=8)))
    correlation_id = draw(st.integers(0, (1 << 31) - 1))
    return codec.encode_request(api_key, version, correlation_id, client_id, body)[4:]


@st.composite
def any_request_frame(draw: st.DrawFn,
                      versions: list[tuple[int, int]] | None = None) -> bytes:
    """A valid request of one of `versions` ((api key, version) pairs; default: all)."""
    api_key, version = draw(st.sampled_from(versions or REQUEST_VERSIONS))
    return draw(request_frames(api_key, version))


# Values that break lengths and counts: the null marker's neighbours, the int16/int32
# extremes, and sizes just past whatever fits.
_HOSTILE_I32 = [-(1 << 31), -2, -1, 0x7FFFFFFF, 0x7FFFFFFE, 1 << 30, 1 << 24, 65_535]
_HOSTILE_I16 = [-(1 << 15), -2, -1, 0x7FFF, 0x7FFE, 0x4000]
# Unsigned varints: 2^32 - 1 (compact count overflow), 2^31, a 5-byte maximum, an
# over-long 6-byte run, and a continuation run that never ends.
_HOSTILE_UVARINTS = [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08",
                     b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01",
                     b"\x80" * 12, b"\xff\xff\xff\x7f", b"\x00"]


@st.composite
def hostile(draw: st.DrawFn, frame: bytes) -> bytes:
    """`frame` bent in one to three hostile ways."""
    out = bytearray(frame)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from([
            "truncate", "flip", "insert", "i32", "i16", "uvarint", "tags", "version",
            "api_key", "utf8", "duplicate"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        _bend(draw, out, how, at)
    return bytes(out)


def _bend(draw: st.DrawFn, out: bytearray, how: str, at: int) -> None:
    """Bends `out` in place, the `how` way, at position `at`."""
    if how == "truncate":
        del out[at:]
    elif how == "flip" and out:
        out[at] = draw(st.integers(0, 255))
    elif how == "insert":
        out[at:at] = draw(st.binary(min_size=1, max_size=8))
    elif how == "i32":
        out[at:at + 4] = struct.pack(">i", draw(st.sampled_from(_HOSTILE_I32)))
    elif how == "i16":
        out[at:at + 2] = struct.pack(">h", draw(st.sampled_from(_HOSTILE_I16)))
    elif how == "uvarint":
        out[at:at + 1] = draw(st.sampled_from(_HOSTILE_UVARINTS))
    elif how == "tags":
        # An unknown tagged field (tag, size, bytes) where a tag section may start.
        tag = draw(st.sampled_from([b"\x01", b"\x7f", b"\xff\xff\x03", b"\x80\x01"]))
        size = draw(st.integers(0, 6))
        out[at:at + 1] = b"\x01" + tag + bytes([size]) + bytes(size)
    elif how == "version" and len(out) >= 4:
        out[2:4] = struct.pack(">h", draw(st.sampled_from([-1, 0, 99, 0x7FFF, -(1 << 15)])))
    elif how == "api_key" and len(out) >= 2:
        out[0:2] = struct.pack(">h", draw(st.sampled_from(
            [key for key, _ in REQUEST_APIS] + [-1, 999])))
    elif how == "utf8":
        out[at:at + 2] = draw(st.sampled_from([b"\xff\xfe", b"\xed\xa0", b"\xc3", b"\x80"]))
    elif how == "duplicate" and out:
        end = draw(st.integers(at, len(out)))
        out[at:at] = out[at:end] * draw(st.integers(1, 4))


def hostile_frames() -> st.SearchStrategy[bytes]:
    """Random bytes, or a valid request of any API and version bent by `hostile`."""
    return st.one_of(
        st.binary(max_size=200),
        any_request_frame().flatmap(hostile),
    )


def bomb_body(codec: int, inflated: int) -> bytes:
    """`inflated` zero bytes compressed with `codec` (gzip, lz4 or zstd), compressed a chunk
    at a time so the test never holds the inflated bytes. zstd's streaming frame declares no
    content size, so the reader cannot refuse it from the header."""
    import zlib  # noqa: PLC0415

    import cramjam  # noqa: PLC0415

    chunk = bytes(1 << 20)
    if codec == 1:
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [gz.compress(chunk) for _ in range(inflated >> 20)]
        return b"".join(parts) + gz.flush()
    if codec == 3:
        compressor: Any = cramjam.lz4.Compressor(level=1, content_checksum=False,
                                                 block_linked=False)
    elif codec == 4:
        compressor = cramjam.zstd.Compressor(level=1)
    else:
        raise ValueError(f"no bomb for codec {codec}")
    for _ in range(inflated >> 20):
        compressor.compress(chunk)
    return bytes(compressor.finish())


def bomb_batch(codec: int, inflated: int, timestamp: int = 1000) -> bytes:
    """A RecordBatch v2 with a valid CRC whose body inflates to `inflated` zero bytes."""
    from ads.records import batch as rb  # noqa: PLC0415
    from ads.records.crc import crc32c  # noqa: PLC0415

    out = bytearray(rb.build_batch([(b"k", b"v")], timestamp=timestamp))
    del out[rb.RECORDS_OFFSET:]
    out += bomb_body(codec, inflated)
    struct.pack_into(">i", out, rb.LENGTH_OFFSET, len(out) - rb.LOG_OVERHEAD)
    struct.pack_into(">h", out, rb.ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">I", out, rb.CRC_OFFSET, crc32c(memoryview(out)[rb.ATTRIBUTES_OFFSET:]))
    return bytes(out)
