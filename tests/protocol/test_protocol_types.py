"""Primitive types: varints, strings, bytes, arrays, tagged fields; bounds and edge cases."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ads.protocol.errors import DecodeError
from ads.protocol.types import (
    Reader,
    Writer,
    read_uvarint,
    read_varint,
    read_varlong,
    skip_tagged_fields,
    uvarint,
    varint,
    varlong,
)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**31 - 1, b"\xff\xff\xff\xff\x07"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_protocol_types_uvarint_known_encodings(value: int, encoded: bytes) -> None:
    assert uvarint(value) == encoded
    assert read_uvarint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_protocol_types_varint_zigzag(value: int, encoded: bytes) -> None:
    assert varint(value) == encoded
    assert read_varint(encoded, 0) == (value, len(encoded))


def test_protocol_types_varint_bounds() -> None:
    with pytest.raises(ValueError):
        varint(2**31)
    with pytest.raises(ValueError):
        varint(-(2**31) - 1)
    with pytest.raises(ValueError):
        varlong(2**63)
    with pytest.raises(ValueError):
        uvarint(-1)
    assert read_varlong(varlong(-(2**63)), 0)[0] == -(2**63)
    assert read_varlong(varlong(2**63 - 1), 0)[0] == 2**63 - 1
    assert len(varlong(-(2**63))) == 10


def test_protocol_types_uvarint_rejects_overlong_and_truncated() -> None:
    with pytest.raises(DecodeError):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)  # 6 bytes
    with pytest.raises(DecodeError):
        read_uvarint(b"\xff\xff\xff\xff\x1f", 0)  # 35 bits
    with pytest.raises(DecodeError):
        read_uvarint(b"\x80\x80", 0)
    with pytest.raises(DecodeError):
        read_uvarint(b"", 0)
    with pytest.raises(DecodeError):
        read_varlong(b"\xff" * 10 + b"\x01", 0)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_protocol_types_uvarint_roundtrip(value: int) -> None:
    data = uvarint(value)
    assert read_uvarint(data + b"\xff", 0) == (value, len(data))
    assert len(data) <= 5


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_protocol_types_varint_roundtrip(value: int) -> None:
    data = varint(value)
    assert read_varint(data, 0) == (value, len(data))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_protocol_types_varlong_roundtrip(value: int) -> None:
    data = varlong(value)
    assert read_varlong(data, 0) == (value, len(data))


@given(
    st.integers(-(2**7), 2**7 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**16 - 1),
    st.integers(0, 2**32 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.uuids(),
)
def test_protocol_types_fixed_roundtrip(i8: int, i16: int, i32: int, i64: int, u16: int,
                                        u32: int, f64: float, flag: bool,
                                        uid: uuid.UUID) -> None:
    w = Writer()
    w.int8(i8)
    w.int16(i16)
    w.int32(i32)
    w.int64(i64)
    w.uint16(u16)
    w.uint32(u32)
    w.float64(f64)
    w.boolean(flag)
    w.uuid(uid)
    data = w.getvalue()
    assert len(data) == 1 + 2 + 4 + 8 + 2 + 4 + 8 + 1 + 16
    r = Reader(data)
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uint16(), r.uint32(), r.float64(),
            r.boolean(), r.uuid()) == (i8, i16, i32, i64, u16, u32, f64, flag, uid)
    assert r.remaining() == 0
    with pytest.raises(DecodeError):
        r.int8()


@given(st.one_of(st.none(), st.text(max_size=300)))
def test_protocol_types_strings_roundtrip(text: str | None) -> None:
    w = Writer()
    w.string(text)
    w.compact_string(text)
    r = Reader(w.getvalue())
    assert r.nullable_string() == text
    assert r.compact_nullable_string() == text
    assert r.remaining() == 0


@given(st.one_of(st.none(), st.binary(max_size=300)))
def test_protocol_types_bytes_roundtrip(blob: bytes | None) -> None:
    w = Writer()
    w.bytes_(blob)
    w.compact_bytes(blob)
    data = w.getvalue()
    r = Reader(data)
    first = r.nullable_bytes()
    second = r.compact_nullable_bytes()
    assert first == blob and second == blob
    if blob is not None:
        assert isinstance(first, memoryview) and first.obj is r.buf.obj


def test_protocol_types_compact_nullable_encodings() -> None:
    w = Writer()
    w.compact_string(None)
    w.compact_string("")
    w.compact_string("ab")
    w.string(None)
    w.string("")
    w.compact_bytes(None)
    w.bytes_(None)
    w.compact_array_length(None)
    w.compact_array_length(0)
    w.array_length(None)
    assert w.getvalue() == (b"\x00" + b"\x01" + b"\x03ab" + b"\xff\xff" + b"\x00\x00"
                            + b"\x00" + b"\xff\xff\xff\xff" + b"\x00" + b"\x01"
                            + b"\xff\xff\xff\xff")
    r = Reader(w.getvalue())
    assert r.compact_nullable_string() is None
    assert r.compact_string() == ""
    assert r.compact_string() == "ab"
    assert r.nullable_string() is None
    assert r.string() == ""
    assert r.compact_nullable_bytes() is None
    assert r.nullable_bytes() is None
    assert r.array_length(compact=True, nullable=True) is None
    assert r.array_length(compact=True, nullable=False) == 0
    assert r.array_length(compact=False, nullable=True) is None


def test_protocol_types_null_where_not_nullable_is_rejected() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff").string()
    with pytest.raises(DecodeError):
        Reader(b"\x00").compact_string()
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff").bytes_()
    with pytest.raises(DecodeError):
        Reader(b"\xff\xfe").nullable_string()  # -2
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xfe").nullable_bytes()


def test_protocol_types_bad_utf8_and_truncation() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\x00\x02\xff\xfe").string()
    with pytest.raises(DecodeError):
        Reader(b"\x03\xc3").compact_string()
    with pytest.raises(DecodeError):
        Reader(b"\x00\x05abc").string()
    with pytest.raises(DecodeError):
        Reader(b"\x00\x00\x00\x09abc").bytes_()
    with pytest.raises(DecodeError):
        Reader(b"\x00\x00\x00").uuid()


def test_protocol_types_array_count_checked_before_allocation() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\x7f\xff\xff\xff" + b"\x00" * 8).array_length(compact=False, nullable=False)
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff\x0f").array_length(compact=True, nullable=False)
    r = Reader(b"\x00\x00\x00\x02" + b"\x00" * 8)
    with pytest.raises(DecodeError):
        r.array_length(compact=False, nullable=False, min_element_size=8)
    assert Reader(b"\x00\x00\x00\x02" + b"\x00" * 8).array_length(
        compact=False, nullable=False, min_element_size=4) == 2


def test_protocol_types_tagged_fields() -> None:
    w = Writer()
    w.tagged_fields([(0, b"\x01"), (5, b"abc"), (300, b"")])
    data = w.getvalue()
    assert data == b"\x03" + b"\x00\x01\x01" + b"\x05\x03abc" + b"\xac\x02\x00"
    assert Reader(data).tagged_fields() == {0: b"\x01", 5: b"abc", 300: b""}
    assert skip_tagged_fields(data + b"rest", 0) == len(data)
    with pytest.raises(DecodeError):
        skip_tagged_fields(data[:-2], 0)
    with pytest.raises(DecodeError):
        skip_tagged_fields(b"\x7f", 0)


def test_protocol_types_writer_regions() -> None:
    class Region:
        def __len__(self) -> int:
            return 10

    region = Region()
    plain = Writer()
    with pytest.raises(TypeError):
        plain.records(region, flexible=False)
    w = Writer(chunked=True)
    w.int32(1)
    w.records(region, flexible=True)
    w.records(b"xy", flexible=False)
    w.records(None, flexible=False)
    chunks = w.chunks()
    assert chunks == [b"\x00\x00\x00\x01\x0b", region, b"\x00\x00\x00\x02xy\xff\xff\xff\xff"]
    assert chunks[1] is region
    assert len(w) == 5 + 10 + 10
    with pytest.raises(TypeError):
        w.getvalue()
