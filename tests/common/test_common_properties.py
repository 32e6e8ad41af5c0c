"""`ads.common.properties`: one test per rule of Java's `.properties` format."""

from __future__ import annotations

import pytest

from ads.common.properties import PropertiesError, decode_properties, parse_properties


def test_properties_separators_equals_colon_and_blank() -> None:
    assert parse_properties("a=1\nb: 2\nc 3\ne\t=\tx\nh=x=y:z\n") == {
        "a": "1", "b": "2", "c": "3", "e": "x", "h": "x=y:z"}


def test_properties_blanks_around_separator_and_trailing_blanks_kept() -> None:
    assert parse_properties("  d   =   spaced value  \n\fk\f:\fv") == {
        "d": "spaced value  ", "k": "v"}


def test_properties_key_without_value() -> None:
    assert parse_properties("f\ng=\nh :\n") == {"f": "", "g": "", "h": ""}


def test_properties_empty_key() -> None:
    assert parse_properties("=value") == {"": "value"}


def test_properties_comments_and_blank_lines() -> None:
    assert parse_properties("# a comment\n! another\n\n   \n\t# indented comment\na=1") == {
        "a": "1"}


def test_properties_hash_inside_a_value_is_text() -> None:
    assert parse_properties("a=x # not a comment") == {"a": "x # not a comment"}


def test_properties_last_value_wins() -> None:
    assert parse_properties("a=1\na=2") == {"a": "2"}


def test_properties_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_properties_continuation_drops_leading_blanks() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT2://b:2\nnext=x\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,PLAINTEXT2://b:2",
                                      "next": "x"}


def test_properties_continuation_chain_and_backslash_at_end_of_text() -> None:
    assert parse_properties("k=a\\\n b\\\n  c\nz=\\") == {"k": "abc", "z": ""}


def test_properties_continued_key() -> None:
    assert parse_properties("lo\\\n  ng=1") == {"long": "1"}


def test_properties_even_backslashes_do_not_continue() -> None:
    assert parse_properties("path=C:\\\\\nnext=1") == {"path": "C:\\", "next": "1"}


def test_properties_comment_line_does_not_continue() -> None:
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_properties_continued_line_starting_with_hash_is_value() -> None:
    assert parse_properties("a=x\\\n#y") == {"a": "x#y"}


def test_properties_escaped_separators_in_key() -> None:
    assert parse_properties(r"k\=ey\:x\ y=v") == {"k=ey:x y": "v"}


def test_properties_character_escapes() -> None:
    assert parse_properties(r"k=tab\there\nnl\rcr\fff\\back\=eq\:colon\q\#") == {
        "k": "tab\there\nnl\rcr\fff\\back=eq:colon" + "q#"}


def test_properties_unicode_escapes() -> None:
    assert parse_properties(r"caf\u00e9=\u0041\u00DF") == {"caf\u00e9": "A\u00df"}


def test_properties_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(PropertiesError, match="uxxxx") as caught:
        parse_properties("a=1\nb=\\u12G4")
    assert caught.value.line == 2
    with pytest.raises(PropertiesError):
        parse_properties("a=\\u12")


def test_properties_bytes_utf8_then_latin1() -> None:
    assert parse_properties("k=caf\u00e9".encode()) == {"k": "caf\u00e9"}
    assert parse_properties("k=caf\u00e9".encode("latin-1")) == {"k": "caf\u00e9"}
    assert decode_properties(b"\xff") == "\u00ff"


def test_properties_kafka_server_properties_sample() -> None:
    text = """
############################# Server Basics #############################
broker.id=0
listeners=PLAINTEXT://:9092
num.network.threads=3
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
log.retention.hours=168
zookeeper.connect=localhost:2181
"""
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://:9092"
    assert props["zookeeper.connect"] == "localhost:2181"
    assert len(props) == 7
