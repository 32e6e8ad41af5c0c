"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), versions 0-1 (KIP-546).

Quotas are entity configs of the metadata store (`ads.metadata.entity_config`), where
Kafka's ZooKeeper mode keeps them: a user's at /config/users/<user>, a client id's at
/config/clients/<client-id>, a user's client id's at
/config/users/<user>/clients/<client-id>; an entity name of null is `<default>`. Every
broker's `ads.broker.quotas` follows the store's view, so a change made on one broker is
enforced by all. Any broker answers both requests, as in Kafka's ZooKeeper mode.

Validation as Kafka's, each failing entry answered INVALID_REQUEST with Kafka's message:
an empty entity, an entity type twice, an unknown entity type, an empty name, a key other
than `producer_byte_rate`, `consumer_byte_rate` or `request_percentage`, a value not above
0, a fractional byte rate, a key or an entity given twice. An entry that fails changes
nothing; the others are applied. Gaps: `ip` entities (`connection_creation_rate`) and
`controller_mutation_rate` are refused (INVALID_REQUEST saying so), not stored.

Describe reads the store through (`read_entity_configs`: ZooKeeper itself in a cluster, as
Kafka's ZooKeeper mode does), so a change made through one broker is described by every
broker at once. Describe filters as KIP-546: per entity type, EXACT (that name), DEFAULT
(`<default>`) or SPECIFIED (any entity of the type, `<default>` included, as Kafka's
ZooKeeper mode matches it); `strict` leaves out entities with a type the filter does not
name. A bad filter answers INVALID_REQUEST for the whole request; an
entity type other than user, client-id or ip UNSUPPORTED_VERSION, as Kafka does.

With an authorizer, describing needs DESCRIBE_CONFIGS and altering ALTER_CONFIGS on the
cluster (`ads.broker.permissions`); denied, the request gets CLUSTER_AUTHORIZATION_FAILED
(every entry of an alter).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping

from ads.broker import permissions as P  # noqa: N812
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.broker.permissions import CLUSTER_NAME
from ads.broker.quotas import QUOTA_KEYS
from ads.metadata.entity_config import DEFAULT, entity_path, parse_entity_path
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_LONG_MAX = 2**63 - 1
AQR = m.AlterClientQuotasResponse
DQR = m.DescribeClientQuotasResponse


class _Invalid(Exception):
    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code


def _entity(entry: m.AlterClientQuotasRequest.EntryData) -> tuple[str | None, str | None]:
    """The (user, client id) the entry names, DEFAULT for a null name."""
    if not entry.entity:
        raise _Invalid("Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for part in entry.entity:
        if part.entity_type in names:
            raise _Invalid(f"Invalid client quota entity, duplicate entity entry "
                           f"{part.entity_type}")
        if part.entity_type not in (USER, CLIENT_ID, IP):
            raise _Invalid(f"Unhandled client quota entity type: {part.entity_type}")
        if part.entity_name is not None and not part.entity_name:
            raise _Invalid(f"Empty {part.entity_type} not supported")
        names[part.entity_type] = part.entity_name
    if IP in names:
        if len(names) > 1:
            raise _Invalid("Invalid quota entity combination, IP entity should not be "
                           "combined with User or ClientId")
        raise _Invalid("IP quotas (connection_creation_rate) are not supported by this "
                       "broker")
    return (_name(names, USER), _name(names, CLIENT_ID))


def _name(names: dict[str, str | None], entity_type: str) -> str | None:
    """The entity's name of that type: None if it has none, DEFAULT for a null one."""
    if entity_type not in names:
        return None
    name = names[entity_type]
    return DEFAULT if name is None else name


def _value(key: str, value: float) -> str:
    """The stored text of a quota value, as Kafka writes it; _Invalid if unacceptable."""
    if key not in QUOTA_KEYS:
        if key == "controller_mutation_rate":
            raise _Invalid("Invalid configuration key controller_mutation_rate: controller "
                           "mutation quotas are not supported by this broker")
        raise _Invalid(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0.0:
        raise _Invalid(f"Quota {key} must be greater than 0")
    if not QUOTA_KEYS[key]:
        return repr(float(value))
    if value > _LONG_MAX:
        raise _Invalid(f"Proposed value for {key} is too large for a LONG.")
    if abs(value % 1.0) > 1e-6:
        raise _Invalid(f"{key} cannot be a fractional value.")
    return str(int(value + 1e-6))


def _changes(entry: m.AlterClientQuotasRequest.EntryData) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for op in entry.ops:
        if op.key in changes:
            raise _Invalid(f"Duplicate quota key {op.key} not updating quota for this entity")
        changes[op.key] = None if op.remove else _value(op.key, op.value)
    for key in [k for k, v in changes.items() if v is None and k not in QUOTA_KEYS]:
        del changes[key]  # removing a key nobody can set changes nothing
    return changes


def handle_alter(ctx: RequestContext, req: m.AlterClientQuotasRequest
                 ) -> Awaitable[m.AlterClientQuotasResponse]:
    return _alter(ctx, req)


async def _alter(ctx: RequestContext, req: m.AlterClientQuotasRequest
                 ) -> m.AlterClientQuotasResponse:
    results = []
    seen: set[tuple[str | None, str | None]] = set()  # Kafka applies an entity once
    rule = P.CLUSTER_ALTER_CONFIGS
    allowed = ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation)
    for entry in req.entries:
        echo = [AQR.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity]
        code, message = ErrorCode.NONE, None
        if not allowed:
            results.append(AQR.EntryData(error_code=rule.error, error_message=None,
                                         entity=echo))
            continue
        try:
            entity = _entity(entry)
            changes = _changes(entry)
        except _Invalid as exc:
            code, message = exc.code, str(exc)
        else:
            if entity in seen:
                code, message = ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity"
            elif changes and not req.validate_only:
                await ctx.broker.metadata.alter_entity_configs(entity_path(*entity), changes)
            seen.add(entity)
        results.append(AQR.EntryData(error_code=code, error_message=message, entity=echo))
    return AQR(throttle_time_ms=0, entries=results)


def _filter(req: m.DescribeClientQuotasRequest) -> dict[str, tuple[int, str | None]]:
    components: dict[str, tuple[int, str | None]] = {}
    for c in req.components:
        if c.entity_type in components:
            kind = "client" if c.entity_type == CLIENT_ID else c.entity_type
            raise _Invalid(f"Duplicate {kind} filter component entity type")
        if not c.entity_type:
            raise _Invalid("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise _Invalid(f"Custom entity type '{c.entity_type}' not supported",
                           ErrorCode.UNSUPPORTED_VERSION)
        if c.match_type == MATCH_EXACT and c.match is None:
            raise _Invalid("Unexpected null match string for exact match type")
        if c.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED) and c.match is not None:
            raise _Invalid(f"Unexpected match string for match type {c.match_type}")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise _Invalid(f"Unexpected match type: {c.match_type}")
        components[c.entity_type] = (c.match_type, c.match)
    if IP in components and len(components) > 1:
        raise _Invalid("Invalid entity filter component combination, IP filter component "
                       "should not be used with user or clientId filter component.")
    return components


def _matches(component: tuple[int, str | None] | None, name: str | None, strict: bool
             ) -> bool:
    if component is None:
        return name is None or not strict
    if name is None:
        return False
    match_type, match = component
    if match_type == MATCH_EXACT:
        return name == match
    if match_type == MATCH_DEFAULT:
        return name == DEFAULT
    return True  # SPECIFIED: any entity of the type, <default> too, as Kafka's ZooKeeper mode


def describe(entity_configs: Mapping[str, Mapping[str, str]],
             components: dict[str, tuple[int, str | None]], strict: bool
             ) -> list[DQR.EntryData]:
    """The entries of a DescribeClientQuotas answer (also `ads quotas describe`'s view)."""
    entries: list[DQR.EntryData] = []
    if IP in components:
        return entries  # no ip entity is ever stored
    for path, configs in sorted(entity_configs.items()):
        try:
            user, client = parse_entity_path(path)
        except ValueError:
            continue
        values = [DQR.EntryData.ValueData(key=k, value=float(v))
                  for k, v in sorted(configs.items()) if k in QUOTA_KEYS and _number(v)]
        if not values or not (_matches(components.get(USER), user, strict)
                              and _matches(components.get(CLIENT_ID), client, strict)):
            continue
        entity = [DQR.EntryData.EntityData(entity_type=kind,
                                           entity_name=None if name == DEFAULT else name)
                  for kind, name in ((USER, user), (CLIENT_ID, client)) if name is not None]
        entries.append(DQR.EntryData(entity=entity, values=values))
    return entries


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


async def handle_describe(ctx: RequestContext, req: m.DescribeClientQuotasRequest
                          ) -> m.DescribeClientQuotasResponse:
    rule = P.CLUSTER_DESCRIBE_CONFIGS
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        return DQR(throttle_time_ms=0, error_code=rule.error, error_message=None,
                   entries=None)
    try:
        components = _filter(req)
    except _Invalid as exc:
        return DQR(throttle_time_ms=0, error_code=exc.code, error_message=str(exc),
                   entries=None)
    entity_configs = await ctx.broker.metadata.read_entity_configs()
    return DQR(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
               entries=describe(entity_configs, components, req.strict))


HANDLERS = [
    ApiHandler(m.DescribeClientQuotasRequest, m.DescribeClientQuotasResponse,
               0, 1, handle_describe),
    ApiHandler(m.AlterClientQuotasRequest, m.AlterClientQuotasResponse, 0, 1, handle_alter),
]
