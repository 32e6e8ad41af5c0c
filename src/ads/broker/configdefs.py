"""Definitions of every broker and topic configuration key ADS knows, in Kafka's terms.

Each key has Kafka's name, type, default, validator and importance, so a `server.properties`
written for Kafka means the same thing here. Defaults follow Kafka 3.x except where a note in
the documentation line says otherwise (ADS listens on 127.0.0.1 and stores data under
/tmp/ads-logs by default, and `broker.id` defaults to 0 so a lone broker needs no file).

Values are parsed from text the way Kafka's ConfigDef does: surrounding whitespace is
ignored, booleans are `true`/`false` in any case, numbers must fit their Java width, lists
are comma-separated with whitespace around commas ignored. `render` turns a typed value back
into the string Kafka would report in DescribeConfigs.

This module is pure data plus parsing: no I/O, stdlib only.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from decimal import Decimal

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308


class ConfigError(Exception):
    """A configuration key or value is not acceptable.

    `key` names the offending key when there is one; `error_name` is the Kafka error a
    request handler should answer with (INVALID_CONFIG unless stated otherwise).
    """

    def __init__(self, message: str, key: str | None = None,
                 error_name: str = "INVALID_CONFIG") -> None:
        super().__init__(message)
        self.key = key
        self.error_name = error_name


class ConfigType(enum.IntEnum):
    """Value types; the numbers are DescribeConfigs' config type ids."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


# --- validators -----------------------------------------------------------------------------
# Each returns None when the value is fine, else the problem in words; the caller adds the
# key and the value to make the full message.


@dataclass(frozen=True, slots=True)
class Range:
    low: float | None = None
    high: float | None = None
    also: tuple[int, ...] = ()  # values accepted outside the range (e.g. gzip's -1)

    def check(self, value: object) -> str | None:
        assert isinstance(value, int | float)
        if value in self.also:
            return None
        extra = "".join(f" or {v}" for v in self.also)
        if self.low is not None and value < self.low:
            if self.high is not None and extra:
                return f"Value must be between {_num(self.low)} and {_num(self.high)}{extra}"
            return f"Value must be at least {_num(self.low)}"
        if self.high is not None and value > self.high:
            if self.low is not None and extra:
                return f"Value must be between {_num(self.low)} and {_num(self.high)}{extra}"
            return f"Value must be no more than {_num(self.high)}"
        return None


@dataclass(frozen=True, slots=True)
class OneOf:
    choices: tuple[str, ...]

    def check(self, value: object) -> str | None:
        if value in self.choices:
            return None
        return f"String must be one of: {', '.join(self.choices)}"


@dataclass(frozen=True, slots=True)
class ListOf:
    """Every element is one of `choices` (any element when empty); no element repeats."""

    choices: tuple[str, ...] = ()
    non_empty: bool = False

    def check(self, value: object) -> str | None:
        assert isinstance(value, list)
        if self.non_empty and not value:
            return "Value must not be empty"
        for item in value:
            if self.choices and item not in self.choices:
                return f"Element {item} is not one of: {', '.join(self.choices)}"
            if not item:
                return "Elements must not be empty"
        if len(set(value)) != len(value):
            return "Elements must not repeat"
        return None


_VERSION_RE = re.compile(
    r"(0\.(8\.[0-2]|9\.0|10\.[0-2]|11\.0)|1\.[01]|2\.[0-8]|3\.[0-9])(-IV[0-9]+)?\Z")


@dataclass(frozen=True, slots=True)
class KafkaVersion:
    """A Kafka release or protocol version as Kafka's MetadataVersion reads it: `0.10.2`,
    `2.8`, `3.0-IV1`; segments past the release (`3.0.1`) are ignored."""

    def check(self, value: object) -> str | None:
        text = str(value)
        release, dash, iv = text.partition("-")
        segments = release.split(".")
        keep = 3 if release.startswith("0.") else 2
        key = ".".join(segments[:keep]) + dash + iv
        if _VERSION_RE.match(key):
            return None
        return f"Version `{text}` is not a valid version"


@dataclass(frozen=True, slots=True)
class HostPort:
    """`HOST:PORT` (an IPv6 host in brackets); port 0 picks a free one."""

    def check(self, value: object) -> str | None:
        host, sep, port = str(value).rpartition(":")
        if sep and host and port.isdigit() and int(port) <= 65535:
            return None
        return f"`{value}` is not HOST:PORT"


class HostCounts:
    """`host:count,...` (`max.connections.per.ip.overrides`); hosts are resolved at start."""

    def check(self, value: object) -> str | None:
        for item in filter(None, (i.strip() for i in str(value).split(","))):
            host, sep, count = item.rpartition(":")
            if not (sep and host and count.strip().isdigit()):
                return f"`{item}` is not host:count"
        return None


Validator = Range | OneOf | ListOf | KafkaVersion | HostPort | HostCounts


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# --- parsing and rendering ------------------------------------------------------------------

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]?\Z")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_WIDTH = {ConfigType.SHORT: 15, ConfigType.INT: 31, ConfigType.LONG: 63}


def parse_typed(name: str, ctype: ConfigType, raw: str) -> object:
    """Parses `raw` as Kafka would for a key of type `ctype`; raises ConfigError."""
    text = raw.strip()
    if ctype is ConfigType.BOOLEAN:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise invalid(name, raw, "Expected value to be either true or false")
    if ctype in _WIDTH:
        bits = _WIDTH[ctype]
        if _INT_RE.match(text) and -(2**bits) <= int(text) < 2**bits:
            return int(text)
        raise invalid(name, raw, f"Not a number of type {ctype.name}")
    if ctype is ConfigType.DOUBLE:
        if text in ("Infinity", "+Infinity", "-Infinity", "NaN"):
            return float(text.replace("Infinity", "inf"))
        if _DOUBLE_RE.match(text):
            return float(text.rstrip("dDfF"))
        raise invalid(name, raw, "Not a number of type DOUBLE")
    if ctype is ConfigType.LIST:
        return _LIST_SPLIT.split(text) if text else []
    return text


