"""DescribeConfigs (key 32) v1-4, AlterConfigs (key 33) v0-2,
IncrementalAlterConfigs (key 44) v0-1.

Topic configs can be described (read through the metadata store, so an alter made through
any broker is described at once, as Kafka's ZooKeeper mode reads ZooKeeper) and altered.
Broker configs are described with their sources (dynamic for this broker, dynamic for the
cluster, static, default) and altered dynamically (KIP-226) on a broker (resource name: its
id) or on the cluster's default (resource name ""): kept as entity configs
(`/config/brokers/<id>` and `/config/brokers/<default>` in ZooKeeper), taken by every broker
they concern without a restart. Only `DYNAMIC_KEYS` may be set (the defaults of topic
configs); any other key ADS knows is refused with INVALID_REQUEST "Cannot update these
configs dynamically", a value its key does not parse with INVALID_REQUEST, as Kafka answers;
keys ADS does not know are kept, as Kafka keeps them. Describing the cluster default lists
the keys set there.
Group configs (resource type GROUP, KIP-848 and KIP-932: `ads.broker.group_configs`) are
described for any group id, existing or not, and altered with Kafka's checks (a key ADS
does not serve is refused as unknown, a value out of the broker's bounds with Kafka's
message), kept as entity configs (`/config/groups/<group>`); authorized on the group.
Broker loggers are not supported.
"""

from __future__ import annotations

from collections.abc import Callable

from ads.broker import config as bconfig
from ads.broker import group_configs
from ads.broker import permissions as P
from ads.broker.configdefs import BROKER_CONFIG_DEFS, TOPIC_CONFIG_DEFS, ConfigType
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.acl import CLUSTER_NAME
from ads.metadata.entity_config import broker_entity_path, group_entity_path
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _denied(ctx: RequestContext, resource_type: int, name: str,
            rules: tuple[P.Rule, P.Rule, P.Rule]) -> ErrorCode | None:
    """The authorization error for a config resource: topics are checked on the topic,
    groups on the group, brokers and broker loggers on the cluster, as Kafka does.
    `rules`: the topic's, the cluster's and the group's."""
    topic_rule, broker_rule, group_rule = rules
    if resource_type == TOPIC:
        rule, resource_name = topic_rule, name
    elif resource_type == GROUP:
        rule, resource_name = group_rule, name
    elif resource_type in (BROKER, BROKER_LOGGER):
        rule, resource_name = broker_rule, CLUSTER_NAME
    else:
        return None
    return None if ctx.authorize(rule.resource, resource_name, rule.operation) else rule.error


