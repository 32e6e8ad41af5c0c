"""The pieces of the client commands that need no broker: --format templates, k=v parsing,
escapes and --command-config files."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE

from ads.cli.common import UsageError, parse_assignments, read_properties, unescape
from ads.cli.consume import DEFAULT_FORMAT, compile_format


class FakeMessage:
    """Stands in for confluent_kafka.Message, whose instances cannot be built directly."""

    def __init__(self, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]] | None = None,
                 timestamp: tuple[int, int] = (TIMESTAMP_CREATE_TIME, 1700000000123)) -> None:
        self._key, self._value, self._headers, self._ts = key, value, headers, timestamp

    def topic(self) -> str:
        return "orders"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return 41

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return self._ts


def render(fmt: str, msg: FakeMessage) -> str:
    return compile_format(fmt)(msg)  # type: ignore[arg-type]


def test_cli_format_default_is_value_and_newline() -> None:
    assert render(DEFAULT_FORMAT, FakeMessage(b"k", b"hello")) == "hello\n"


def test_cli_format_all_fields() -> None:
    msg = FakeMessage(b"k1", b"v1", [("a", b"1"), ("b", None)])
    out = render(r"%t|%p|%o|%k|%v|%s|%h|%T|%%|{x}\t\n", msg)
    assert out == "orders|2|41|k1|v1|v1|a=1,b=null|1700000000123|%|{x}\t\n"


def test_cli_format_null_and_invalid_utf8() -> None:
    msg = FakeMessage(None, b"ok\xffend", None, (TIMESTAMP_NOT_AVAILABLE, 0))
    assert render("%k %v [%h] %T", msg) == "null ok\ufffdend [] -1"
    assert render("%v", FakeMessage(b"", None)) == "null"
    assert render("[%k]", FakeMessage(b"", b"")) == "[]"


def test_cli_format_literal_only() -> None:
    assert render(r"x\\y", FakeMessage(None, None)) == "x\\y"


@pytest.mark.parametrize("fmt", ["%x", "abc%", "%v %Z"])
def test_cli_format_rejects_unknown_field(fmt: str) -> None:
    with pytest.raises(UsageError, match="--format"):
        compile_format(fmt)


def test_cli_format_assignments() -> None:
    assert parse_assignments(["a=1", "b=x=y", "c="], "--set") == {"a": "1", "b": "x=y", "c": ""}
    for bad in ["a", "=1", ""]:
        with pytest.raises(UsageError, match="KEY=VALUE"):
            parse_assignments([bad], "--set")


def test_cli_format_unescape() -> None:
    assert unescape(r"a\tb\nc\\d\q") == "a\tb\nc\\d\\q"
    assert unescape("\\") == "\\"


def test_cli_format_properties_file(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text("# comment\n! also a comment\n\nclient.id = cli\nlinger.ms: 5\n"
                 "sasl.password=a=b\n")
    assert read_properties(str(f)) == {"client.id": "cli", "linger.ms": "5",
                                       "sasl.password": "a=b"}
    # Java's rules: a blank separates key and value, continuations join, values are trimmed
    f.write_text("client.id cli  \nbootstrap.servers=a:1,\\\n  b:2\n")
    assert read_properties(str(f)) == {"client.id": "cli", "bootstrap.servers": "a:1,b:2"}
    f.write_text("a=1\nbad=\\u12\n")
    with pytest.raises(UsageError, match="client.properties:2"):
        read_properties(str(f))
    with pytest.raises(UsageError, match="cannot read"):
        read_properties(str(tmp_path / "missing.properties"))
