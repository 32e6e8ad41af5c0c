"""DescribeAcls (key 29), CreateAcls (30), DeleteAcls (31), versions 0-3 (flexible from 2).

Without an authorizer they answer SECURITY_DISABLED, as Kafka does. DescribeAcls needs
DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER (`ads.broker.permissions`); denied,
every result carries CLUSTER_AUTHORIZATION_FAILED. Filters are Kafka's: resource type and
operation ANY, permission type ANY, pattern type ANY (every stored pattern with that
name) or MATCH (every pattern that applies to the named resource: its literal, "*", its
prefixes), null name, principal or host matching any. v0 has no pattern type: LITERAL.
A creation with an unknown or ANY element, a CLUSTER resource not named "kafka-cluster",
an empty name or a principal that is not "Type:name" fails with INVALID_REQUEST; the
others in the request are made. Changes reach the store one resource pattern at a time
(one conditional ZooKeeper write each), so a request's creations are not atomic, as in
Kafka.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TypeVar

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.acl import (
    ACL_RESOURCE_TYPES,
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourcePattern,
    ResourceType,
    bindings,
    valid_principal,
)
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

DescribeResource = m.DescribeAclsResponse.DescribeAclsResource
Description = DescribeResource.AclDescription
FilterResult = m.DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl
NO_AUTHORIZER = "No Authorizer is configured on the broker"


E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _enum(kind: type[E], code: int) -> E:
    try:
        return kind(code)
    except ValueError:
        return kind(0)  # UNKNOWN


def _filter(f: m.DescribeAclsRequest | m.DeleteAclsRequest.DeleteAclsFilter
            ) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
        _enum(AclOperation, f.operation), _enum(AclPermissionType, f.permission_type))


def _store(ctx: RequestContext) -> AclStore | None:
    return ctx.broker.acl_store if ctx.authorizing else None


def handle_describe(ctx: RequestContext, req: m.DescribeAclsRequest) -> m.DescribeAclsResponse:
    store = _store(ctx)
    rule = P.CLUSTER_DESCRIBE
    if store is None:
        return m.DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                      error_message=NO_AUTHORIZER, resources=[])
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        return m.DescribeAclsResponse(error_code=rule.error, error_message=None, resources=[])
    flt = _filter(req)
    if flt.unknown():
        return m.DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST,
                                      error_message="The filter has unknown elements",
                                      resources=[])
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = defaultdict(list)
    for b in bindings(store.acls):
        if flt.matches(b):
            grouped[b.pattern].append(b.entry)
    return m.DescribeAclsResponse(error_code=0, error_message=None, resources=[
        DescribeResource(resource_type=p.resource_type, resource_name=p.name,
                         pattern_type=p.pattern_type,
                         acls=[Description(principal=e.principal, host=e.host,
                                           operation=e.operation,
                                           permission_type=e.permission_type) for e in entries])
        for p, entries in grouped.items()])


def _invalid(c: m.CreateAclsRequest.AclCreation) -> str | None:
    """Why a creation is refused (INVALID_REQUEST), or None."""
    rtype = _enum(ResourceType, c.resource_type)
    if rtype not in ACL_RESOURCE_TYPES:
        return f"Invalid resource type {c.resource_type}"
    if _enum(PatternType, c.resource_pattern_type) not in (PatternType.LITERAL,
                                                           PatternType.PREFIXED):
        return f"Invalid pattern type {c.resource_pattern_type}: LITERAL or PREFIXED only"
    if _enum(AclOperation, c.operation) in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {c.operation}"
    if _enum(AclPermissionType, c.permission_type) not in (AclPermissionType.ALLOW,
                                                          AclPermissionType.DENY):
        return f"Invalid permission type {c.permission_type}"
    if rtype is ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not c.resource_name:
        return "Invalid empty resource name"
    if not valid_principal(c.principal):
        return f"Could not parse principal {c.principal!r}: expected Type:name"
    if not c.host:
        return "Invalid empty host"
    return None


async def handle_create(ctx: RequestContext, req: m.CreateAclsRequest
                        ) -> m.CreateAclsResponse:
    Result = m.CreateAclsResponse.AclCreationResult
    store = _store(ctx)
    rule = P.CLUSTER_ALTER
    if store is None or not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        code, text = ((ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER) if store is None
                      else (rule.error, None))
        return m.CreateAclsResponse(results=[Result(error_code=code, error_message=text)
                                             for _ in req.creations])
    results = []
    adds: dict[ResourcePattern, set[AccessControlEntry]] = defaultdict(set)
    for c in req.creations:
        problem = _invalid(c)
        results.append(Result(error_code=ErrorCode.INVALID_REQUEST if problem else 0,
                              error_message=problem))
        if problem is None:
            pattern = ResourcePattern(ResourceType(c.resource_type), c.resource_name,
                                      PatternType(c.resource_pattern_type))
            adds[pattern].add(AccessControlEntry(c.principal, c.host,
                                                 AclOperation(c.operation),
                                                 AclPermissionType(c.permission_type)))
    for pattern, entries in adds.items():
        await store.change(pattern, add=entries)
    return m.CreateAclsResponse(results=results)


def _matching(b: AclBinding) -> Matching:
    return Matching(error_code=0, error_message=None, resource_type=b.pattern.resource_type,
                    resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type,
                    principal=b.entry.principal, host=b.entry.host,
                    operation=b.entry.operation, permission_type=b.entry.permission_type)


async def handle_delete(ctx: RequestContext, req: m.DeleteAclsRequest) -> m.DeleteAclsResponse:
    store = _store(ctx)
    rule = P.CLUSTER_ALTER
    if store is None or not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        code, text = ((ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER) if store is None
                      else (rule.error, None))
        return m.DeleteAclsResponse(filter_results=[
            FilterResult(error_code=code, error_message=text, matching_acls=[])
            for _ in req.filters])
    current = bindings(store.acls)
    results = []
    removes: dict[ResourcePattern, set[AccessControlEntry]] = defaultdict(set)
    for f in req.filters:
        flt = _filter(f)
        if flt.unknown():
            results.append(FilterResult(error_code=ErrorCode.INVALID_REQUEST,
                                        error_message="The filter has unknown elements",
                                        matching_acls=[]))
            continue
        matched = [b for b in current if flt.matches(b)]
        for b in matched:
            removes[b.pattern].add(b.entry)
        results.append(FilterResult(error_code=0, error_message=None,
                                    matching_acls=[_matching(b) for b in matched]))
    await _remove(store, removes.items())
    return m.DeleteAclsResponse(filter_results=results)


async def _remove(store: AclStore,
                  removes: Iterable[tuple[ResourcePattern, set[AccessControlEntry]]]) -> None:
    for pattern, entries in removes:
        await store.change(pattern, remove=entries)


HANDLERS = [
    ApiHandler(m.DescribeAclsRequest, m.DescribeAclsResponse, 0, 3, handle_describe),
    ApiHandler(m.CreateAclsRequest, m.CreateAclsResponse, 0, 3, handle_create),
    ApiHandler(m.DeleteAclsRequest, m.DeleteAclsResponse, 0, 3, handle_delete),
]
