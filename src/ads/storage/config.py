"""Topic-level log configuration, with Kafka's defaults and meanings.

Each field is the Kafka topic config key with dots turned into underscores
(``segment.bytes`` -> ``segment_bytes``); the broker maps ``server.properties`` defaults
(``log.segment.bytes``...) and per-topic overrides onto it. Times are milliseconds, sizes bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["LONG_MAX", "LogConfig"]

LONG_MAX = 9223372036854775807
_MIN_INFLATED_BYTES = 64 << 20
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES = frozenset({"delete", "compact"})


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    retention_ms: int = 604800000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX  # deprecated; see the properties
    cleanup_policy: tuple[str, ...] = ("delete",)
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    unclean_leader_election_enable: bool = False
    preallocate: bool = False

    def __post_init__(self) -> None:
        # Kafka's ConfigDef lower bounds; a config that breaks them never reaches a log.
        _at_least("segment.bytes", self.segment_bytes, 14)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.jitter.ms", self.segment_jitter_ms, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("segment.index.bytes", self.segment_index_bytes, 4)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        _at_least("message.timestamp.before.max.ms", self.message_timestamp_before_max_ms, 0)
        _at_least("message.timestamp.after.max.ms", self.message_timestamp_after_max_ms, 0)
        _at_least("message.timestamp.difference.max.ms",
                  self.message_timestamp_difference_max_ms, 0)
        _at_least("file.delete.delay.ms", self.file_delete_delay_ms, 0)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        _at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)
        _at_least("min.insync.replicas", self.min_insync_replicas, 1)
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise ValueError(
                f"message.timestamp.type must be one of {_TIMESTAMP_TYPES}, "
                f"not {self.message_timestamp_type!r}"
            )
        if not self.cleanup_policy or not set(self.cleanup_policy) <= _CLEANUP_POLICIES:
            raise ValueError(f"invalid cleanup.policy {self.cleanup_policy!r}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min.cleanable.dirty.ratio must be between 0 and 1")

    @property
    def max_inflated_bytes(self) -> int:
        """How far a compressed batch may inflate where the broker must read inside it
        (keys of a compacted topic, recompression, the cleaner, a timestamp lookup): 16
        times ``max.message.bytes``, at least 64 MiB. Past it the batch counts as corrupt,
        so a decompression bomb costs a bounded amount of memory."""
        return max(_MIN_INFLATED_BYTES, 16 * self.max_message_bytes)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far in the past a CreateTime timestamp may be. As in Kafka, the deprecated
        ``message.timestamp.difference.max.ms`` applies while this bound is left at its
        default."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far in the future a CreateTime timestamp may be (same fallback)."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def compression_level(self) -> int | None:
        """The KIP-390 level of the topic's codec (None: the codec has none, or `producer`
        or `uncompressed`)."""
        return {"gzip": self.compression_gzip_level, "lz4": self.compression_lz4_level,
                "zstd": self.compression_zstd_level}.get(self.compression_type)

    def with_overrides(self, **changes: Any) -> LogConfig:
        """A copy with some fields changed, validated again."""
        return dataclasses.replace(self, **changes)


def _at_least(key: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ValueError(f"{key} must be at least {minimum}, not {value}")
