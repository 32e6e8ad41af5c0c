"""The broker's configuration mapped onto the settings of the parts it wires together.

`log_config_from` turns a topic's effective configuration (Kafka's topic keys, typed and
resolved over the broker's defaults by `config.effective_topic_config`) into the log's
`LogConfig`; `cleaner_config_from`, `group_config`, `txn_config`, `fetcher_config` and
`request_settings` read the broker's `log.cleaner.*`, `group.*` / `offsets.*`,
`transaction*`, `replica.fetch.*` keys and those request handlers use. Every value is
read through the typed accessors of `ads.broker.config`, which raise TypeError naming a key
whose definition has another type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ads.broker.config import BrokerConfig, as_float, as_int, as_str_list
from ads.coordinator.group.api import GroupConfig
from ads.coordinator.transaction.shard import TxnConfig
from ads.replication.fetcher import FetcherConfig
from ads.replication.share_partition import ShareConfig
from ads.storage.cleaner import CleanerConfig
from ads.storage.config import LogConfig


def log_config_from(effective: Mapping[str, object]) -> LogConfig:
    """Maps Kafka's topic config keys (typed, fully resolved) onto the log's settings."""

    def num(key: str) -> int:
        return as_int(effective[key], key)

    return LogConfig(
        segment_bytes=num("segment.bytes"),
        segment_ms=num("segment.ms"),
        segment_jitter_ms=num("segment.jitter.ms"),
        segment_index_bytes=num("segment.index.bytes"),
        retention_ms=num("retention.ms"),
        retention_bytes=num("retention.bytes"),
        index_interval_bytes=num("index.interval.bytes"),
        flush_messages=num("flush.messages"),
        flush_ms=num("flush.ms"),
        max_message_bytes=num("max.message.bytes"),
        message_timestamp_type=str(effective["message.timestamp.type"]),
        compression_type=str(effective["compression.type"]),
        compression_gzip_level=num("compression.gzip.level"),
        compression_lz4_level=num("compression.lz4.level"),
        compression_zstd_level=num("compression.zstd.level"),
        message_timestamp_before_max_ms=num("message.timestamp.before.max.ms"),
        message_timestamp_after_max_ms=num("message.timestamp.after.max.ms"),
        message_timestamp_difference_max_ms=num("message.timestamp.difference.max.ms"),
        cleanup_policy=tuple(as_str_list(effective["cleanup.policy"], "cleanup.policy")),
        file_delete_delay_ms=num("file.delete.delay.ms"),
        min_insync_replicas=num("min.insync.replicas"),
        delete_retention_ms=num("delete.retention.ms"),
        min_compaction_lag_ms=num("min.compaction.lag.ms"),
        max_compaction_lag_ms=num("max.compaction.lag.ms"),
        min_cleanable_dirty_ratio=as_float(effective["min.cleanable.dirty.ratio"],
                                           "min.cleanable.dirty.ratio"),
    )


def cleaner_config_from(config: BrokerConfig) -> CleanerConfig:
    """The broker's ``log.cleaner.*`` settings for the log cleaner."""
    return CleanerConfig(
        enable=config.get_bool("log.cleaner.enable"),
        threads=config.get_int("log.cleaner.threads"),
        dedupe_buffer_size=config.get_int("log.cleaner.dedupe.buffer.size"),
        io_buffer_size=config.get_int("log.cleaner.io.buffer.size"),
        io_buffer_load_factor=config.get_float("log.cleaner.io.buffer.load.factor"),
        io_max_bytes_per_second=config.get_float("log.cleaner.io.max.bytes.per.second"),
        backoff_ms=config.get_int("log.cleaner.backoff.ms"),
    )


def group_config(config: BrokerConfig) -> GroupConfig:
    """The group coordinator's settings from the broker's ``group.*`` and ``offsets.*``."""
    get = config.get_int
    assignors = config.get_list("group.consumer.assignors") or ["uniform", "range"]
    return GroupConfig(
        initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms"),
        min_session_timeout_ms=get("group.min.session.timeout.ms"),
        max_session_timeout_ms=get("group.max.session.timeout.ms"),
        max_size=get("group.max.size"),
        offsets_retention_ms=get("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=get("offset.metadata.max.bytes"),
        consumer_session_timeout_ms=get("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms"),
        consumer_max_size=get("group.consumer.max.size"),
        # Kafka names assignors by class (org.apache...UniformAssignor); we by short name.
        consumer_assignors=tuple(a.rsplit(".", 1)[-1].lower().removesuffix("assignor")
                                 for a in assignors),
        share_session_timeout_ms=get("group.share.session.timeout.ms"),
        share_heartbeat_interval_ms=get("group.share.heartbeat.interval.ms"),
        share_max_size=get("group.share.max.size"),
    )


def share_config(config: BrokerConfig) -> ShareConfig:
    """The share-partitions' settings from the broker's ``group.share.*`` keys."""
    return ShareConfig(
        record_lock_duration_ms=config.get_int("group.share.record.lock.duration.ms"),
        delivery_count_limit=config.get_int("group.share.delivery.count.limit"),
        max_record_locks=config.get_int("group.share.partition.max.record.locks"),
    )


def txn_config(config: BrokerConfig) -> TxnConfig:
    """The transaction coordinator's settings from the broker's ``transaction*`` keys."""
    return TxnConfig(
        max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
        id_cleanup_interval_ms=config.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms"))
@dataclass(frozen=True, slots=True)
class RequestSettings:
    """What request handlers read of the broker's configuration, typed once at start-up
    rather than looked up by name on every request."""

    fetch_max_bytes: int
    num_partitions: int  # a topic created without a count (CreateTopics -1, auto-creation)
    default_replication_factor: int
    auto_create_topics: bool
    delete_topics: bool
    describe_partition_limit: int  # DescribeTopicPartitions' partitions per response


def request_settings(config: BrokerConfig) -> RequestSettings:
    get = config.get_int
    return RequestSettings(
        fetch_max_bytes=get("fetch.max.bytes"),
        num_partitions=get("num.partitions"),
        default_replication_factor=get("default.replication.factor"),
        auto_create_topics=config.get_bool("auto.create.topics.enable"),
        delete_topics=config.get_bool("delete.topic.enable"),
        describe_partition_limit=get("max.request.partition.size.limit"),
    )


def fetcher_config(config: BrokerConfig) -> FetcherConfig:
    """The replica fetchers' settings from the broker's ``replica.fetch.*`` keys."""
    get = config.get_int
    return FetcherConfig(
        partition_max_bytes=get("replica.fetch.max.bytes"),
        response_max_bytes=get("replica.fetch.response.max.bytes"),
        min_bytes=get("replica.fetch.min.bytes"),
        wait_max_ms=get("replica.fetch.wait.max.ms"),
        backoff_ms=get("replica.fetch.backoff.ms"),
        num_fetchers=get("num.replica.fetchers"),
        request_timeout_ms=get("request.timeout.ms"),
    )
