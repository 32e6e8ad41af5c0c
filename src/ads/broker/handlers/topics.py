"""CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6, CreatePartitions (key 37) v0-3.

Replicas are placed over the live brokers (`metadata.assignment`) unless the request
assigns them; a replication factor above the live brokers is INVALID_REPLICATION_FACTOR, an
assignment naming unknown brokers INVALID_REPLICA_ASSIGNMENT. Topic configs are validated
against Kafka's topic config keys; `validate_only` checks everything and creates nothing. A
name that differs from an existing topic's only by '.' against '_' is refused with
INVALID_TOPIC_EXCEPTION, as Kafka does (their metric names would be the same).
CreateTopics and CreatePartitions record the change in the metadata (a second request for
the same topic sees it) and answer once the new partitions are served: their files here
made off the event loop, and every partition led. A topic or new partitions that cannot be
recorded (the embedded metadata's file cannot be written on a full disk) are answered
KAFKA_STORAGE_ERROR with nothing changed. A topic whose files cannot be made here (a full
disk, no inodes or file descriptors left) is removed again and answered
KAFKA_STORAGE_ERROR: it is created whole or not at all. New partitions recorded whose files
cannot be made stay recorded, as Kafka's would, and are answered KAFKA_STORAGE_ERROR.
DeleteTopics answers once this broker sees the topic gone.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping

from ads.broker import config as bconfig
from ads.broker import permissions as P
from ads.broker.context import BrokerContext
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.topic_admin import STORAGE_FAILURES
from ads.metadata.acl import CLUSTER_NAME
from ads.metadata.assignment import AssignmentError, assign_replicas, check_manual_assignment
from ads.metadata.model import (
    BrokerEndpoint,
    InvalidTopicError,
    TopicState,
    colliding_topic,
    validate_topic_name,
)
from ads.metadata.store import MetadataRequestError, TopicExistsError
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.replication.partition import PartitionError
from ads.storage.errors import StorageError

log = logging.getLogger("ads.broker.topics")
# DeleteTopics by id: a topic the principal may not describe keeps its name hidden.
T_DESCRIBE = P.DESCRIBE_TOPIC


async def _open(ctx: RequestContext, topics: list[TopicState]
                ) -> dict[str, OSError | StorageError]:
    """Serves the new partitions of `topics`; the storage failure of each topic whose files
    could not be made (a full disk, no inodes or descriptors left; `TopicAdmin` logs it)."""
    outcomes = await asyncio.gather(*(ctx.broker.topics.open_new(t) for t in topics),
                                    return_exceptions=True)
    failed: dict[str, OSError | StorageError] = {}
    for topic, outcome in zip(topics, outcomes, strict=True):
        if isinstance(outcome, STORAGE_FAILURES):
            failed[topic.name] = outcome
        elif isinstance(outcome, BaseException):
            raise outcome
    return failed


def _storage_refusal(exc: OSError | StorageError) -> tuple[ErrorCode, str]:
    return PartitionError.of(exc).code, f"Could not be written: {exc}"


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _NewTopic:
    def __init__(self, assignment: Mapping[int, list[int]], configs: dict[str, str]) -> None:
        self.assignment = assignment
        self.configs = configs
        self.replication_factor = len(next(iter(assignment.values()), []))


def _check_new_name(broker: BrokerContext, name: str) -> None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from exc
    if name in broker.metadata.topics:
        raise _Refused(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    collides = colliding_topic(name, broker.metadata.topics)
    if collides is not None:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic '{name}' collides with existing topic: {collides}")


def _check_new_topic(ctx: RequestContext, t: m.CreateTopicsRequest.CreatableTopic
                     ) -> _NewTopic:
    broker = ctx.broker
    _check_new_name(broker, t.name)
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise _Refused(ErrorCode.INVALID_REQUEST,
                           "Both numPartitions or replicationFactor and replicasAssignments "
                           "were set. Both cannot be used at the same time.")
        indexes = sorted(a.partition_index for a in t.assignments)
        if indexes != list(range(len(indexes))):
            raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "Partitions should be a consecutive 0-based integer sequence")
        why = check_manual_assignment([list(a.broker_ids) for a in t.assignments],
                                      list(broker.metadata.brokers))
        if why is not None:
            raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, why)
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
    else:
        num_partitions = (broker.settings.num_partitions if t.num_partitions == -1
                          else t.num_partitions)
        rf = (broker.settings.default_replication_factor
              if t.replication_factor == -1 else t.replication_factor)
        if num_partitions <= 0:
            raise _Refused(ErrorCode.INVALID_PARTITIONS,
                           "Number of partitions must be larger than 0.")
        try:
            assignment = assign_replicas(list(broker.metadata.brokers.values()),
                                         num_partitions, rf)
        except AssignmentError as exc:
            raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from exc
    configs: dict[str, str] = {}
    for c in t.configs:
        if c.value is not None:
            configs[c.name] = c.value
    try:
        bconfig.validate_topic_configs(dict(configs))
    except bconfig.ConfigError as exc:
        raise _Refused(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return _NewTopic(assignment, configs)


async def _record_topic(broker: BrokerContext, name: str, new: _NewTopic) -> TopicState:
    try:
        return await broker.topics.record_topic(name, len(new.assignment), new.configs,
                                                assignment=new.assignment)
    except TopicExistsError as exc:
        raise _Refused(ErrorCode.TOPIC_ALREADY_EXISTS, str(exc)) from exc
    except MetadataRequestError as exc:  # the KRaft controller refused it
        raise _Refused(ErrorCode(exc.error_code), str(exc)) from exc
    except STORAGE_FAILURES as exc:  # the metadata itself could not be written
        raise _Refused(*_storage_refusal(exc)) from exc


async def handle_create_topics(ctx: RequestContext, req: m.CreateTopicsRequest
                               ) -> m.CreateTopicsResponse:
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
        cluster_rule, topic_rule = P.CREATE_TOPICS_CLUSTER, P.CREATE_TOPICS_TOPIC
        if not (ctx.authorize(cluster_rule.resource, CLUSTER_NAME, cluster_rule.operation)
                or ctx.authorize(topic_rule.resource, t.name, topic_rule.operation)):
            res.error_code = topic_rule.error
            results.append(res)
            continue
        try:
            new = _check_new_topic(ctx, t)
            if not req.validate_only:
                topic = await _record_topic(broker, t.name, new)
                created.append(topic)
                res.topic_id = topic.topic_id
        except _Refused as exc:
            res.error_code, res.error_message = exc.code, exc.message
            results.append(res)
            continue
        configs = new.configs
        res.num_partitions = len(new.assignment)
        res.replication_factor = new.replication_factor
        rule = P.CREATE_TOPICS_CONFIGS
        if ctx.authorize(rule.resource, t.name, rule.operation):
            res.configs = [
                R.CreatableTopicResult.CreatableTopicConfigs(
                    name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                    is_sensitive=e.sensitive)
                for e in bconfig.describe_topic_configs(broker.config, configs)
            ]
        else:
            res.topic_config_error_code = rule.error
        results.append(res)
    failed = await _open(ctx, created)
    for res in results:
        if res.name in failed:  # created whole or not at all
            await broker.topics.delete_topic(res.name)
            log.error("topic %s removed again: its partitions' files could not be made",
                      res.name)
            res.error_code, res.error_message = _storage_refusal(failed[res.name])
            res.topic_id = uuid.UUID(int=0)
            res.num_partitions = res.replication_factor = -1
            res.configs = None
    return m.CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def handle_delete_topics(ctx: RequestContext, req: m.DeleteTopicsRequest
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
            if not ctx.authorize(T_DESCRIBE.resource, name, T_DESCRIBE.operation):
                res.error_code, res.topic_id = T_DESCRIBE.error, topic_id  # name withheld
                results.append(res)
                continue
        res.name = name
        if not ctx.authorize(P.DELETE_TOPICS.resource, name or "", P.DELETE_TOPICS.operation):
            res.error_code = P.DELETE_TOPICS.error
            results.append(res)
            continue
        state = broker.metadata.topics.get(name or "")
        res.error_code = await delete_topic(broker, name or "")
        if state is not None and res.error_code == ErrorCode.NONE:
            res.topic_id = state.topic_id
        results.append(res)
    return m.DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def delete_topic(broker: BrokerContext, name: str) -> ErrorCode:
    """Deletes the topic if it exists and `delete.topic.enable` allows; DeleteTopics and
    the console's delete button both come here."""
    state = broker.metadata.topics.get(name)
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not broker.settings.delete_topics:
        return ErrorCode.TOPIC_DELETION_DISABLED
    await broker.topics.delete_topic(state.name)
    return ErrorCode.NONE


