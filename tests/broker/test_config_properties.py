import pytest

from ads.broker.config import ConfigError, parse_properties


def test_config_properties_separators_and_comments() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   spaced value  \n"
        "e\t=\tx\n"
        "f\n"
        "g=\n"
        "h=x=y:z\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {
        "a": "last wins", "b": "2", "c": "3", "d": "spaced value  ", "e": "x", "f": "",
        "g": "", "h": "x=y:z",
    }


def test_config_properties_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_config_properties_continuation() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT2://b:2\nnext=x\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,PLAINTEXT2://b:2",
                                      "next": "x"}


def test_config_properties_continuation_chain_and_eof() -> None:
    assert parse_properties("k=a\\\n b\\\n  c\nz=\\") == {"k": "abc", "z": ""}


def test_config_properties_even_backslashes_do_not_continue() -> None:
    assert parse_properties("path=C:\\\\\nnext=1") == {"path": "C:\\", "next": "1"}


def test_config_properties_comment_line_does_not_continue() -> None:
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_config_properties_continued_line_starting_with_hash_is_value() -> None:
    assert parse_properties("a=x\\\n#y") == {"a": "x#y"}


def test_config_properties_escapes() -> None:
    text = r"k\=ey\:x\ y=tab\there\nnl\\back\=eq\:colon\u00e9\u0041\q"
    assert parse_properties(text) == {"k=ey:x y": "tab\there\nnl\\back=eq:colon\u00e9Aq"}


def test_config_properties_malformed_unicode_escape() -> None:
    with pytest.raises(ConfigError, match="uxxxx"):
        parse_properties("a=\\u12G4")
    with pytest.raises(ConfigError):
        parse_properties("a=\\u12")


def test_config_properties_kafka_server_properties_sample() -> None:
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
