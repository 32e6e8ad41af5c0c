"""CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6, CreatePartitions (key 37) v0-3.

One broker: a replication factor above 1 is refused with INVALID_REPLICATION_FACTOR and
explicit assignments may only name this broker. Topic configs are validated against
Kafka's topic config keys; `validate_only` checks everything and creates nothing.
CreateTopics and CreatePartitions record the change in the metadata at once (a second
request for the same topic sees it) and answer once the new partitions' files, made off
the event loop, are served.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import TypeVar

from ads.broker import config as bconfig
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.model import InvalidTopicError, TopicState, validate_topic_name
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.broker.topics")
T = TypeVar("T")


async def _after_opening(ctx: RequestContext, topics: list[TopicState], response: T) -> T:
    await asyncio.gather(*(ctx.broker.open_new(t) for t in topics))
    return response


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check_new_topic(ctx: RequestContext, t: m.CreateTopicsRequest.CreatableTopic
                     ) -> tuple[int, dict[str, str]]:
    broker = ctx.broker
    try:
        validate_topic_name(t.name)
    except InvalidTopicError as exc:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from exc
    if t.name in broker.metadata.topics:
        raise _Refused(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise _Refused(ErrorCode.INVALID_REQUEST,
                           "Both numPartitions or replicationFactor and replicasAssignments "
                           "were set. Both cannot be used at the same time.")
        for a in t.assignments:
            if list(a.broker_ids) != [broker.node_id]:
                raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Replica assignment {list(a.broker_ids)} names brokers that "
                               f"do not exist; the only broker is {broker.node_id}")
        num_partitions = len(t.assignments)
    else:
        num_partitions = (broker.config.get_int("num.partitions") if t.num_partitions == -1
                          else t.num_partitions)
        rf = (broker.config.get_int("default.replication.factor")
              if t.replication_factor == -1 else t.replication_factor)
        if num_partitions <= 0:
            raise _Refused(ErrorCode.INVALID_PARTITIONS,
                           "Number of partitions must be larger than 0.")
        if rf <= 0:
            raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           "Replication factor must be larger than 0.")
        if rf > 1:
            raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"Unable to replicate the partition {rf} time(s): The target "
                           f"replication factor of {rf} cannot be reached because only 1 "
                           "broker(s) are registered.")
    configs: dict[str, str] = {}
    for c in t.configs:
        if c.value is not None:
            configs[c.name] = c.value
    try:
        bconfig.validate_topic_configs(dict(configs))
    except bconfig.ConfigError as exc:
        raise _Refused(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return num_partitions, configs


def handle_create_topics(ctx: RequestContext, req: m.CreateTopicsRequest
                         ) -> m.CreateTopicsResponse | Awaitable[m.CreateTopicsResponse]:
    broker = ctx.broker
    R = m.CreateTopicsResponse  # noqa: N806
    results = []
    created: list[TopicState] = []
    seen: set[str] = set()
    for t in req.topics:
        res = R.CreatableTopicResult(name=t.name, error_code=ErrorCode.NONE, error_message=None,
                                     num_partitions=-1, replication_factor=-1, configs=None)
        if t.name in seen:
            res.error_code = ErrorCode.INVALID_REQUEST
            res.error_message = f"Create topics request from client contains {t.name} twice"
            results.append(res)
            continue
        seen.add(t.name)
        try:
            num_partitions, configs = _check_new_topic(ctx, t)
        except _Refused as exc:
            res.error_code, res.error_message = exc.code, exc.message
            results.append(res)
            continue
        if not req.validate_only:
            topic = broker.record_topic(t.name, num_partitions, configs)
            created.append(topic)
            res.topic_id = topic.topic_id
        res.num_partitions = num_partitions
        res.replication_factor = 1
        res.configs = [
            R.CreatableTopicResult.CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                is_sensitive=e.sensitive)
            for e in bconfig.describe_topic_configs(broker.config, configs)
        ]
        results.append(res)
    response = m.CreateTopicsResponse(throttle_time_ms=0, topics=results)
    return _after_opening(ctx, created, response) if created else response


def handle_delete_topics(ctx: RequestContext, req: m.DeleteTopicsRequest
                         ) -> m.DeleteTopicsResponse:
    broker = ctx.broker
    R = m.DeleteTopicsResponse  # noqa: N806
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    results = []
    for name, topic_id in wanted:
        res = R.DeletableTopicResult(name=name, error_code=ErrorCode.NONE)
        if name is None and topic_id is not None:
            state = broker.metadata.topic_by_id(topic_id)
            if state is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                res.topic_id = topic_id
                results.append(res)
                continue
            name = state.name
        res.name = name
        state = broker.metadata.topics.get(name or "")
        if state is None:
            res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif not broker.config.get("delete.topic.enable"):
            res.error_code = ErrorCode.TOPIC_DELETION_DISABLED
        else:
            res.topic_id = state.topic_id
            broker.delete_topic(state.name)
        results.append(res)
    return m.DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def handle_create_partitions(
        ctx: RequestContext, req: m.CreatePartitionsRequest,
) -> m.CreatePartitionsResponse | Awaitable[m.CreatePartitionsResponse]:
    broker = ctx.broker
    R = m.CreatePartitionsResponse  # noqa: N806
    results = []
    grown: list[TopicState] = []
    for t in req.topics:
        res = R.CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.NONE)
        state = broker.metadata.topics.get(t.name)
        current = len(state.partitions) if state else 0
        if state is None:
            res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif t.count <= current:
            res.error_code = ErrorCode.INVALID_PARTITIONS
            res.error_message = (f"Topic currently has {current} partitions, which is higher "
                                 f"than the requested {t.count}." if t.count < current else
                                 f"Topic already has {current} partitions.")
        elif t.assignments is not None and (
                len(t.assignments) != t.count - current
                or any(list(a.broker_ids) != [broker.node_id] for a in t.assignments)):
            res.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
            res.error_message = (f"Assignments must name one replica, broker {broker.node_id}, "
                                 f"for each of the {t.count - current} new partitions")
        elif not req.validate_only:
            grown.append(broker.record_partitions(t.name, t.count))
        results.append(res)
    response = m.CreatePartitionsResponse(throttle_time_ms=0, results=results)
    return _after_opening(ctx, grown, response) if grown else response


HANDLERS = [
    ApiHandler(m.ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics),
    ApiHandler(m.ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics),
    ApiHandler(m.ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions),
]
