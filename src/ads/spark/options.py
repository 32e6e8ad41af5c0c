"""Options of the ``ads`` Spark source, parsed and checked before anything is planned.

The option names, their precedence and the wording of the errors follow Spark's own Kafka
connector, so a pipeline moves by changing only the format name. PySpark hands option keys
over lower-cased, so every lookup here is case-insensitive.

Offset specifications (``startingOffsets`` / ``endingOffsets``) are ``earliest``,
``latest`` or JSON ``{"topic": {"partition": offset}}`` with -2 for earliest and -1 for
latest; timestamp specifications are one ``startingTimestamp`` for every partition or JSON
``{"topic": {"partition": timestamp_ms}}``. For one end of the range, a timestamp option
wins over a by-timestamp JSON, which wins over the offsets option.

Security, as Spark's connector takes it: the Kafka client keys with the `kafka.` prefix,
`kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.username`,
`kafka.sasl.password`, `kafka.sasl.jaas.config` and `kafka.ssl.*` (Java's or librdkafka's
names, as ``ads.client.security`` reads them). They are checked here, at planning, and
travel to the tasks as strings: each task reads the files they name itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ads.client.security import ClientConfigError, ClientSecurity

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "SourceOptionError",
    "parse_sink_options",
    "parse_source_options",
    "security_properties",
]

EARLIEST = -2
LATEST = -1

_STRATEGIES = ("subscribe", "subscribepattern", "assign")
_STRATEGY_NAMES = {"subscribe": "subscribe", "subscribepattern": "subscribePattern",
                   "assign": "assign"}
# Kafka consumer settings Spark's connector refuses, with its advice.
_UNSUPPORTED_KAFKA = {
    "kafka.auto.offset.reset": "Instead set the source option 'startingOffsets' to 'earliest' "
                               "or 'latest' to specify where to start.",
    "kafka.key.deserializer": "Keys are always read as byte arrays; use DataFrame operations "
                              "to deserialize them.",
    "kafka.value.deserializer": "Values are always read as byte arrays; use DataFrame "
                                "operations to deserialize them.",
    "kafka.enable.auto.commit": "The source does not commit any offsets.",
    "kafka.interceptor.classes": "The source reads bytes, so interceptors cannot apply.",
}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                "d": 86_400_000}


class SourceOptionError(ValueError):
    """An option is missing, malformed, or not allowed with the others; the message names
    the option. Raised at planning time, before any task runs."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where one end of the range is: ``kind`` is ``earliest``, ``latest``, ``offsets``
    (per-partition offsets, -2/-1 allowed), ``timestamp`` (one timestamp for every
    partition) or ``timestamps`` (per-partition timestamps)."""

    kind: str
    offsets: tuple[tuple[str, int, int], ...] = ()
    timestamp: int = 0

    def as_mapping(self) -> dict[tuple[str, int], int]:
        return {(t, p): o for t, p, o in self.offsets}


EARLIEST_SPEC = OffsetSpec("earliest")
LATEST_SPEC = OffsetSpec("latest")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap_servers: str
    strategy: str  # subscribe, subscribePattern or assign
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = EARLIEST_SPEC
    ending: OffsetSpec = LATEST_SPEC
    by_timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    read_committed: bool = False
    client_id: str = "ads-spark"
    fetch_max_bytes: int = 8 << 20
    fetch_max_wait_ms: int = 500
    request_timeout_ms: int = 30_000
    check_crcs: bool = True
    # client security properties without the `kafka.` prefix (see the module docstring)
    security: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    exactly_once: bool
    producer_config: tuple[tuple[str, str], ...]
    security: tuple[tuple[str, str], ...] = ()


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


_SECURITY_PREFIXES = ("kafka.security.protocol", "kafka.sasl.", "kafka.ssl.")


def security_properties(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The client security properties among `kafka.*` options, without the prefix, checked
    (files opened, the mechanism known): a bad one is a `SourceOptionError` naming it."""
    opts = _lower(options)
    props = tuple(sorted((k[len("kafka."):], v) for k, v in opts.items()
                         if k.startswith(_SECURITY_PREFIXES)))
    try:
        ClientSecurity.from_properties(dict(props))
    except ClientConfigError as exc:
        raise SourceOptionError(f"Option 'kafka.{exc.key}': {exc}") from exc
    return props


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise SourceOptionError(f"Option '{name}' must be 'true' or 'false', got {raw!r}")
    return value == "true"


