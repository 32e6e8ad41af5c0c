"""The principal of a TLS client: its certificate's subject, as Kafka names it.

Kafka's principal for a client certificate is "User:" plus the subject distinguished name in
RFC 2253 form, as Java's `X500Principal.getName()` writes it, passed through
`ssl.principal.mapping.rules`. Here the subject is read from the certificate's DER bytes:

    Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }
    tbsCertificate ::= SEQUENCE { [0] version OPTIONAL, serialNumber INTEGER,
                                  signature AlgorithmIdentifier, issuer Name,
                                  validity SEQUENCE, subject Name, ... }
    Name ::= SEQUENCE OF RelativeDistinguishedName (SET OF { type OID, value ANY })

RFC 2253 writes the RDNs last first, joined by ",", the attributes of one RDN by "+".
Types with a keyword (CN, C, L, ST, O, OU, STREET, DC, UID, as Java) are written by it and
their string value escaped (`,+"\\<>;` and a leading "#" or space, a trailing space); any
other type as its dotted OID with "#" and the hex of the value's DER encoding
(e.g. emailAddress: `1.2.840.113549.1.9.1=#16...`).

`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper): comma-separated rules, each
`DEFAULT` (the name as it is) or `RULE:pattern/replacement/` with an optional `L` or `U`
after the last slash (lower or upper case the result); a backslash escapes the next
character, so a pattern may hold commas and `\\/`. The first rule whose pattern matches the
whole name gives the principal: every match of the pattern is replaced by the replacement,
where `$1`... name groups as in Java (a group number beyond the pattern's groups is kept as
text). No rule matching refuses the connection. Patterns are Python regular expressions,
which agree with Java's for what such rules use.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PrincipalMappingError", "SslPrincipalMapper", "subject_rfc2253"]

_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types a keyword's value may have, with how their bytes decode.
_STRING_TAGS = {0x0C: "utf-8", 0x13: "ascii", 0x16: "ascii", 0x14: "latin-1",
                0x1E: "utf-16-be", 0x1C: "utf-32-be"}
_SPECIAL = frozenset(',+"\\<>;')


class PrincipalMappingError(ValueError):
    """Bad rules (at start-up), or a name no rule maps (that connection is refused)."""


# -- the subject of a DER certificate ------------------------------------------------------
def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at `pos`."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER element")
    tag, first = data[pos], data[pos + 1]
    pos += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("DER element longer than its container")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in data[start:end]."""
    out = []
    while start < end:
        tag, content, stop = _tlv(data, start)
        out.append((tag, start, content, stop))
        start = stop
    return out


def _oid(raw: bytes) -> str:
    if not raw:
        raise ValueError("empty OID")
    arcs = [raw[0] // 40 if raw[0] < 80 else 2, raw[0] - 40 * min(raw[0] // 40, 2)]
    value = 0
    for byte in raw[1:]:
        value = value << 7 | byte & 0x7F
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    return ".".join(map(str, arcs))


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in _SPECIAL or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_rfc2253(der: bytes) -> str:
    """The subject of a DER X.509 certificate in RFC 2253 form. ValueError if it is not
    one."""
    _, start, end = _tlv(der, 0)
    tbs_tag, tbs_start, tbs_end = _tlv(der, start)
    if tbs_tag != 0x30:
        raise ValueError("not a certificate")
    fields = _children(der, tbs_start, tbs_end)
    if fields and fields[0][0] == 0xA0:  # explicit version
        fields = fields[1:]
    if len(fields) < 5:
        raise ValueError("certificate without a subject")
    _, _, name_start, name_end = fields[4]
    rdns = []
    for _, _, set_start, set_end in _children(der, name_start, name_end):
        parts = []
        for _, _, atv_start, atv_end in _children(der, set_start, set_end):
            (oid_tag, _, oid_start, oid_end), (tag, elem, v_start, v_end) = \
                _children(der, atv_start, atv_end)[:2]
            oid = _oid(der[oid_start:oid_end])
            keyword = _KEYWORDS.get(oid)
            if keyword is not None and tag in _STRING_TAGS:
                text = der[v_start:v_end].decode(_STRING_TAGS[tag], errors="replace")
                parts.append(f"{keyword}={_escape(text)}")
            else:
                parts.append(f"{oid}=#{der[elem:v_end].hex()}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


# -- ssl.principal.mapping.rules -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""
    text: str = "DEFAULT"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(_replacer(self.replacement, self.pattern.groups), name)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" \
            else result


def _replacer(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's replacement syntax: `$n` a group (as many digits as name an existing group),
    a backslash escapes the next character; a first digit naming no group is kept as text."""
    pieces: list[str | int] = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            pieces.append(replacement[i + 1])
            i += 2
            continue
        if ch == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            number = int(replacement[i + 1])
            if number <= groups:
                i += 2
                while (i < len(replacement) and replacement[i].isdigit()
                       and number * 10 + int(replacement[i]) <= groups):
                    number = number * 10 + int(replacement[i])
                    i += 1
                pieces.append(number)
                continue
        pieces.append(ch)
        i += 1
    return lambda m: "".join(p if isinstance(p, str) else (m.group(p) or "") for p in pieces)


def _until_slash(text: str, pos: int) -> tuple[str, int] | None:
    """The text up to the next unescaped "/" (kept as written) and the position after it."""
    start = pos
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
            continue
        if text[pos] == "/":
            return text[start:pos], pos + 1
        pos += 1
    return None


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules`: parsed once; `name` maps a distinguished name."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text, pos = rules.strip(), 0
        while pos < len(text):
            if text[pos] in ", \t":
                pos += 1
                continue
            rule, pos = self._parse_one(text, pos)
            self.rules.append(rule)
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos < len(text) and text[pos] != ",":
                raise PrincipalMappingError(f"Invalid rule in ssl.principal.mapping.rules "
                                            f"at {text[pos:]!r}")

    @staticmethod
    def _parse_one(text: str, pos: int) -> tuple[_Rule, int]:
        if text.startswith("DEFAULT", pos):
            return _Rule(None), pos + len("DEFAULT")
        if not text.startswith("RULE:", pos):
            raise PrincipalMappingError(f"Invalid rule in ssl.principal.mapping.rules: "
                                        f"{text[pos:]!r} (expected DEFAULT or RULE:...)")
        start = pos
        found = _until_slash(text, pos + len("RULE:"))
        replaced = _until_slash(text, found[1]) if found is not None else None
        if found is None or replaced is None:
            raise PrincipalMappingError(f"Invalid rule in ssl.principal.mapping.rules: "
                                        f"{text[start:]!r} (expected RULE:pattern/replacement/)")
        pattern, (replacement, pos) = found[0], replaced
        case = ""
        if pos < len(text) and text[pos] in "LU":
            case, pos = text[pos], pos + 1
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise PrincipalMappingError(f"Invalid pattern {pattern!r} in "
                                        f"ssl.principal.mapping.rules: {exc}") from exc
        return _Rule(compiled, replacement, case, text[start:pos]), pos

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise PrincipalMappingError(
            f"No rules apply to {distinguished_name}, rules "
            f"[{', '.join(r.text for r in self.rules)}]")

    def principal(self, der: bytes) -> str:
        """Kafka's principal of the client whose certificate is `der`."""
        return "User:" + self.name(subject_rfc2253(der))
