"""Java `.properties` text, as `java.util.Properties.load` reads it: the broker's
`server.properties` and the command line's `--command-config` files.

Rules (each has a test in tests/common/test_common_properties.py):

- Natural lines end at `\\n`, `\\r\\n` or `\\r`. Blanks (space, tab, form feed) at the start
  of a line are skipped; a line that is then empty is skipped.
- A line whose first non-blank character is `#` or `!` is a comment, even when it ends in
  a backslash. A continued line that starts with `#` is not a comment but value text.
- A line ending in an odd number of backslashes continues on the next line, whose leading
  blanks are dropped; a final backslash at the end of the text is dropped. An even number
  is that many halves of escaped backslashes and ends the line.
- The key runs to the first unescaped `=`, `:` or blank. Blanks after it are skipped, then
  one `=` or `:` if present, then blanks again; the rest of the line is the value, trailing
  blanks included. So `key=value`, `key: value`, `key value` and `key` (empty value) all
  work, and the value may contain `=` and `:`.
- In keys and values, `\\t`, `\\n`, `\\r`, `\\f` and `\\uXXXX` (exactly four hex digits) are
  the characters they name; a backslash before any other character stands for that
  character (`\\=`, `\\:`, `\\ `, `\\#`, `\\\\`). A malformed `\\u` escape raises
  `PropertiesError` with the line number.
- A key given twice keeps its last value.

Bytes are decoded as UTF-8, or as ISO-8859-1 (what Java's `Properties.load(InputStream)`
assumes) when they are not valid UTF-8.
"""

from __future__ import annotations

import re

__all__ = ["PropertiesError", "decode_properties", "parse_properties"]

_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


class PropertiesError(ValueError):
    """The text is not valid `.properties`; `line` is the 1-based line of the entry."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def decode_properties(data: bytes) -> str:
    """Text of a `.properties` file: UTF-8, else ISO-8859-1."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_properties(text: str | bytes) -> dict[str, str]:
    """The entries of `.properties` text (see the module docstring for the rules)."""
    if isinstance(text, bytes):
        text = decode_properties(text)
    out: dict[str, str] = {}
    lines = _NATURAL_LINES.split(text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_BLANKS)
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_entry(line)
        out[_unescape(key, i)] = _unescape(value, i)
    return out


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    escaped = False
    end = len(line)
    for pos, ch in enumerate(line):
        if not escaped and (ch in "=:" or ch in _BLANKS):
            end = pos
            break
        escaped = ch == "\\" and not escaped
    rest = line[end:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return line[:end], rest


def _unescape(s: str, line_no: int) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        i += 1
        if ch != "\\" or i >= len(s):
            out.append(ch)
            continue
        ch = s[i]
        i += 1
        if ch == "u":
            digits = s[i:i + 4]
            if len(digits) != 4 or not _HEX.issuperset(digits):
                raise PropertiesError(f"Malformed \\uxxxx escape near line {line_no}", line_no)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    return "".join(out)
