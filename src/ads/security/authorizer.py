"""The ACL authorizer: Kafka's `AclAuthorizer` / `StandardAuthorizer` rules over the ACLs of
an `AclStore`.

An action is (principal, client host, resource type, resource name, operation). Rules, in
Kafka's order:
1. A principal listed in `super.users` may do anything.
2. The ACLs that apply are those whose pattern covers the resource (its LITERAL name, the
   LITERAL wildcard "*", any PREFIXED pattern the name starts with), whose principal is the
   request's or "User:*", and whose host is the client's address or "*".
3. A matching DENY wins over any ALLOW. A DENY matches its own operation or ALL.
4. An ALLOW matches its own operation, ALL, and the implied ones: READ, WRITE, DELETE and
   ALTER allow DESCRIBE; ALTER_CONFIGS allows DESCRIBE_CONFIGS. (A DENY implies nothing: a
   DENY of READ does not deny DESCRIBE.)
5. No ALLOW matched: denied, unless no ACL at all (of any principal) applies to the
   resource and `allow.everyone.if.no.acl.found` is true.

`authorize_any` is Kafka's `authorizeByResourceType`: whether the principal may perform the
operation on at least one resource of a type (an ALLOW not overridden by a DENY on the
wildcard or on a covering prefix), used where Kafka 3 accepts "WRITE on any topic" in place
of IDEMPOTENT_WRITE on the cluster.

The lookup index is rebuilt when the store's `version` moves; each check then costs one
dictionary lookup for the literal name and the wildcard, and one `startswith` per PREFIXED
pattern of the resource type. Used from the broker's event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from ads.metadata.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["ACL_AUTHORIZER", "AUTHORIZER_CLASSES", "AclAuthorizer", "STANDARD_AUTHORIZER",
           "parse_super_users"]

log = logging.getLogger("ads.authorizer")

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Both of Kafka's class names select the same rules (ZooKeeper mode and KRaft mode decide
# alike); storage is ADS's metadata store's either way.
AUTHORIZER_CLASSES = (ACL_AUTHORIZER, STANDARD_AUTHORIZER)

Op = AclOperation
_IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons ("User:admin;User:broker")."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def _allows(entry_op: AclOperation, op: AclOperation) -> bool:
    if entry_op in (Op.ALL, op):
        return True
    if op is Op.DESCRIBE:
        return entry_op in _IMPLIES_DESCRIBE
    return op is Op.DESCRIBE_CONFIGS and entry_op in _IMPLIES_DESCRIBE_CONFIGS


@dataclass(slots=True)
class _TypeIndex:
    literal: dict[str, frozenset[AccessControlEntry]] = field(default_factory=dict)
    prefixed: list[tuple[str, frozenset[AccessControlEntry]]] = field(default_factory=list)


class AclAuthorizer:
    def __init__(self, store: AclStore, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._index: dict[ResourceType, _TypeIndex] = {}
        self._indexed_version = -1

    def _type_index(self, resource_type: ResourceType) -> _TypeIndex:
        if self._indexed_version != self.store.version:
            index: dict[ResourceType, _TypeIndex] = {}
            for pattern, entries in self.store.acls.items():
                ti = index.setdefault(pattern.resource_type, _TypeIndex())
                if pattern.pattern_type is PatternType.PREFIXED:
                    ti.prefixed.append((pattern.name, entries))
                else:
                    ti.literal[pattern.name] = entries
            self._index, self._indexed_version = index, self.store.version
        return self._index.get(resource_type) or _TypeIndex()

    def _applicable(self, resource_type: ResourceType, name: str
                    ) -> list[frozenset[AccessControlEntry]]:
        ti = self._type_index(resource_type)
        found = [ti.literal[n] for n in (name, WILDCARD_RESOURCE) if n in ti.literal]
        found.extend(entries for prefix, entries in ti.prefixed if name.startswith(prefix))
        return found

    def authorize(self, principal: str, host: str, resource_type: ResourceType, name: str,
                  operation: AclOperation) -> bool:
        if principal in self.super_users:
            return True
        applicable = self._applicable(resource_type, name)
        allowed = False
        for entries in applicable:
            for e in entries:
                if (e.principal not in (principal, WILDCARD_PRINCIPAL)
                        or e.host not in (host, WILDCARD_HOST)):
                    continue
                if e.permission_type is DENY and e.operation in (Op.ALL, operation):
                    log.debug("%s denied %s on %s %s from %s", principal, operation.name,
                              resource_type.name, name, host)
                    return False
                if e.permission_type is ALLOW and _allows(e.operation, operation):
                    allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not any(applicable)

    def allowed(self, principal: str, host: str, resource_type: ResourceType, name: str,
                operations: Iterable[AclOperation]) -> frozenset[AclOperation]:
        return frozenset(op for op in operations
                         if self.authorize(principal, host, resource_type, name, op))

    def authorize_any(self, principal: str, host: str, resource_type: ResourceType,
                      operation: AclOperation) -> bool:
        if principal in self.super_users:
            return True
        ti = self._type_index(resource_type)
        if self.allow_if_no_acl and not ti.literal and not ti.prefixed:
            return True

        def matching(entries: frozenset[AccessControlEntry],
                     permission: AclPermissionType) -> bool:
            return any(e.permission_type is permission
                       and e.principal in (principal, WILDCARD_PRINCIPAL)
                       and e.host in (host, WILDCARD_HOST)
                       and (e.operation in (Op.ALL, operation) if permission is DENY
                            else _allows(e.operation, operation))
                       for e in entries)

        if matching(ti.literal.get(WILDCARD_RESOURCE, frozenset()), DENY):
            return False
        deny_prefixes = [p for p, entries in ti.prefixed if matching(entries, DENY)]
        patterns = [*((ResourcePattern(resource_type, n, PatternType.LITERAL), e)
                      for n, e in ti.literal.items()),
                    *((ResourcePattern(resource_type, n, PatternType.PREFIXED), e)
                      for n, e in ti.prefixed)]
        for pattern, entries in patterns:
            if not matching(entries, ALLOW):
                continue
            if pattern.name == WILDCARD_RESOURCE and pattern.pattern_type is PatternType.LITERAL:
                return True
            if any(pattern.name.startswith(p) for p in deny_prefixes):
                continue
            if pattern.pattern_type is PatternType.LITERAL and matching(
                    ti.literal.get(pattern.name, frozenset()), DENY):
                continue
            return True
        return False