async def handle_create_partitions(ctx: RequestContext, req: m.CreatePartitionsRequest
                                   ) -> m.CreatePartitionsResponse:
    broker = ctx.broker
    R = m.CreatePartitionsResponse  # noqa: N806
    results = []
    grown: list[TopicState] = []
    for t in req.topics:
        res = R.CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.NONE)
        state = broker.metadata.topics.get(t.name)
        current = len(state.partitions) if state else 0
        rule = P.CREATE_PARTITIONS
        if not ctx.authorize(rule.resource, t.name, rule.operation):
            res.error_code = rule.error
            res.error_message = "The topic authorization is failed."
        elif state is None:
            res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif t.count <= current:
            res.error_code = ErrorCode.INVALID_PARTITIONS
            res.error_message = (f"Topic currently has {current} partitions, which is higher "
                                 f"than the requested {t.count}." if t.count < current else
                                 f"Topic already has {current} partitions.")
        else:
            try:
                assignment = _new_partitions(broker.metadata.brokers.values(), state, t)
            except _Refused as exc:
                res.error_code, res.error_message = exc.code, exc.message
            else:
                if not req.validate_only:
                    try:
                        grown.append(await broker.topics.record_partitions(t.name, t.count,
                                                                           assignment))
                    except STORAGE_FAILURES as exc:  # the metadata could not be written
                        res.error_code, res.error_message = _storage_refusal(exc)
        results.append(res)
    failed = await _open(ctx, grown)
    for res in results:
        if res.name in failed:  # recorded, as Kafka's are: served where their files exist
            res.error_code, res.error_message = _storage_refusal(failed[res.name])
    return m.CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _new_partitions(brokers: Iterable[BrokerEndpoint], state: TopicState,
                    t: m.CreatePartitionsRequest.CreatePartitionsTopic
                    ) -> dict[int, list[int]]:
    current = len(state.partitions)
    rf = len(state.partitions[0].replicas) if state.partitions else 1
    live = list(brokers)
    if t.assignments is None:
        try:
            return assign_replicas(live, t.count - current, rf, first_partition=current)
        except AssignmentError as exc:
            raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from exc
    wanted = [list(a.broker_ids) for a in t.assignments]
    if len(wanted) != t.count - current:
        raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Increasing the number of partitions by {t.count - current} but "
                       f"{len(wanted)} assignments provided.")
    why = check_manual_assignment(wanted, [b.node_id for b in live])
    if why is None and any(len(r) != rf for r in wanted):
        why = f"Inconsistent replication factor between partitions, partition 0 has {rf}"
    if why is not None:
        raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, why)
    return {current + i: r for i, r in enumerate(wanted)}


HANDLERS = [
    ApiHandler(m.CreateTopicsRequest, m.CreateTopicsResponse, 2, 7, handle_create_topics),
    ApiHandler(m.DeleteTopicsRequest, m.DeleteTopicsResponse, 1, 6, handle_delete_topics),
    ApiHandler(m.CreatePartitionsRequest, m.CreatePartitionsResponse,
               0, 3, handle_create_partitions),
]
