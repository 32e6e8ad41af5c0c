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
operation that applies, which `ALLOW_ALL` does; with `authorizer.class.name` set the broker
holds an `ads.security.authorizer.AclAuthorizer` instead (`Broker.operations_authorizer`),
which answers the same three questions from the ACLs, and every handler asks through
`RequestContext` (`authorize`, `authorized_operations`, `authorize_any`) what the
permission table (`ads.broker.permissions`) requires.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ads.metadata.acl import AclOperation, ResourceType
from ads.net.server import ConnectionInfo

__all__ = [
    "ALLOW_ALL", "NOT_REQUESTED", "AclOperation", "AllowAll", "OperationsAuthorizer",
    "ResourceType", "authorized_operations", "bit_set",
]

NOT_REQUESTED = -2147483648


Op = AclOperation
SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER,
                                   Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
                                     Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
                                     Op.DESCRIBE}),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Op.DESCRIBE, Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Op.DESCRIBE}),
}


def bit_set(operations: Iterable[AclOperation]) -> int:
    """Kafka's `Utils.to32BitField`: bit `op` set for each operation."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


class OperationsAuthorizer(Protocol):
    def authorize(self, principal: str, host: str, resource_type: ResourceType, name: str,
                  operation: AclOperation) -> bool:
        """Whether the principal, connected from `host`, may perform the operation."""
        ...

    def allowed(self, principal: str, host: str, resource_type: ResourceType, name: str,
                operations: Iterable[AclOperation]) -> frozenset[AclOperation]:
        """The subset of `operations` the principal may perform on the resource."""
        ...

    def authorize_any(self, principal: str, host: str, resource_type: ResourceType,
                      operation: AclOperation) -> bool:
        """Whether the principal may perform the operation on some resource of the type."""
        ...


class AllowAll:
    """No authorizer: everything that applies is allowed, as in Kafka."""

    def authorize(self, principal: str, host: str, resource_type: ResourceType, name: str,
                  operation: AclOperation) -> bool:
        return True

    def allowed(self, principal: str, host: str, resource_type: ResourceType, name: str,
                operations: Iterable[AclOperation]) -> frozenset[AclOperation]:
        return frozenset(operations)

    def authorize_any(self, principal: str, host: str, resource_type: ResourceType,
                      operation: AclOperation) -> bool:
        return True


ALLOW_ALL = AllowAll()
_ALL_BITS = {kind: bit_set(ops) for kind, ops in SUPPORTED.items()}


def authorized_operations(authorizer: OperationsAuthorizer, connection: ConnectionInfo,
                          resource_type: ResourceType, name: str) -> int:
    """The bit set a response carries for the resource."""
    if isinstance(authorizer, AllowAll):
        return _ALL_BITS[resource_type]
    return bit_set(authorizer.allowed(connection.principal, connection.host,
                                      resource_type, name, SUPPORTED[resource_type]))
