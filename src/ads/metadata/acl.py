"""Kafka's ACL model: resource patterns, access control entries, filters, and the JSON an
ACL znode holds.

An ACL binding is a resource pattern (resource type, name, pattern type) and an access
control entry (principal, host, operation, permission type). The codes of every enum are
Kafka's wire codes (`org.apache.kafka.common.acl` and `...common.resource`); their names in
znodes are Kafka's too ("Topic", "TransactionalId", "Read", "IdempotentWrite", "Allow").

Storage, as Kafka's ZooKeeper authorizer lays it out (`kafka.zk.ZkData`):

    /kafka-acl/<ResourceType>/<name>                    LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>  PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                              "operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                "Topic:orders"  (a LITERAL change)
    /kafka-acl-extended-changes/acl_changes_<seq>       {"version":1,"resourceType":"Topic",
                                                         "name":"ord","patternType":"Prefixed"}

A resource znode is rewritten whole on every change, conditionally on the version read;
an empty set of entries deletes it. Nothing here does I/O.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "AccessControlEntry", "AclBinding", "AclBindingFilter", "AclOperation",
    "AclPermissionType", "AclStore", "PatternType", "ResourcePattern", "ResourceType",
    "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE", "CLUSTER_NAME",
]

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
# The one cluster resource's name, as Kafka names it.
CLUSTER_NAME = "kafka-cluster"

ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


class _Named(enum.IntEnum):
    @property
    def camel(self) -> str:
        """Kafka's name in znodes and tools: `TRANSACTIONAL_ID` is "TransactionalId"."""
        return _camel(self.name)

    @classmethod
    def parse(cls, text: str) -> Any:  # an instance of cls
        """Either spelling, any case ("READ", "Read", "read", "IdempotentWrite")."""
        key = text.replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}")


class AclOperation(_Named):
    """Kafka's operation codes (`org.apache.kafka.common.acl.AclOperation`)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(_Named):
    """Kafka's resource type codes (`org.apache.kafka.common.resource.ResourceType`)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The resource types ACLs may name (Kafka's USER type is for delegation tokens, which ADS
# does not have).
ACL_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                      ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN)


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def covers(self, name: str) -> bool:
        """Whether this stored pattern applies to the resource called `name`."""
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD_RESOURCE


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's `AclBindingFilter`: None matches any name, principal or host; ANY matches
    any type, operation or permission; pattern type MATCH matches every stored pattern
    that applies to the named resource (its literal, the wildcard "*", its prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def unknown(self) -> bool:
        return (self.resource_type is ResourceType.UNKNOWN
                or self.pattern_type is PatternType.UNKNOWN
                or self.operation is AclOperation.UNKNOWN
                or self.permission_type is AclPermissionType.UNKNOWN)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        return pattern.covers(self.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


AclView = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


class AclStore(Protocol):
    """Where ACLs live: the embedded store's file, ZooKeeper or the KRaft metadata log.
    `acls` is the view every authorization reads (kept current on the broker's event
    loop); `version` counts its changes."""

    @property
    def version(self) -> int: ...

    @property
    def acls(self) -> AclView: ...

    def start(self) -> None:
        """Start-up, before serving: read the stored ACLs and watch for changes (may block)."""

    async def change(self, pattern: ResourcePattern, add: Iterable[AccessControlEntry] = (),
                     remove: Iterable[AccessControlEntry] = ()) -> None:
        """Adds and removes entries of one pattern; returns once the view shows it."""


def bindings(view: AclView) -> list[AclBinding]:
    return [AclBinding(p, e) for p, entries in sorted(view.items()) for e in sorted(entries)]


def valid_principal(principal: str) -> bool:
    kind, sep, name = principal.partition(":")
    return bool(sep and kind and name)


# -- znode layout -------------------------------------------------------------------------
def znode_path(pattern: ResourcePattern) -> str:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{ACL_PATH}/{pattern.resource_type.camel}/{pattern.name}"
    return (f"{EXTENDED_ACL_PATH}/{pattern.pattern_type.name.lower()}/"
            f"{pattern.resource_type.camel}/{pattern.name}")


def type_paths() -> list[tuple[str, ResourceType, PatternType]]:
    """The parent znode of each (resource type, pattern type)'s resource znodes."""
    out = []
    for rtype in ACL_RESOURCE_TYPES:
        out.append((f"{ACL_PATH}/{rtype.camel}", rtype, PatternType.LITERAL))
        out.append((f"{EXTENDED_ACL_PATH}/prefixed/{rtype.camel}", rtype, PatternType.PREFIXED))
    return out


def changes_path(pattern: ResourcePattern) -> str:
    return ACL_CHANGES if pattern.pattern_type is PatternType.LITERAL else EXTENDED_ACL_CHANGES


def _dump(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def entry_to_json(entry: AccessControlEntry) -> dict[str, str]:
    return {"principal": entry.principal, "permissionType": entry.permission_type.camel,
            "operation": entry.operation.camel, "host": entry.host}


def entry_from_json(item: Mapping[str, Any]) -> AccessControlEntry:
    return AccessControlEntry(str(item["principal"]), str(item["host"]),
                              AclOperation.parse(str(item["operation"])),
                              AclPermissionType.parse(str(item["permissionType"])))


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    return _dump({"version": 1, "acls": [entry_to_json(e) for e in sorted(entries)]})


def decode_entries(raw: bytes | None) -> frozenset[AccessControlEntry]:
    """A resource znode's entries; ValueError when it is not Kafka's format."""
    if not raw:
        return frozenset()
    try:
        data = json.loads(raw.decode())
        if data.get("version") != 1:
            raise ValueError(f"unsupported ACL znode version {data.get('version')!r}")
        return frozenset(entry_from_json(item) for item in data["acls"])
    except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed ACL znode: {exc}") from exc


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.camel}:{pattern.name}".encode()
    return _dump({"version": 1, "resourceType": pattern.resource_type.camel,
                  "name": pattern.name, "patternType": pattern.pattern_type.camel})


def decode_change(raw: bytes, extended: bool) -> ResourcePattern:
    """The pattern a change notification names; ValueError when malformed."""
    try:
        if not extended:
            kind, sep, name = raw.decode().partition(":")
            if not sep:
                raise ValueError(f"expected ResourceType:name, got {raw!r}")
            return ResourcePattern(ResourceType.parse(kind), name, PatternType.LITERAL)
        data = json.loads(raw.decode())
        return ResourcePattern(ResourceType.parse(str(data["resourceType"])), str(data["name"]),
                               PatternType.parse(str(data["patternType"])))
    except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed ACL change notification: {exc}") from exc


# -- the embedded store's file: one list of patterns with their entries ------------------
def view_to_json(view: AclView) -> list[dict[str, Any]]:
    return [{"resourceType": p.resource_type.camel, "name": p.name,
             "patternType": p.pattern_type.camel,
             "acls": [entry_to_json(e) for e in sorted(entries)]}
            for p, entries in sorted(view.items()) if entries]


def view_from_json(items: Iterable[Mapping[str, Any]]) -> dict[ResourcePattern,
                                                                frozenset[AccessControlEntry]]:
    out = {}
    for item in items:
        pattern = ResourcePattern(ResourceType.parse(str(item["resourceType"])),
                                  str(item["name"]), PatternType.parse(str(item["patternType"])))
        out[pattern] = frozenset(entry_from_json(e) for e in item["acls"])
    return out