def _positive(opts: Mapping[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise SourceOptionError(
            f"Invalid value {raw!r} for option '{name}': must be a positive integer") from None
    if value <= 0:
        raise SourceOptionError(
            f"Invalid value {raw!r} for option '{name}': must be a positive integer")
    return value


def _int(raw: str, name: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise SourceOptionError(f"Option '{name}' must be an integer, got {raw!r}") from None


def duration_ms(raw: str, name: str) -> int:
    match = _DURATION.match(raw)
    if not match:
        raise SourceOptionError(
            f"Option '{name}' must be a duration such as '15m', '30s' or '500ms', got {raw!r}")
    return int(match.group(1)) * _DURATION_MS[(match.group(2) or "ms").lower()]


def _partition_json(raw: str, name: str) -> tuple[tuple[str, int, int], ...]:
    """``{"topic": {"0": value}}`` as sorted (topic, partition, value) triples."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise SourceOptionError(
            f"Option '{name}' must be 'earliest', 'latest' or JSON like "
            f'{{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {raw!r}')
    out = []
    for topic, parts in parsed.items():
        for partition, value in parts.items():
            if not (str(partition).lstrip("-").isdigit() and isinstance(value, int)
                    and not isinstance(value, bool)):
                raise SourceOptionError(
                    f"Option '{name}' has an invalid entry {topic}: {{{partition!r}: "
                    f"{value!r}}}; partitions are integers and values are integers")
            out.append((str(topic), int(partition), int(value)))
    return tuple(sorted(out))


def _offset_spec(opts: Mapping[str, str], *, starting: bool, streaming: bool) -> OffsetSpec:
    end = "starting" if starting else "ending"
    ts_key, by_ts_key, offsets_key = f"{end}timestamp", f"{end}offsetsbytimestamp", \
        f"{end}offsets"
    ts_name, by_ts_name, offsets_name = (f"{end}Timestamp", f"{end}OffsetsByTimestamp",
                                         f"{end}Offsets")
    if ts_key in opts:
        return OffsetSpec("timestamp", timestamp=_int(opts[ts_key], ts_name))
    if by_ts_key in opts:
        return OffsetSpec("timestamps", offsets=_partition_json(opts[by_ts_key], by_ts_name))
    raw = opts.get(offsets_key)
    if raw is None:
        if starting:
            return LATEST_SPEC if streaming else EARLIEST_SPEC
        return LATEST_SPEC
    word = raw.strip().lower()
    if word == "earliest":
        spec = EARLIEST_SPEC
    elif word == "latest":
        spec = LATEST_SPEC
    else:
        spec = OffsetSpec("offsets", offsets=_partition_json(raw, offsets_name))
        for topic, partition, offset in spec.offsets:
            if offset < EARLIEST:
                raise SourceOptionError(
                    f"Option '{offsets_name}' has offset {offset} for {topic}-{partition}; "
                    "use -2 for earliest, -1 for latest or a non-negative offset")
    if not streaming:
        _check_batch_bound(spec, starting=starting)
    return spec


def _check_batch_bound(spec: OffsetSpec, *, starting: bool) -> None:
    """A batch query reads a fixed range: it cannot start at the latest offset nor end at
    the earliest (Spark's Kafka source refuses both)."""
    if starting and spec.kind == "latest":
        raise SourceOptionError(
            "Option 'startingOffsets': starting offset can't be latest for batch queries "
            "on Kafka")
    if not starting and spec.kind == "earliest":
        raise SourceOptionError(
            "Option 'endingOffsets': ending offset can't be earliest for batch queries "
            "on Kafka")
    for topic, partition, offset in spec.offsets:
        if starting and offset == LATEST:
            raise SourceOptionError(
                f"Option 'startingOffsets' for {topic}-{partition} can't be latest for "
                "batch queries on Kafka")
        if not starting and offset == EARLIEST:
            raise SourceOptionError(
                f"Option 'endingOffsets' for {topic}-{partition} can't be earliest for "
                "batch queries on Kafka")


def _strategy(opts: Mapping[str, str]) -> tuple[str, tuple[str, ...], str,
                                                tuple[tuple[str, int], ...]]:
    given = [k for k in _STRATEGIES if k in opts]
    if not given:
        raise SourceOptionError(
            "One of the following options must be specified for the ads source: "
            "subscribe, subscribePattern, assign. See the docs for more details.")
    if len(given) > 1:
        names = ", ".join(_STRATEGY_NAMES[k] for k in given)
        raise SourceOptionError(
            "Only one of the following options can be specified for the ads source: "
            f"subscribe, subscribePattern, assign (got {names}). See the docs for more "
            "details.")
    key = given[0]
    raw = opts[key]
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise SourceOptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is "
                f"{raw!r}")
        return "subscribe", topics, "", ()
    if key == "subscribepattern":
        if not raw.strip():
            raise SourceOptionError(
                f"Pattern to subscribe is empty as specified value for option "
                f"'subscribePattern' is {raw!r}")
        try:
            re.compile(raw.strip())
        except re.error as exc:
            raise SourceOptionError(
                f"Option 'subscribePattern' is not a valid pattern: {exc}") from None
        return "subscribePattern", (), raw.strip(), ()
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not all(
            isinstance(v, list) and all(isinstance(p, int) for p in v)
            for v in parsed.values()):
        raise SourceOptionError(
            'Option \'assign\' must be JSON like {"topicA":[0,1],"topicB":[2,4]}, got '
            f"{raw!r}")
    assigned = tuple(sorted({(str(t), int(p)) for t, ps in parsed.items() for p in ps}))
    if not assigned:
        raise SourceOptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is {raw!r}")
    return "assign", (), "", assigned


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise SourceOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring the ads "
            "source")
    for key, advice in _UNSUPPORTED_KAFKA.items():
        if key in opts:
            raise SourceOptionError(
                f"Kafka option '{key[len('kafka.'):]}' is not supported. {advice}")
    security = security_properties(opts)
    if streaming:
        for key, name in (("endingoffsets", "endingOffsets"),
                          ("endingtimestamp", "endingTimestamp"),
                          ("endingoffsetsbytimestamp", "endingOffsetsByTimestamp")):
            if key in opts:
                raise SourceOptionError(f"Option '{name}' is not valid in streaming queries")
    else:
        for key, name in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                          ("minoffsetspertrigger", "minOffsetsPerTrigger"),
                          ("maxtriggerdelay", "maxTriggerDelay")):
            if key in opts:
                raise SourceOptionError(f"Option '{name}' is only valid in streaming queries")
    strategy, topics, pattern, assign = _strategy(opts)
    by_ts = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if by_ts not in ("error", "latest"):
        raise SourceOptionError(
            "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got "
            f"{opts['startingoffsetsbytimestampstrategy']!r}")
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise SourceOptionError(
            "Option 'kafka.isolation.level' must be 'read_uncommitted' or 'read_committed', "
            f"got {opts['kafka.isolation.level']!r}")
    max_fetch = _positive(opts, "kafka.max.partition.fetch.bytes",
                          "kafka.max.partition.fetch.bytes")
    return SourceOptions(
        bootstrap_servers=servers,
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assign=assign,
        starting=_offset_spec(opts, starting=True, streaming=streaming),
        ending=(LATEST_SPEC if streaming
                else _offset_spec(opts, starting=False, streaming=streaming)),
        by_timestamp_strategy=by_ts,
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        min_partitions=_positive(opts, "minpartitions", "minPartitions"),
        max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive(opts, "minoffsetspertrigger", "minOffsetsPerTrigger"),
        max_trigger_delay_ms=duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay"),
        read_committed=isolation == "read_committed",
        client_id=opts.get("kafka.client.id", "ads-spark"),
        fetch_max_bytes=max_fetch or 8 << 20,
        fetch_max_wait_ms=_positive(opts, "kafka.fetch.max.wait.ms",
                                    "kafka.fetch.max.wait.ms") or 500,
        request_timeout_ms=_positive(opts, "kafka.request.timeout.ms",
                                     "kafka.request.timeout.ms") or 30_000,
        check_crcs=_bool(opts, "kafka.check.crcs", "kafka.check.crcs", True),
        security=security,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise SourceOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring the ads sink")
    for key in ("kafka.key.serializer", "kafka.value.serializer"):
        if key in opts:
            raise SourceOptionError(
                f"Kafka option '{key[len('kafka.'):]}' is not supported. Keys and values are "
                "written as bytes; use DataFrame operations to serialize them.")
    config = tuple(sorted(
        (k[len("kafka."):], v) for k, v in opts.items()
        if k.startswith("kafka.") and k != "kafka.bootstrap.servers"))
    topic = opts.get("topic")
    return SinkOptions(
        bootstrap_servers=servers,
        topic=topic.strip() if topic and topic.strip() else None,
        exactly_once=_bool(opts, "exactlyonce", "exactlyOnce", False),
        producer_config=config,
        security=security_properties(opts),
    )
