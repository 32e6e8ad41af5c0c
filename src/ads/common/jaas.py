"""Kafka's JAAS configuration text: the `sasl.jaas.config` value and JAAS files.

A `sasl.jaas.config` value is one login module entry:

    <class> <flag> [<option>=<value>]* ;

for example `org.apache.kafka.common.security.plain.PlainLoginModule required
user_admin="admin-secret" user_alice="alice-secret";`. A JAAS file (what the JVM reads from
`java.security.auth.login.config`) holds named sections of such entries:

    KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule required
        user_admin="admin-secret";
    };

Values are bare words or double-quoted strings; inside quotes a backslash escapes the next
character (`\\"`, `\\\\`, and `\\n`/`\\t`/`\\r` as Java's tokenizer reads them). `//` and `/* */`
comments are ignored. Any other shape is a `JaasError` naming the position, so a broker
refuses a bad line at start-up instead of running with users it did not mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_PUNCTUATION = "=;{}"


class JaasError(ValueError):
    """The text is not valid JAAS configuration."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "string" or one of _PUNCTUATION
    text: str
    pos: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError(f"unterminated comment at position {i}")
            i = end + 2
        elif c in _PUNCTUATION:
            out.append(_Token(c, c, i))
            i += 1
        elif c == '"':
            value, end = _quoted(text, i)
            out.append(_Token("string", value, i))
            i = end
        else:
            end = _word_end(text, i)
            out.append(_Token("word", text[i:end], i))
            i = end
    return out


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The value of the quoted string opening at `start`, and the position after it."""
    i, n = start + 1, len(text)
    chars: list[str] = []
    while True:
        if i >= n:
            raise JaasError(f"unterminated quoted value at position {start}")
        c = text[i]
        if c == '"':
            return "".join(chars), i + 1
        if c == "\\":
            if i + 1 >= n:
                raise JaasError(f"unterminated quoted value at position {start}")
            nxt = text[i + 1]
            chars.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        chars.append(c)
        i += 1


def _word_end(text: str, start: int) -> int:
    """Where the bare word at `start` ends: at a space, punctuation, a quote or a comment."""
    i, n = start, len(text)
    while i < n and not text[i].isspace() and text[i] not in _PUNCTUATION + '"':
        if text.startswith("//", i) or text.startswith("/*", i):
            break
        i += 1
    return i


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._i = 0

    def peek(self) -> _Token | None:
        return self._tokens[self._i] if self._i < len(self._tokens) else None

    def take(self, what: str) -> _Token:
        tok = self.peek()
        if tok is None:
            raise JaasError(f"expected {what} but the text ended")
        self._i += 1
        return tok

    def expect(self, kind: str) -> None:
        tok = self.take(f"'{kind}'")
        if tok.kind != kind:
            raise JaasError(f"expected '{kind}' at position {tok.pos}, found {tok.text!r}")

    def module(self) -> LoginModule:
        name = self.take("a login module class name")
        if name.kind != "word":
            raise JaasError(f"expected a login module class name at position {name.pos}, "
                            f"found {name.text!r}")
        flag = self.take("a control flag")
        if flag.kind != "word" or flag.text.lower() not in FLAGS:
            raise JaasError(f"expected a control flag ({', '.join(FLAGS)}) after "
                            f"{name.text} at position {flag.pos}, found {flag.text!r}")
        options: dict[str, str] = {}
        while True:
            tok = self.take("';' ending the login module entry")
            if tok.kind == ";":
                return LoginModule(name.text, flag.text.lower(), options)
            if tok.kind != "word":
                raise JaasError(f"expected an option name or ';' at position {tok.pos}, "
                                f"found {tok.text!r}")
            self.expect("=")
            value = self.take(f"a value for option {tok.text}")
            if value.kind not in ("word", "string"):
                raise JaasError(f"expected a value for option {tok.text} at position "
                                f"{value.pos}, found {value.text!r}")
            options[tok.text] = value.text

    def at_end(self) -> bool:
        return self.peek() is None


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a `sasl.jaas.config` value (at least one)."""
    parser = _Parser(text)
    modules = []
    while not parser.at_end():
        modules.append(parser.module())
    if not modules:
        raise JaasError("no login module is configured")
    return modules


def parse_jaas_file(text: str) -> dict[str, list[LoginModule]]:
    """The sections of a JAAS file, by name."""
    parser = _Parser(text)
    sections: dict[str, list[LoginModule]] = {}
    while not parser.at_end():
        name = parser.take("a section name")
        if name.kind != "word":
            raise JaasError(f"expected a section name at position {name.pos}, "
                            f"found {name.text!r}")
        parser.expect("{")
        modules = []
        while (tok := parser.peek()) is not None and tok.kind != "}":
            modules.append(parser.module())
        parser.expect("}")
        parser.expect(";")
        if name.text in sections:
            raise JaasError(f"section {name.text} appears twice")
        sections[name.text] = modules
    return sections