async def handle_describe(ctx: RequestContext, req: m.DescribeConfigsRequest
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
        denied = _denied(ctx, res.resource_type, res.resource_name, _DESCRIBE_RULES)
        if denied is not None:
            out.error_code = denied
            results.append(out)
            continue
        if res.resource_type == TOPIC:
            # Read through, as Kafka's ZooKeeper mode reads ZooKeeper: an alter made
            # through another broker is described at once, before this broker's view has it.
            configs = (await broker.metadata.read_topic_configs(res.resource_name)
                       if res.resource_name in broker.metadata.topics else None)
            if configs is None:
                out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out.error_message = f"Topic {res.resource_name} does not exist"
                results.append(out)
                continue
            entries = bconfig.describe_topic_configs(broker.config, configs)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                out.error_code = ErrorCode.INVALID_REQUEST
                out.error_message = f"Unexpected broker id {res.resource_name}"
                results.append(out)
                continue
            entries = (bconfig.describe_broker_configs(broker.config) if res.resource_name
                       else bconfig.describe_dynamic_default(broker.config))
        elif res.resource_type == GROUP:
            if not res.resource_name:
                out.error_code = ErrorCode.INVALID_GROUP_ID
                out.error_message = "Group name must not be empty"
                results.append(out)
                continue
            # Read through, as topic configs are.
            view = await broker.metadata.read_entity_configs()
            entries = group_configs.describe(
                broker.config, view.get(group_entity_path(res.resource_name), {}))
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
    denied = _denied(ctx, resource_type, name, _ALTER_RULES)
    if denied is not None:
        return denied, None
    if resource_type == BROKER:
        return await _alter_broker(ctx, name, compute, validate_only)
    if resource_type == GROUP:
        return await _alter_group(ctx, name, compute, validate_only)
    if resource_type != TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Resource type {resource_type} is not supported"
    topic = broker.metadata.topics.get(name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
    try:
        new = compute(dict(topic.configs))
        bconfig.validate_topic_configs(dict(new))
    except bconfig.ConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    if not validate_only:
        await broker.topics.alter_configs(name, new)
    return ErrorCode.NONE, None


async def _alter_broker(ctx: RequestContext, name: str, compute: Compute,
                        validate_only: bool) -> tuple[ErrorCode, str | None]:
    """A broker's dynamic configs (name: its id) or the cluster's default ("")."""
    if name and not name.isdigit():
        return ErrorCode.INVALID_REQUEST, f"Invalid broker id {name}"
    return await _alter_entity(ctx, broker_entity_path(int(name) if name else None), compute,
                               bconfig.check_dynamic_change, validate_only)


async def _alter_group(ctx: RequestContext, name: str, compute: Compute,
                       validate_only: bool) -> tuple[ErrorCode, str | None]:
    if not name:
        return ErrorCode.INVALID_GROUP_ID, "Group name must not be empty"
    return await _alter_entity(ctx, group_entity_path(name), compute,
                               lambda new: group_configs.validate(ctx.broker.config, new),
                               validate_only)


async def _alter_entity(ctx: RequestContext, path: str, compute: Compute,
                        check: Callable[[dict[str, str]], object], validate_only: bool
                        ) -> tuple[ErrorCode, str | None]:
    """An entity's configs (a broker's, the cluster default's, a group's) made what
    `compute` says, once `check` (raising ConfigError) accepts them."""
    store = ctx.broker.metadata
    current = dict(store.entity_configs.get(path, {}))
    try:
        new = compute(dict(current))
        check(new)
    except bconfig.ConfigError as exc:
        return ErrorCode[exc.error_name], str(exc)
    changes: dict[str, str | None] = {k: None for k in current if k not in new}
    changes.update((k, v) for k, v in new.items() if current.get(k) != v)
    if changes and not validate_only:
        await store.alter_entity_configs(path, changes)
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


def _default_string(entries: list[bconfig.ConfigEntry], name: str) -> str:
    return next((e.value or "" for e in entries if e.name == name), "")


def _incremental(
        ops: list[m.IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig],
        broker_config: bconfig.BrokerConfig, resource_type: int) -> Compute:
    # Group configs have no list keys.
    defs = {BROKER: BROKER_CONFIG_DEFS, TOPIC: TOPIC_CONFIG_DEFS}.get(resource_type, {})

    def current_default() -> list[bconfig.ConfigEntry]:
        # What a list key holds when the resource does not set it (APPEND adds to it).
        return (bconfig.describe_broker_configs(broker_config) if resource_type == BROKER
                else bconfig.describe_topic_configs(broker_config, {}))

    def compute(current: dict[str, str]) -> dict[str, str]:
        for op in ops:
            if op.config_operation == SET:
                if op.value is None:
                    raise bconfig.ConfigError(f"Null value not supported for {op.name}")
                current[op.name] = op.value
            elif op.config_operation == DELETE:
                current.pop(op.name, None)
            elif op.config_operation in (APPEND, SUBTRACT):
                definition = defs.get(op.name)
                if definition is None or definition.type != ConfigType.LIST:
                    raise bconfig.ConfigError(
                        f"Config {op.name} is not a list: APPEND and SUBTRACT need a list")
                items = [v for v in (current.get(op.name) or _default_string(
                    current_default(), op.name)).split(",") if v]
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
                                 _incremental(list(res.configs), ctx.broker.config,
                                              res.resource_type),
                                 req.validate_only)
        out.append(R.AlterConfigsResourceResponse(
            error_code=code, error_message=msg, resource_type=res.resource_type,
            resource_name=res.resource_name))
    return m.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


_DESCRIBE_RULES = (P.DESCRIBE_CONFIGS_TOPIC, P.DESCRIBE_CONFIGS_BROKER, P.DESCRIBE_CONFIGS_GROUP)
_ALTER_RULES = (P.ALTER_CONFIGS_TOPIC, P.ALTER_CONFIGS_BROKER, P.ALTER_CONFIGS_GROUP)

HANDLERS = [
    ApiHandler(m.DescribeConfigsRequest, m.DescribeConfigsResponse, 1, 4, handle_describe),
    ApiHandler(m.AlterConfigsRequest, m.AlterConfigsResponse, 0, 2, handle_alter),
    ApiHandler(m.IncrementalAlterConfigsRequest, m.IncrementalAlterConfigsResponse,
               0, 1, handle_incremental_alter),
]