def render(ctype: ConfigType, value: object) -> str | None:
    """The string Kafka reports for a typed value (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def java_double(x: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else d.dddE<exp>."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        if "e" in text:  # repr picked exponent form for a small number
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = exp + len(digits) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{exponent}"


def invalid(name: str, raw: object, problem: str) -> ConfigError:
    return ConfigError(f"Invalid value {raw} for configuration {name}: {problem}", key=name)


# --- definitions ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: object  # typed; None when the key has no default
    validator: Validator | None
    importance: Importance
    doc: str
    default_text: str | None = field(default=None)

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> object:
        """Typed and validated value of `raw` for this key; raises ConfigError."""
        value = parse_typed(self.name, self.type, raw)
        if self.validator is not None:
            problem = self.validator.check(value)
            if problem is not None:
                raise invalid(self.name, raw, problem)
        return value


def _table(*rows: tuple[str, ConfigType, str | None, Validator | None, Importance, str]
           ) -> dict[str, ConfigDef]:
    out: dict[str, ConfigDef] = {}
    for name, ctype, default, validator, importance, doc in rows:
        assert name not in out, name
        probe = ConfigDef(name, ctype, None, validator, importance, doc)
        typed = None if default is None else probe.parse(default)
        out[name] = ConfigDef(name, ctype, typed, validator, importance, doc,
                              render(ctype, typed))
    return out


B, S, I, SH, L, D, LI, C, P = (  # noqa: E741 - short aliases keep the table readable
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW
NONNEG, POS = Range(0), Range(1)
LMAX, IMAX = str(LONG_MAX), str(INT_MAX)

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_VERSIONS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
GZIP_LEVEL, LZ4_LEVEL, ZSTD_LEVEL = Range(1, 9, also=(-1,)), Range(1, 17), Range(-131072, 22)

BROKER_CONFIG_DEFS: dict[str, ConfigDef] = _table(
    # identity and cluster membership
    ("node.id", I, None, NONNEG, HIGH,
     "Id of this broker in the cluster; takes precedence over broker.id."),
    ("broker.id", I, "0", NONNEG, HIGH,
     "Older name for node.id, used when node.id is unset (ADS default 0)."),
    ("broker.rack", S, None, None, MEDIUM, "Rack or zone of this broker, for replica placement."),
    ("replica.selector.class", S, None,
     OneOf(("org.apache.kafka.common.replica.RackAwareReplicaSelector",
            "org.apache.kafka.common.replica.LeaderSelector")), MEDIUM,
     "KIP-392: RackAwareReplicaSelector sends consumers to an in-sync replica in their rack."),
    ("zookeeper.connect", S, None, None, HIGH,
     "ZooKeeper hosts (host:port,...[/chroot]) for cluster mode; unset runs embedded."),
    ("zookeeper.session.timeout.ms", I, "18000", POS, HIGH,
     "ZooKeeper session timeout; the broker counts as dead once its session expires."),
    ("zookeeper.connection.timeout.ms", I, None, None, HIGH,
     "Time to wait for a ZooKeeper connection; the session timeout when unset."),
    ("process.roles", LI, "", ListOf(("broker", "controller")), HIGH,
     "KRaft roles: `broker` joins a cluster of KRaft controllers; lists with `controller` "
     "are ignored."),
    ("controller.listener.names", S, None, None, HIGH,
     "KRaft controller listeners: not bound; the first is how a KRaft broker reaches "
     "controllers."),
    ("controller.quorum.voters", LI, "", None, HIGH,
     "KRaft quorum voters (id@host:port): the controllers when no bootstrap servers are "
     "set."),
    ("controller.quorum.bootstrap.servers", LI, "", None, HIGH,
     "KRaft controllers (host:port) a broker with process.roles=broker asks first."),
    ("controller.quorum.request.timeout.ms", I, "2000", POS, MEDIUM,
     "How long a KRaft broker waits for a controller's answer before trying again."),
    ("broker.heartbeat.interval.ms", I, "2000", POS, MEDIUM,
     "Time between a KRaft broker's heartbeats to the active controller."),
    ("initial.broker.registration.timeout.ms", I, "60000", POS, MEDIUM,
     "How long a KRaft broker tries to reach its controllers at start."),
    # network
    ("listeners", S, "PLAINTEXT://127.0.0.1:9092", None, HIGH,
     "Comma-separated NAME://host:port endpoints to bind; empty host binds every interface."),
    ("advertised.listeners", S, None, None, HIGH,
     "Endpoints given to clients in metadata when they differ from listeners."),
    ("listener.security.protocol.map", S,
     "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None, LOW,
     "Maps each listener name to its security protocol, as NAME:PROTOCOL pairs."),
    ("inter.broker.listener.name", S, None, None, MEDIUM,
     "Listener other brokers connect to; by default the one using "
     "security.inter.broker.protocol."),
    ("security.inter.broker.protocol", S, "PLAINTEXT", OneOf(SECURITY_PROTOCOLS), MEDIUM,
     "Security protocol between brokers when inter.broker.listener.name is unset."),
    ("num.network.threads", I, "3", POS, HIGH,
     "Network thread count in Kafka; ADS uses one event loop and reports this only."),
    ("num.io.threads", I, "8", POS, HIGH,
     "Request thread count in Kafka; ADS reports this only."),
    ("queued.max.requests", I, "500", POS, HIGH,
     "Requests a connection may have in flight before the broker stops reading it."),
    ("socket.send.buffer.bytes", I, "102400", None, HIGH,
     "SO_SNDBUF for client sockets; -1 keeps the OS default."),
    ("socket.receive.buffer.bytes", I, "102400", None, HIGH,
     "SO_RCVBUF for client sockets; -1 keeps the OS default."),
    ("socket.request.max.bytes", I, "104857600", POS, HIGH,
     "Largest request frame accepted; larger size prefixes close the connection."),
    ("connections.max.idle.ms", L, "600000", None, MEDIUM,
     "Connections idle longer than this are closed."),
    ("max.connections", I, IMAX, NONNEG, MEDIUM, "Cap on open client connections."),
    # ADS's own: the HTTP endpoints (docs/operations.md)
    ("http.listener", S, None, HostPort(), MEDIUM,
     "HOST:PORT serving /metrics, /healthz, /readyz and the web console; unset: none."),
    ("console.sample.interval.ms", I, "5000", POS, LOW,
     "How often the console samples rates and lag for its plots (an hour is kept)."),
    ("console.read.only", B, "true", None, MEDIUM,
     "false lets the web console delete topics and empty consumer groups."),
    # ADS's own: the `ads broker` process's garbage collector (docs/broker.md)
    ("gc.freeze.enable", B, "true", None, LOW,
     "Freeze the survivors of each full garbage collection, so later ones skip them."),
    ("gc.full.collection.interval.ms", L, "600000", POS, LOW,
     "How often frozen objects are thawed and the whole heap collected once."),
    ("max.connections.per.ip", I, IMAX, NONNEG, MEDIUM,
     "Cap on open connections from one address."),
    ("max.connections.per.ip.overrides", S, "", HostCounts(), MEDIUM,
     "Per-address caps overriding max.connections.per.ip, as host:count pairs."),
    # client quotas (docs/security.md)
    ("quota.window.num", I, "11", POS, LOW,
     "Samples kept when measuring a client's rate against its quota."),
    ("quota.window.size.seconds", I, "1", POS, LOW,
     "Length of each sample of a client's quota rate."),
    ("request.timeout.ms", I, "30000", NONNEG, MEDIUM,
     "Time the broker waits for replies on its own outbound requests."),
    # topics and messages
    ("num.partitions", I, "1", POS, MEDIUM, "Partitions of a topic created without a count."),
    ("default.replication.factor", I, "1", POS, MEDIUM,
     "Replicas of a topic created without a replication factor."),
    ("auto.create.topics.enable", B, "true", None, HIGH,
     "Create a topic when a client asks for metadata or produces to an unknown one."),
    ("delete.topic.enable", B, "true", None, HIGH,
     "Allow DeleteTopics; when false the request fails."),
    ("message.max.bytes", I, "1048588", NONNEG, HIGH,
     "Largest record batch accepted after compression; default for max.message.bytes."),
    ("fetch.max.bytes", I, "57671680", Range(1024), MEDIUM,
     "Upper bound on the bytes a fetch response carries."),
    ("max.request.partition.size.limit", I, "2000", Range(1), LOW,
     "Most partitions one DescribeTopicPartitions response lists (the client pages on)."),
    ("max.incremental.fetch.session.cache.slots", I, "1000", NONNEG, MEDIUM,
     "Incremental fetch sessions kept per broker."),
    ("compression.type", S, "producer", OneOf(COMPRESSION_TYPES), HIGH,
     "Codec batches are stored with; producer keeps what the producer used."),
    ("compression.gzip.level", I, "-1", GZIP_LEVEL, MEDIUM,
     "gzip level when the broker recompresses; -1 is the codec default."),
    ("compression.lz4.level", I, "9", LZ4_LEVEL, MEDIUM,
     "lz4 level when the broker recompresses."),
    ("compression.zstd.level", I, "3", ZSTD_LEVEL, MEDIUM,
     "zstd level when the broker recompresses."),
    ("min.insync.replicas", I, "1", POS, HIGH,
     "In-sync replicas needed for an acks=all write to succeed."),
    ("unclean.leader.election.enable", B, "false", None, HIGH,
     "Allow an out-of-sync replica to become leader, at the price of losing data."),
    ("auto.leader.rebalance.enable", B, "true", None, HIGH,
     "Move leadership back to preferred replicas in the background."),
    ("leader.imbalance.check.interval.seconds", L, "300", POS, HIGH,
     "How often the controller checks whether leadership needs rebalancing."),
    ("leader.imbalance.per.broker.percentage", I, "10", None, HIGH,
     "Share of a broker's preferred partitions led elsewhere that triggers a rebalance."),
    ("controlled.shutdown.enable", B, "true", None, MEDIUM,
     "Hand leadership over before the broker stops."),
    ("controlled.shutdown.max.retries", I, "3", None, MEDIUM,
     "Controlled shutdown attempts before the broker stops anyway."),
    ("controlled.shutdown.retry.backoff.ms", L, "5000", None, MEDIUM,
     "Wait between controlled shutdown attempts."),
    ("controller.socket.timeout.ms", I, "30000", None, MEDIUM,
     "How long a broker waits for the controller's answer to a controlled shutdown."),
    # log layout
    ("log.dirs", LI, None, ListOf(non_empty=True), HIGH,
     "Directories holding partition data; log.dir is used when unset."),
    ("log.dir", S, "/tmp/ads-logs", None, HIGH,  # noqa: S108 - Kafka's default place, renamed
     "Single data directory, used when log.dirs is unset (ADS default /tmp/ads-logs)."),
    ("log.open.files.max", I, "0", NONNEG, MEDIUM,
     "Most segment files the broker keeps open at once (least recently used closed "
     "first); 0: half the open-file limit."),
    ("log.segment.bytes", I, "1073741824", Range(14), HIGH,
     "Size at which the active segment is closed and a new one begun."),
    ("log.roll.ms", L, None, None, HIGH,
     "Age at which the active segment is rolled; log.roll.hours is used when unset."),
    ("log.roll.hours", I, "168", POS, HIGH, "Segment roll age in hours, below log.roll.ms."),
    ("log.roll.jitter.ms", L, None, None, HIGH,
     "Random amount taken off the roll age so segments do not all roll at once."),
    ("log.roll.jitter.hours", I, "0", NONNEG, HIGH,
     "Roll jitter in hours, below log.roll.jitter.ms."),
    ("log.retention.ms", L, None, None, HIGH,
     "Age after which segments are deleted; -1 keeps them forever. Wins over minutes/hours."),
    ("log.retention.minutes", I, None, None, HIGH,
     "Retention age in minutes, used when log.retention.ms is unset."),
    ("log.retention.hours", I, "168", None, HIGH,
     "Retention age in hours, used when neither ms nor minutes is set."),
    ("log.retention.bytes", L, "-1", None, HIGH,
     "Size a partition may reach before old segments are deleted; -1 means no limit."),
    ("log.retention.check.interval.ms", L, "300000", POS, MEDIUM,
     "How often logs are checked for segments to delete."),
    ("log.cleanup.policy", LI, "delete", ListOf(CLEANUP_POLICIES), MEDIUM,
     "What happens to old segments: delete, compact, or both."),
    ("log.segment.delete.delay.ms", L, "60000", NONNEG, HIGH,
     "Time a deleted segment's files stay on disk, renamed .deleted, before removal."),
    ("log.index.interval.bytes", I, "4096", NONNEG, MEDIUM,
     "Bytes appended between two offset index entries."),
    ("log.index.size.max.bytes", I, "10485760", Range(4), MEDIUM,
     "Largest offset or time index file; a full index rolls the segment."),
    ("log.preallocate", B, "false", None, MEDIUM,
     "Allocate segment files at full size when they are created."),
    ("log.flush.interval.messages", L, LMAX, POS, HIGH,
     "Messages appended to a partition between forced fsyncs."),
    ("log.flush.interval.ms", L, None, None, HIGH,
     "Longest time appended data waits for fsync; log.flush.scheduler.interval.ms when unset."),
    ("log.flush.scheduler.interval.ms", L, LMAX, None, HIGH,
     "How often the flusher looks for logs due an fsync."),
    ("log.flush.offset.checkpoint.interval.ms", I, "60000", NONNEG, HIGH,
     "How often the recovery point checkpoint is written."),
    ("log.flush.start.offset.checkpoint.interval.ms", I, "60000", NONNEG, HIGH,
     "How often the log start offset checkpoint is written."),
    ("num.recovery.threads.per.data.dir", I, "1", POS, HIGH,
     "Threads per data directory that recover logs at startup."),
    ("log.message.timestamp.type", S, "CreateTime", OneOf(TIMESTAMP_TYPES), MEDIUM,
     "Whether stored timestamps are the producer's (CreateTime) or the broker's."),
    ("log.message.timestamp.difference.max.ms", L, LMAX, NONNEG, MEDIUM,
     "Deprecated: largest gap between a CreateTime timestamp and the broker clock."),
    ("log.message.timestamp.before.max.ms", L, LMAX, NONNEG, MEDIUM,
     "How far in the past a CreateTime timestamp may be."),
    ("log.message.timestamp.after.max.ms", L, LMAX, NONNEG, MEDIUM,
     "How far in the future a CreateTime timestamp may be."),
    ("log.message.downconversion.enable", B, "true", None, LOW,
     "Accepted and ignored: ADS never down-converts batches for old consumers."),
    ("log.message.format.version", S, "3.0-IV1", KafkaVersion(), MEDIUM,
     "Deprecated since Kafka 3.0; accepted and ignored: ADS writes message format v2 only."),
    ("log.local.retention.ms", L, "-2", Range(-2), MEDIUM,
     "Local retention with tiered storage; accepted, tiered storage is unsupported."),
    ("log.local.retention.bytes", L, "-2", Range(-2), MEDIUM,
     "Local size limit with tiered storage; accepted, tiered storage is unsupported."),
    ("remote.log.storage.system.enable", B, "false", None, MEDIUM,
     "Tiered storage switch; ADS does not support tiered storage and rejects true."),
    # log cleaner
    ("log.cleaner.enable", B, "true", None, MEDIUM,
     "Run the cleaner that compacts topics with cleanup.policy=compact."),
    ("log.cleaner.threads", I, "1", NONNEG, MEDIUM, "Cleaner threads."),
    ("log.cleaner.dedupe.buffer.size", L, "134217728", None, MEDIUM,
     "Memory for the key-to-offset map the cleaner builds, over all cleaner threads."),
    ("log.cleaner.io.buffer.size", I, "524288", NONNEG, MEDIUM,
     "I/O buffer memory for the cleaner, over all cleaner threads."),
    ("log.cleaner.io.buffer.load.factor", D, "0.9", None, MEDIUM,
     "How full the cleaner's key map may get."),
    ("log.cleaner.io.max.bytes.per.second", D, str(DOUBLE_MAX), None, MEDIUM,
     "Throttle on the cleaner's combined read and write rate."),
    ("log.cleaner.backoff.ms", L, "15000", NONNEG, MEDIUM,
     "Cleaner sleep when no log needs cleaning."),
    ("log.cleaner.min.cleanable.ratio", D, "0.5", Range(0, 1), MEDIUM,
     "Share of a log that must be uncleaned before it is compacted."),
    ("log.cleaner.delete.retention.ms", L, "86400000", NONNEG, MEDIUM,
     "How long tombstones survive compaction."),
    ("log.cleaner.min.compaction.lag.ms", L, "0", NONNEG, MEDIUM,
     "Minimum age before a record may be compacted away."),
    ("log.cleaner.max.compaction.lag.ms", L, LMAX, POS, MEDIUM,
     "Maximum age a record may reach before its segment must be compacted."),
    # group coordinator and offsets
    ("offsets.topic.num.partitions", I, "50", POS, HIGH,
     "Partitions of __consumer_offsets; fixed once the topic exists."),
    ("offsets.topic.replication.factor", SH, "3", POS, HIGH,
     "Replicas of __consumer_offsets."),
    ("offsets.topic.segment.bytes", I, "104857600", POS, HIGH,
     "Segment size of __consumer_offsets, kept small for quick compaction and loading."),
    ("offsets.retention.minutes", I, "10080", POS, HIGH,
     "How long committed offsets of an empty group are kept."),
    ("offsets.retention.check.interval.ms", L, "600000", POS, HIGH,
     "How often expired offsets are looked for."),
    ("offsets.commit.timeout.ms", I, "5000", POS, HIGH,
     "Time an offset commit waits for its write to be replicated."),
    ("offsets.load.buffer.size", I, "5242880", POS, HIGH,
     "Read size used when loading a coordinator partition."),
    ("offset.metadata.max.bytes", I, "4096", None, HIGH,
     "Largest metadata string stored with a committed offset."),
    ("group.initial.rebalance.delay.ms", I, "3000", None, MEDIUM,
     "Time a new group waits for more members before its first rebalance."),
    ("group.min.session.timeout.ms", I, "6000", None, MEDIUM,
     "Smallest session timeout a member may ask for."),
    ("group.max.session.timeout.ms", I, "1800000", None, MEDIUM,
     "Largest session timeout a member may ask for."),
    ("group.max.size", I, IMAX, POS, MEDIUM, "Members one group may have."),
    ("group.consumer.session.timeout.ms", I, "45000", POS, MEDIUM,
     "Session timeout of members of consumer-protocol (KIP-848) groups."),
    ("group.consumer.heartbeat.interval.ms", I, "5000", POS, MEDIUM,
     "Heartbeat interval given to members of consumer-protocol groups."),
    # The range a group's own consumer.* and share.* configs may take (KIP-848, KIP-932).
    ("group.consumer.min.session.timeout.ms", I, "45000", POS, MEDIUM,
     "Smallest consumer.session.timeout.ms a consumer-protocol group may set."),
    ("group.consumer.max.session.timeout.ms", I, "60000", POS, MEDIUM,
     "Largest consumer.session.timeout.ms a consumer-protocol group may set."),
    ("group.consumer.min.heartbeat.interval.ms", I, "5000", POS, MEDIUM,
     "Smallest consumer.heartbeat.interval.ms a consumer-protocol group may set."),
    ("group.consumer.max.heartbeat.interval.ms", I, "15000", POS, MEDIUM,
     "Largest consumer.heartbeat.interval.ms a consumer-protocol group may set."),
    ("group.share.min.session.timeout.ms", I, "45000", POS, MEDIUM,
     "Smallest share.session.timeout.ms a share group may set."),
    ("group.share.max.session.timeout.ms", I, "60000", POS, MEDIUM,
     "Largest share.session.timeout.ms a share group may set."),
    ("group.share.min.heartbeat.interval.ms", I, "5000", POS, MEDIUM,
     "Smallest share.heartbeat.interval.ms a share group may set."),
    ("group.share.max.heartbeat.interval.ms", I, "15000", POS, MEDIUM,
     "Largest share.heartbeat.interval.ms a share group may set."),
    ("group.share.min.record.lock.duration.ms", I, "15000", POS, MEDIUM,
     "Smallest share.record.lock.duration.ms a share group may set."),
    ("group.share.max.record.lock.duration.ms", I, "60000", POS, MEDIUM,
     "Largest share.record.lock.duration.ms a share group may set."),
    ("group.share.min.delivery.count.limit", I, "2", POS, MEDIUM,
     "Smallest share.delivery.count.limit a share group may set."),
    ("group.share.max.delivery.count.limit", I, "10", POS, MEDIUM,
     "Largest share.delivery.count.limit a share group may set."),
    ("group.share.min.partition.max.record.locks", I, "100", POS, MEDIUM,
     "Smallest share.partition.max.record.locks a share group may set."),
    ("group.share.max.partition.max.record.locks", I, "4000", POS, MEDIUM,
     "Largest share.partition.max.record.locks a share group may set."),
    ("group.consumer.max.size", I, IMAX, POS, MEDIUM,
     "Members one consumer-protocol group may have."),
    ("group.consumer.assignors", LI, "uniform,range", ListOf(("uniform", "range")), MEDIUM,
     "Server-side assignors of consumer-protocol groups; the first is the default."),
    # share groups (KIP-932): served by default, as Kafka 4.2+ clusters do
    ("group.share.enable", B, "true", None, MEDIUM,
     "Serve share groups (KIP-932) and their APIs; false leaves them out of ApiVersions."),
    ("group.share.session.timeout.ms", I, "45000", Range(1), MEDIUM,
     "Session timeout of share group members."),
    ("group.share.heartbeat.interval.ms", I, "5000", Range(1), MEDIUM,
     "Heartbeat interval given to share group members."),
    ("group.share.max.size", SH, "200", Range(1, 1000), MEDIUM,
     "Members one share group may have."),
    ("group.share.record.lock.duration.ms", I, "30000", Range(1000, 3600000), MEDIUM,
     "How long a share consumer holds the records it acquired before they are released."),
    ("group.share.delivery.count.limit", I, "5", Range(2, 10), MEDIUM,
     "Deliveries of a record to share consumers before it is archived."),
    ("group.share.partition.max.record.locks", I, "2000", Range(100, 10000), MEDIUM,
     "Records of one partition a share group may have in flight."),
    ("group.share.auto.offset.reset", S, "latest", OneOf(("latest", "earliest")), MEDIUM,
     "Where share groups start on a partition they have no state for "
     "(share.auto.offset.reset)."),
    # the share coordinator (KIP-932): share-partitions' state in __share_group_state
    ("share.coordinator.state.topic.num.partitions", I, "50", POS, HIGH,
     "Partitions of __share_group_state."),
    ("share.coordinator.state.topic.replication.factor", SH, "3", POS, HIGH,
     "Replicas of __share_group_state."),
    ("share.coordinator.state.topic.min.isr", SH, "2", POS, HIGH,
     "min.insync.replicas of __share_group_state."),
    ("share.coordinator.state.topic.segment.bytes", I, "104857600", POS, HIGH,
     "Segment size of __share_group_state."),
    ("share.coordinator.load.buffer.size", I, "5242880", POS, HIGH,
     "Read size used when loading a __share_group_state partition."),
    ("share.coordinator.snapshot.update.records.per.snapshot", I, "500", Range(0, 500), MEDIUM,
     "ShareUpdate records of a share-partition before the next ShareSnapshot."),
    ("share.coordinator.state.topic.prune.interval.ms", I, "300000", POS, MEDIUM,
     "How often the records of __share_group_state no longer needed are deleted."),
    # transactions and producer ids
    ("transactional.id.expiration.ms", I, "604800000", POS, HIGH,
     "Idle time after which a transactional id's state is dropped."),
    ("transaction.max.timeout.ms", I, "900000", POS, HIGH,
     "Largest transaction timeout a producer may ask for."),
    ("transaction.state.log.num.partitions", I, "50", POS, HIGH,
     "Partitions of __transaction_state."),
    ("transaction.state.log.replication.factor", SH, "3", POS, HIGH,
     "Replicas of __transaction_state."),
    ("transaction.state.log.min.isr", I, "2", POS, HIGH,
     "min.insync.replicas of __transaction_state."),
    ("transaction.state.log.segment.bytes", I, "104857600", POS, HIGH,
     "Segment size of __transaction_state."),
    ("transaction.state.log.load.buffer.size", I, "5242880", POS, HIGH,
     "Read size used when loading a __transaction_state partition."),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, "10000", POS, LOW,
     "How often timed-out transactions are looked for and aborted."),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", I, "3600000", POS, LOW,
     "How often expired transactional ids are removed."),
    ("producer.id.expiration.ms", I, "86400000", POS, LOW,
     "Idle time after which a producer id's sequence state is dropped."),
    ("producer.id.expiration.check.interval.ms", I, "600000", POS, LOW,
     "How often expired producer ids are looked for."),
    # replication
    ("replica.lag.time.max.ms", L, "30000", None, HIGH,
     "A follower that has not caught up within this time leaves the ISR."),
    ("replica.fetch.max.bytes", I, "1048576", NONNEG, MEDIUM,
     "Bytes a follower asks for per partition."),
    ("replica.fetch.response.max.bytes", I, "10485760", NONNEG, MEDIUM,
     "Bytes a follower asks for per fetch."),
    ("replica.fetch.min.bytes", I, "1", None, HIGH, "Bytes a follower fetch waits for."),
    ("replica.fetch.wait.max.ms", I, "500", None, MEDIUM,
     "Longest wait of a follower fetch; below replica.lag.time.max.ms."),
    ("replica.fetch.backoff.ms", I, "1000", NONNEG, MEDIUM,
     "Pause after a failed follower fetch."),
    ("num.replica.fetchers", I, "1", None, HIGH, "Follower fetchers per source broker."),
    ("replica.high.watermark.checkpoint.interval.ms", L, "5000", None, HIGH,
     "How often high watermarks are checkpointed."),
    # security
    ("authorizer.class.name", S, "", OneOf(("", "kafka.security.authorizer.AclAuthorizer",
                                             "org.apache.kafka.metadata.authorizer."
                                             "StandardAuthorizer")), LOW,
     "Authorizer to use (either of Kafka's ACL authorizers); empty allows every request."),
    ("super.users", S, "", None, LOW,
     "Principals allowed everything, separated by semicolons (User:admin;User:broker)."),
    ("allow.everyone.if.no.acl.found", B, "false", None, LOW,
     "Whether a resource no ACL names is open to everyone (with an authorizer)."),
    ("sasl.enabled.mechanisms", LI, "GSSAPI", None, MEDIUM,
     "SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."),
    ("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", None, MEDIUM,
     "SASL mechanism brokers use with each other on a SASL inter-broker listener "
     "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."),
    ("sasl.jaas.config", P, None, None, MEDIUM,
     "JAAS login module line; usually prefixed listener.name.<listener>.<mechanism>."),
    ("sasl.server.max.receive.size", I, "524288", POS, LOW,
     "Largest request frame accepted before a SASL connection has authenticated."),
    ("connections.max.reauth.ms", L, "0", NONNEG, MEDIUM,
     "SASL session lifetime: a connection must re-authenticate within it; 0: unlimited."),
    ("connection.failed.authentication.delay.ms", I, "100", NONNEG, LOW,
     "Delay before answering a failed authentication and closing the connection."),
    # ADS's own: Kafka reads this JVM system property (-Djava.security.auth.login.config)
    ("java.security.auth.login.config", S, None, None, LOW,
     "JAAS file with KafkaServer / <listener>.KafkaServer sections (SASL users)."),
    ("ssl.client.auth", S, "none", OneOf(("required", "requested", "none")), MEDIUM,
     "Whether TLS listeners ask clients for a certificate (mTLS)."),
    ("ssl.enabled.protocols", LI, "TLSv1.2,TLSv1.3", ListOf(TLS_VERSIONS), MEDIUM,
     "TLS versions allowed."),
    ("ssl.cipher.suites", LI, "", None, LOW,
     "TLS 1.2 cipher suites allowed (IANA or OpenSSL names); empty allows OpenSSL's default."),
    ("ssl.endpoint.identification.algorithm", S, "https", None, LOW,
     "Host name checking of other brokers' certificates; empty turns it off."),
    ("ssl.keystore.type", S, "JKS", None, MEDIUM,
     "Format of the key store; ADS reads PEM only (set PEM with ssl.keystore.location)."),
    ("ssl.keystore.location", S, None, None, HIGH,
     "PEM file holding this broker's private key and certificate chain."),
    ("ssl.keystore.password", P, None, None, HIGH, "Password of a JKS or PKCS12 key store."),
    ("ssl.keystore.certificate.chain", P, None, None, HIGH,
     "This broker's certificate chain as PEM text."),
    ("ssl.keystore.key", P, None, None, HIGH, "This broker's private key as PEM text."),
    ("ssl.key.password", P, None, None, HIGH, "Password of an encrypted private key."),
    ("ssl.truststore.type", S, "JKS", None, MEDIUM,
     "Format of the trust store; ADS reads PEM only."),
    ("ssl.truststore.location", S, None, None, HIGH,
     "PEM file of the certificate authorities trusted for peers' certificates."),
    ("ssl.truststore.certificates", P, None, None, HIGH,
     "Trusted certificate authorities as PEM text."),
    ("ssl.truststore.password", P, None, None, HIGH, "Password of a JKS or PKCS12 trust store."),
    ("ssl.principal.mapping.rules", S, "DEFAULT", None, LOW,
     "Rules mapping a client certificate's subject to the principal's name."),
)

TOPIC_CONFIG_DEFS: dict[str, ConfigDef] = _table(
    ("cleanup.policy", LI, "delete", ListOf(CLEANUP_POLICIES), MEDIUM,
     "delete drops old segments, compact keeps the latest record per key; both may be set."),
    ("compression.type", S, "producer", OneOf(COMPRESSION_TYPES), MEDIUM,
     "Codec this topic's batches are stored with; producer keeps the producer's codec."),
    ("compression.gzip.level", I, "-1", GZIP_LEVEL, MEDIUM, "gzip level for this topic."),
    ("compression.lz4.level", I, "9", LZ4_LEVEL, MEDIUM, "lz4 level for this topic."),
    ("compression.zstd.level", I, "3", ZSTD_LEVEL, MEDIUM, "zstd level for this topic."),
    ("delete.retention.ms", L, "86400000", NONNEG, MEDIUM,
     "How long tombstones survive compaction of this topic."),
    ("file.delete.delay.ms", L, "60000", NONNEG, MEDIUM,
     "Time a deleted segment's files stay on disk before removal."),
    ("flush.messages", L, LMAX, POS, MEDIUM, "Messages appended between forced fsyncs."),
    ("flush.ms", L, LMAX, NONNEG, MEDIUM, "Longest time appended data waits for fsync."),
    ("follower.replication.throttled.replicas", LI, "", None, MEDIUM,
     "Replicas throttled on the follower side; accepted, throttling is not enforced."),
    ("leader.replication.throttled.replicas", LI, "", None, MEDIUM,
     "Replicas throttled on the leader side; accepted, throttling is not enforced."),
    ("index.interval.bytes", I, "4096", NONNEG, MEDIUM,
     "Bytes appended between two offset index entries."),
    ("local.retention.bytes", L, "-2", Range(-2), MEDIUM,
     "Local size limit with tiered storage; accepted, tiered storage is unsupported."),
    ("local.retention.ms", L, "-2", Range(-2), MEDIUM,
     "Local retention with tiered storage; accepted, tiered storage is unsupported."),
    ("max.compaction.lag.ms", L, LMAX, POS, MEDIUM,
     "Maximum age a record may reach before its segment must be compacted."),
    ("max.message.bytes", I, "1048588", NONNEG, MEDIUM,
     "Largest record batch this topic accepts, after compression."),
    ("message.downconversion.enable", B, "true", None, LOW,
     "Deprecated; accepted and ignored: ADS never down-converts batches."),
    ("message.format.version", S, "3.0-IV1", KafkaVersion(), MEDIUM,
     "Deprecated since Kafka 3.0; accepted and ignored: ADS writes message format v2 only."),
    ("message.timestamp.after.max.ms", L, LMAX, NONNEG, MEDIUM,
     "How far in the future a CreateTime timestamp may be."),
    ("message.timestamp.before.max.ms", L, LMAX, NONNEG, MEDIUM,
     "How far in the past a CreateTime timestamp may be."),
    ("message.timestamp.difference.max.ms", L, LMAX, NONNEG, MEDIUM,
     "Deprecated: largest gap between a CreateTime timestamp and the broker clock."),
    ("message.timestamp.type", S, "CreateTime", OneOf(TIMESTAMP_TYPES), MEDIUM,
     "Whether stored timestamps are the producer's (CreateTime) or the broker's."),
    ("min.cleanable.dirty.ratio", D, "0.5", Range(0, 1), MEDIUM,
     "Share of the log that must be uncleaned before it is compacted."),
    ("min.compaction.lag.ms", L, "0", NONNEG, MEDIUM,
     "Minimum age before a record may be compacted away."),
    ("min.insync.replicas", I, "1", POS, MEDIUM,
     "In-sync replicas needed for an acks=all write to succeed."),
    ("preallocate", B, "false", None, MEDIUM,
     "Allocate segment files at full size when they are created."),
    ("remote.storage.enable", B, "false", None, MEDIUM,
     "Tiered storage switch; unsupported, so only false is accepted."),
    ("retention.bytes", L, "-1", None, MEDIUM,
     "Size a partition may reach before old segments are deleted; -1 means no limit."),
    ("retention.ms", L, "604800000", Range(-1), MEDIUM,
     "Age after which segments are deleted; -1 keeps them forever."),
    ("segment.bytes", I, "1073741824", Range(14), MEDIUM,
     "Size at which the active segment is rolled."),
    ("segment.index.bytes", I, "10485760", Range(4), MEDIUM,
     "Largest offset or time index file of a segment."),
    ("segment.jitter.ms", L, "0", NONNEG, MEDIUM,
     "Random amount taken off segment.ms so segments do not all roll at once."),
    ("segment.ms", L, "604800000", POS, MEDIUM, "Age at which the active segment is rolled."),
    ("unclean.leader.election.enable", B, "false", None, MEDIUM,
     "Allow an out-of-sync replica to become leader, at the price of losing data."),
)

# Broker keys that together give one value, in priority order, with the factor that converts
# each into the first key's unit. The first key with a value (set, or a default) wins.
BROKER_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                         ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "log.roll.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "log.flush.interval.ms": (("log.flush.interval.ms", 1),
                              ("log.flush.scheduler.interval.ms", 1)),
    "node.id": (("node.id", 1), ("broker.id", 1)),
}
SYNONYM_GROUP: dict[str, str] = {
    name: primary for primary, group in BROKER_SYNONYMS.items() for name, _ in group}

# Topic key -> the broker key that supplies its default (Kafka's "Server Default Property").
TOPIC_TO_BROKER: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
}

TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(TOPIC_CONFIG_DEFS)

# Broker keys a running broker takes from dynamic configs (KIP-226): those that supply a
# topic config's default, with their synonyms (log.retention.hours ...), as Kafka's. The
# flush scheduler's interval shares a synonym group with log.flush.interval.ms but is read
# once, at start.
DYNAMIC_KEYS: frozenset[str] = frozenset(
    name for key in TOPIC_TO_BROKER.values()
    for name, _ in BROKER_SYNONYMS.get(SYNONYM_GROUP.get(key, key), ((key, 1),))
    if name != "log.flush.scheduler.interval.ms")

# Deprecated topic keys Kafka 3.x accepts and ignores (all gone in Kafka 4.0): stored and
# described like any other, without effect; setting one is logged once per topic.
# (message.timestamp.difference.max.ms is deprecated too, but still acts, as in Kafka.)
DEPRECATED_TOPIC_KEYS: dict[str, str] = {
    "message.format.version": "ADS writes message format v2 only",
    "message.downconversion.enable": "ADS never down-converts batches for older clients",
}


# Every key ADS accepts without acting on it, and why; the README's table "Accepted without
# effect" lists exactly these (tests/broker/test_config_no_effect.py holds both). Every other
# defined key acts as in Kafka.
_THROTTLE = "replication is not throttled"
_TIERED = "tiered storage is not supported"
_PEM_ONLY = "ADS reads PEM key and trust stores only (JKS and PKCS12 are refused)"
NO_EFFECT_BROKER_KEYS: dict[str, str] = {
    "num.network.threads": "one asyncio event loop serves every connection",
    "num.io.threads": "requests are handled on the event loop; disk waits go to worker threads",
    "queued.max.requests": "not enforced: each connection's requests are answered in order, "
                           "one at a time",
    "socket.send.buffer.bytes": "the operating system's socket buffer sizes are kept",
    "socket.receive.buffer.bytes": "the operating system's socket buffer sizes are kept",
    "log.preallocate": "segment files grow as they are written",
    "log.flush.start.offset.checkpoint.interval.ms": "the log start offset checkpoint is "
                                                     "written with the recovery point "
                                                     "checkpoint",
    "num.recovery.threads.per.data.dir": "recovery after an unclean shutdown runs in one "
                                         "thread",
    "log.message.downconversion.enable": "ADS never down-converts batches for older clients",
    "log.message.format.version": "deprecated; ADS writes message format v2 only",
    "log.local.retention.ms": _TIERED,
    "log.local.retention.bytes": _TIERED,
    "remote.log.storage.system.enable": _TIERED + " (true is refused)",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "a transaction open past its timeout is aborted at that deadline by a timer, not by "
        "a periodic scan"),
    "replica.high.watermark.checkpoint.interval.ms": "the high watermark is checkpointed with "
                                                     "the recovery point, every "
                                                     "log.flush.offset.checkpoint.interval.ms",
    "ssl.keystore.password": _PEM_ONLY,
    "ssl.truststore.password": _PEM_ONLY,
}
NO_EFFECT_TOPIC_KEYS: dict[str, str] = {
    "follower.replication.throttled.replicas": _THROTTLE,
    "leader.replication.throttled.replicas": _THROTTLE,
    "local.retention.bytes": _TIERED,
    "local.retention.ms": _TIERED,
    "message.downconversion.enable": "deprecated; ADS never down-converts batches",
    "message.format.version": "deprecated; ADS writes message format v2 only",
    "preallocate": "segment files grow as they are written",
    "remote.storage.enable": _TIERED + " (true is refused)",
}
