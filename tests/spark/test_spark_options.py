"""Options of the ads Spark source and sink: parsing, precedence and errors that name the
option (ads.spark.options), and the planning arithmetic (ads.spark.planning)."""

from __future__ import annotations

import pytest

from ads.spark.options import (
    SourceOptionError,
    parse_sink_options,
    parse_source_options,
)
from ads.spark.planning import OffsetRange, rate_limit, split_ranges
from ads.spark.wire import TopicPartition

BASE = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t"}


def parse(streaming: bool = False, **extra: str):  # type: ignore[no-untyped-def]
    # PySpark hands keys over lower-cased; the parser must not care.
    return parse_source_options({**BASE, **extra}, streaming=streaming)


def test_spark_options_defaults() -> None:
    o = parse()
    assert (o.strategy, o.topics, o.starting.kind, o.ending.kind) == (
        "subscribe", ("t",), "earliest", "latest")
    assert o.fail_on_data_loss and not o.include_headers and not o.read_committed
    assert parse(streaming=True).starting.kind == "latest"


def test_spark_options_keys_are_case_insensitive() -> None:
    o = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "subscribePattern": "a.*",
                              "startingoffsets": "latest", "INCLUDEHEADERS": "TRUE"},
                             streaming=True)
    assert o.strategy == "subscribePattern" and o.pattern == "a.*"
    assert o.starting.kind == "latest" and o.include_headers


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1"}, "subscribe, subscribePattern, assign"),
    ({**BASE, "assign": '{"t":[0]}'}, "Only one of"),
    ({**BASE, "subscribe": " , "}, "No topics to subscribe"),
    ({"kafka.bootstrap.servers": "h:1", "subscribePattern": ""}, "Pattern to subscribe"),
    ({"kafka.bootstrap.servers": "h:1", "assign": "[1]"}, "'assign'"),
    ({"kafka.bootstrap.servers": "h:1", "assign": "{}"}, "No topicpartitions"),
    ({**BASE, "startingOffsets": "latest"}, "can't be latest for batch"),
    ({**BASE, "endingOffsets": "earliest"}, "can't be earliest for batch"),
    ({**BASE, "startingOffsets": '{"t":{"0":-1}}'}, "t-0 can't be latest"),
    ({**BASE, "endingOffsets": '{"t":{"0":-2}}'}, "t-0 can't be earliest"),
    ({**BASE, "startingOffsets": "{bad json"}, "'startingOffsets'"),
    ({**BASE, "startingOffsets": '{"t":{"0":-7}}'}, "'startingOffsets'"),
    ({**BASE, "failOnDataLoss": "maybe"}, "'failOnDataLoss'"),
    ({**BASE, "minPartitions": "0"}, "'minPartitions'"),
    ({**BASE, "maxOffsetsPerTrigger": "10"}, "only valid in streaming"),
    ({**BASE, "kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not supported"),
    ({**BASE, "kafka.isolation.level": "dirty"}, "'kafka.isolation.level'"),
    ({**BASE, "startingOffsetsByTimestampStrategy": "x"}, "startingOffsetsByTimestampStrategy"),
    ({**BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"},
     "'kafka.sasl.mechanism'"),
    ({**BASE, "kafka.security.protocol": "SSL", "kafka.ssl.ca.location": "/nonexistent"},
     "'kafka.ssl.ca.location'"),
    ({**BASE, "startingTimestamp": "soon"}, "'startingTimestamp'"),
])
def test_spark_options_errors_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(SourceOptionError, match=message.replace("(", r"\(")):
        parse_source_options({k.lower(): v for k, v in options.items()}, streaming=False)


def test_spark_options_streaming_rejects_ending_offsets() -> None:
    for key in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(SourceOptionError, match=f"'{key}' is not valid in streaming"):
            parse(streaming=True, **{key: "1"})
    with pytest.raises(SourceOptionError, match="maxTriggerDelay"):
        parse(streaming=True, maxTriggerDelay="soon")
    o = parse(streaming=True, maxOffsetsPerTrigger="10", minOffsetsPerTrigger="5",
              maxTriggerDelay="30s")
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (
        10, 5, 30_000)


def test_spark_options_timestamp_precedence() -> None:
    o = parse(startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":5}}',
              startingTimestamp="7")
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 7)
    o = parse(startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":5}}')
    assert o.starting.kind == "timestamps" and o.starting.offsets == (("t", 0, 5),)
    o = parse(endingOffsets='{"t":{"0":9,"1":-1}}', endingTimestamp="100")
    assert (o.ending.kind, o.ending.timestamp) == ("timestamp", 100)


def test_spark_options_assign_and_json_offsets() -> None:
    o = parse_source_options({"kafka.bootstrap.servers": "h:1",
                              "assign": '{"a":[1,0],"b":[2]}',
                              "startingoffsets": '{"a":{"0":-2,"1":5},"b":{"2":3}}'},
                             streaming=False)
    assert o.assign == (("a", 0), ("a", 1), ("b", 2))
    assert o.starting.as_mapping() == {("a", 0): -2, ("a", 1): 5, ("b", 2): 3}


def test_spark_options_sink() -> None:
    s = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "out",
                            "kafka.linger.ms": "7", "exactlyonce": "true"})
    assert s.topic == "out" and s.exactly_once and dict(s.producer_config) == {"linger.ms": "7"}
    with pytest.raises(SourceOptionError, match="kafka.bootstrap.servers"):
        parse_sink_options({"topic": "x"})
    with pytest.raises(SourceOptionError, match="'value.serializer' is not supported"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1",
                            "kafka.value.serializer": "x"})


def test_spark_planning_split_ranges() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 50, 60),
              OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    split = split_ranges(ranges, 10)
    assert len(split) >= 10
    for tp in (0, 1):
        pieces = [r for r in split if r.partition == tp]
        assert pieces[0].start == ranges[tp].start and pieces[-1].end == ranges[tp].end
        assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))
    assert not [r for r in split if r.partition == 2]


def test_spark_planning_rate_limit_shares_by_backlog() -> None:
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    start = {a: 0, b: 100, c: 7}
    latest = {a: 900, b: 200, c: 7}
    limited = rate_limit(start, latest, 100)
    assert limited == {a: 90, b: 110, c: 7}
    assert rate_limit(start, latest, 10_000) == latest
    # A tiny backlog still moves: every partition with data gets at least one record.
    tiny = rate_limit({a: 0, b: 0}, {a: 10_000, b: 1}, 10)
    assert tiny[b] == 1 and tiny[a] == 9
