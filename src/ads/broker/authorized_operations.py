"""Authorized operations (KIP-430): the bit sets that Metadata (topics, and the cluster in
v8-10), DescribeCluster, DescribeGroups (v3+) and ConsumerGroupDescribe return when the
client asks (`include_*_authorized_operations`).

The value is a 32-bit field: bit `op` is set when operation `op` (Kafka's `AclOperation`
codes below) is allowed on the resource. A client that did not ask gets `NOT_REQUESTED`
(-2147483648, the schemas' default). Which operations apply to a resource type is Kafka's
`AclEntry.supportedOperations`: a topic READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
DESCRIBE_CONFIGS and ALTER_CONFIGS; the cluster CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER and DESCRIBE; a group READ, DESCRIBE and DELETE
(Kafka 3.8 adds DESCRIBE_CONFIGS and ALTER_CONFIGS for its group configs, which ADS does
not have).

Who decides is an `OperationsAuthorizer`. Without an authorizer Kafka allows every
operation that applies, which `ALLOW_ALL` does; an authorizer with ACLs implements the same
one-method protocol and replaces it in the broker (`Broker.operations_authorizer`), and
the handlers do not change.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Protocol

from ads.net.server import ConnectionInfo

__all__ = [
    "ALLOW_ALL", "NOT_REQUESTED", "AclOperation", "AllowAll", "OperationsAuthorizer",
    "ResourceType", "authorized_operations", "bit_set",
]

NOT_REQUESTED = -2147483648


class AclOperation(enum.IntEnum):
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


class ResourceType(enum.IntEnum):
    """Kafka's resource type codes (`org.apache.kafka.common.resource.ResourceType`)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4


Op = AclOperation
SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER,
                                   Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
                                     Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
                                     Op.DESCRIBE}),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE}),
}


def bit_set(operations: Iterable[AclOperation]) -> int:
    """Kafka's `Utils.to32BitField`: bit `op` set for each operation."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


class OperationsAuthorizer(Protocol):
    def allowed(self, connection: ConnectionInfo, client_id: str | None,
                resource_type: ResourceType, name: str,
                operations: frozenset[AclOperation]) -> Iterable[AclOperation]:
        """The subset of `operations` the connection's principal may perform on the
        resource."""
        ...


class AllowAll:
    """No authorizer: everything that applies is allowed, as in Kafka."""

    def allowed(self, connection: ConnectionInfo, client_id: str | None,
                resource_type: ResourceType, name: str,
                operations: frozenset[AclOperation]) -> Iterable[AclOperation]:
        return operations


ALLOW_ALL = AllowAll()
_ALL_BITS = {kind: bit_set(ops) for kind, ops in SUPPORTED.items()}


def authorized_operations(authorizer: OperationsAuthorizer, connection: ConnectionInfo,
                          client_id: str | None, resource_type: ResourceType, name: str) -> int:
    """The bit set a response carries for the resource."""
    if isinstance(authorizer, AllowAll):
        return _ALL_BITS[resource_type]
    return bit_set(authorizer.allowed(connection, client_id, resource_type, name,
                                      SUPPORTED[resource_type]))
