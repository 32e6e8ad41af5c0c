"""DescribeConfigs (key 32) v1-4, AlterConfigs (key 33) v0-2,
IncrementalAlterConfigs (key 44) v0-1.

Topic configs can be described and altered; broker configs can be described (static, from
the file, flags and --set, with defaults) but not altered at run time: altering them is
refused with INVALID_REQUEST. Broker loggers are not supported.
"""

from __future__ import annotations

from collections.abc import Callable

from ads.broker import config as bconfig
from ads.broker import permissions as P
from ads.broker.configdefs import TOPIC_CONFIG_DEFS, ConfigType
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.acl import CLUSTER_NAME
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _denied(ctx: RequestContext, resource_type: int, name: str, topic_rule: P.Rule,
            broker_rule: P.Rule) -> ErrorCode | None:
    """The authorization error for a config resource: topics are checked on the topic,
    brokers and broker loggers on the cluster, as Kafka does."""
    if resource_type == TOPIC:
        rule, resource_name = topic_rule, name
    elif resource_type in (BROKER, BROKER_LOGGER):
        rule, resource_name = broker_rule, CLUSTER_NAME
    else:
        return None
    return None if ctx.authorize(rule.resource, resource_name, rule.operation) else rule.error


def handle_describe(ctx: RequestContext, req: m.DescribeConfigsRequest
                    ) -> m.DescribeConfigsResponse:
    broker = ctx.broker
    R = m.DescribeConfigsResponse  # noqa: N806
    Result = R.DescribeConfigsResult  # noqa: N806
    Entry = Result.DescribeConfigsResourceResult  # noqa: N806
    Synonym = Entry.DescribeConfigsSynonym  # noqa: N806
    results = []
    for res in req.resources:
        out = Result(error_code=ErrorCode.NONE, error_message=None,
                     resource_type=res.resource_type, resource_name=res.resource_name, configs=[])
        denied = _denied(ctx, res.resource_type, res.resource_name, P.DESCRIBE_CONFIGS_TOPIC,
                         P.DESCRIBE_CONFIGS_BROKER)
        if denied is not None:
            out.error_code = denied
            results.append(out)
            continue
        if res.resource_type == TOPIC:
            topic = broker.metadata.topics.get(res.resource_name)
            if topic is None:
                out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out.error_message = f"Topic {res.resource_name} does not exist"
                results.append(out)
                continue
            entries = bconfig.describe_topic_configs(broker.config, topic.configs)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                out.error_code = ErrorCode.INVALID_REQUEST
                out.error_message = f"Unexpected broker id {res.resource_name}"
                results.append(out)
                continue
            entries = bconfig.describe_broker_configs(broker.config)
        else:
            out.error_code = ErrorCode.INVALID_REQUEST
            out.error_message = f"Resource type {res.resource_type} is not supported"
            results.append(out)
            continue
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        for e in entries:
            if keys is not None and e.name not in keys:
                continue
            synonyms = ([Synonym(name=y.name, value=y.value, source=y.source) for y in e.synonyms]
                        if req.include_synonyms else [])
            out.configs.append(Entry(
                name=e.name, value=e.value, read_only=e.read_only,
                is_default=e.source == bconfig.ConfigSource.DEFAULT_CONFIG, config_source=e.source,
                is_sensitive=e.sensitive, synonyms=synonyms, config_type=e.type,
                documentation=e.documentation if req.include_documentation else None))
        results.append(out)
    return m.DescribeConfigsResponse(throttle_time_ms=0, results=results)


Compute = Callable[[dict[str, str]], dict[str, str]]


async def _alter(ctx: RequestContext, resource_type: int, name: str, compute: Compute,
                 validate_only: bool) -> tuple[ErrorCode, str | None]:
    broker = ctx.broker
    denied = _denied(ctx, resource_type, name, P.ALTER_CONFIGS_TOPIC, P.ALTER_CONFIGS_BROKER)
    if denied is not None:
        return denied, None
    if resource_type != TOPIC:
        return (ErrorCode.INVALID_REQUEST,
                "Only topic configs can be altered; broker configs are static in ADS")
    topic = broker.metadata.topics.get(name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
    try:
        new = compute(dict(topic.configs))
        bconfig.validate_topic_configs(dict(new))
    except bconfig.ConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    if not validate_only:
        await broker.alter_topic_configs(name, new)
    return ErrorCode.NONE, None


async def handle_alter(ctx: RequestContext, req: m.AlterConfigsRequest
                       ) -> m.AlterConfigsResponse:
    R = m.AlterConfigsResponse  # noqa: N806
    out = []
    for res in req.resources:
        replacement = {c.name: c.value for c in res.configs if c.value is not None}
        code, msg = await _alter(ctx, res.resource_type, res.resource_name,
                                 _replace_with(replacement), req.validate_only)
        out.append(R.AlterConfigsResourceResponse(
            error_code=code, error_message=msg, resource_type=res.resource_type,
            resource_name=res.resource_name))
    return m.AlterConfigsResponse(throttle_time_ms=0, responses=out)


def _replace_with(replacement: dict[str, str]) -> Compute:
    """AlterConfigs: the resource's overrides become exactly the request's."""
    return lambda _current: dict(replacement)


def _default_string(broker_config: bconfig.BrokerConfig, name: str) -> str:
    for entry in bconfig.describe_topic_configs(broker_config, {}):
        if entry.name == name:
            return entry.value or ""
    return ""


def _incremental(
        ops: list[m.IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig],
        broker_config: bconfig.BrokerConfig) -> Compute:
    def compute(current: dict[str, str]) -> dict[str, str]:
        for op in ops:
            if op.config_operation == SET:
                if op.value is None:
                    raise bconfig.ConfigError(f"Null value not supported for {op.name}")
                current[op.name] = op.value
            elif op.config_operation == DELETE:
                current.pop(op.name, None)
            elif op.config_operation in (APPEND, SUBTRACT):
                definition = TOPIC_CONFIG_DEFS.get(op.name)
                if definition is None or definition.type != ConfigType.LIST:
                    raise bconfig.ConfigError(
                        f"Config {op.name} is not a list: APPEND and SUBTRACT need a list")
                items = [v for v in (current.get(op.name) or _default_string(
                    broker_config, op.name)).split(",") if v]
                change = [v for v in (op.value or "").split(",") if v]
                if op.config_operation == APPEND:
                    items += [v for v in change if v not in items]
                else:
                    items = [v for v in items if v not in change]
                current[op.name] = ",".join(items)
            else:
                raise bconfig.ConfigError(f"Unknown config operation {op.config_operation}")
        return current
    return compute


async def handle_incremental_alter(ctx: RequestContext, req: m.IncrementalAlterConfigsRequest
                                   ) -> m.IncrementalAlterConfigsResponse:
    R = m.IncrementalAlterConfigsResponse  # noqa: N806
    out = []
    for res in req.resources:
        code, msg = await _alter(ctx, res.resource_type, res.resource_name,
                                 _incremental(list(res.configs), ctx.broker.config),
                                 req.validate_only)
        out.append(R.AlterConfigsResourceResponse(
            error_code=code, error_message=msg, resource_type=res.resource_type,
            resource_name=res.resource_name))
    return m.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


HANDLERS = [
    ApiHandler(m.DescribeConfigsRequest, m.DescribeConfigsResponse, 1, 4, handle_describe),
    ApiHandler(m.AlterConfigsRequest, m.AlterConfigsResponse, 0, 2, handle_alter),
    ApiHandler(m.IncrementalAlterConfigsRequest, m.IncrementalAlterConfigsResponse,
               0, 1, handle_incremental_alter),
]
