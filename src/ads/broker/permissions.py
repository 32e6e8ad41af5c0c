"""What each API requires of the principal when an authorizer is on: the one table of
permissions, Kafka's (`KafkaApis`, and the "Operations and Resources on Protocols" table of
Kafka's documentation).

Handlers check with `RequestContext.authorize(rule.resource, name, rule.operation)` naming
the rule below; `PERMISSIONS` lists every served API with its rules, and a test holds that
every API the broker serves has its entry. Where a rule says "or", the first one allowed
suffices. What happens when denied is Kafka's:

- whole request: the response carries the error everywhere it has an error code;
- per resource: that topic/partition, group or transactional id gets the error, the rest
  of the request proceeds;
- filtered: what the principal may not describe is left out of a listing (Metadata of all
  topics, ListGroups, ListTransactions, OffsetFetch of all of a group's topics).

Brokers talk to each other as the principal of their connection: with PLAINTEXT inter-broker
traffic that is User:ANONYMOUS, so `super.users` must name it (or ACLs grant it
CLUSTER_ACTION on the cluster and READ on the topics), as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from ads.metadata.acl import CLUSTER_NAME, AclOperation, ResourceType
from ads.protocol.errors import ErrorCode
from ads.protocol.messages import ApiKey

__all__ = ["CLUSTER_NAME", "PERMISSIONS", "Rule"]

Op = AclOperation
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@dataclass(frozen=True, slots=True)
class Rule:
    resource: ResourceType
    operation: AclOperation
    # The error answered when denied (NONE: the denied part is left out, nothing fails).
    error: ErrorCode
    # "request", "resource" or "filtered" (see the module's docstring), and when it applies.
    scope: str
    when: str = ""


# -- the rules handlers name -------------------------------------------------------------
PRODUCE_TXN = Rule(TXN, Op.WRITE, TXN_DENIED, "request", "transactional batches")
PRODUCE_TOPIC = Rule(T, Op.WRITE, TOPIC_DENIED, "resource")
FETCH_FOLLOWER = Rule(C, Op.CLUSTER_ACTION, TOPIC_DENIED, "resource", "follower fetch")
FETCH_TOPIC = Rule(T, Op.READ, TOPIC_DENIED, "resource", "consumer fetch")
DESCRIBE_TOPIC = Rule(T, Op.DESCRIBE, TOPIC_DENIED, "resource")
LIST_TOPICS = Rule(T, Op.DESCRIBE, ErrorCode.NONE, "filtered", "all topics asked for")
AUTO_CREATE_CLUSTER = Rule(C, Op.CREATE, TOPIC_DENIED, "resource", "auto-creation")
AUTO_CREATE_TOPIC = Rule(T, Op.CREATE, TOPIC_DENIED, "resource", "auto-creation, or")
DESCRIBE_CLUSTER_OPS = Rule(C, Op.DESCRIBE, ErrorCode.NONE, "filtered",
                            "cluster authorized operations reported (0 when denied)")
DESCRIBE_LOG_DIRS = Rule(C, Op.DESCRIBE, CLUSTER_DENIED, "request")
ALTER_REPLICA_LOG_DIRS = Rule(C, Op.ALTER, CLUSTER_DENIED, "request")
LEADER_EPOCH_CLUSTER = Rule(C, Op.CLUSTER_ACTION, TOPIC_DENIED, "resource", "a follower")
DELETE_RECORDS = Rule(T, Op.DELETE, TOPIC_DENIED, "resource")
CREATE_TOPICS_CLUSTER = Rule(C, Op.CREATE, TOPIC_DENIED, "resource")
CREATE_TOPICS_TOPIC = Rule(T, Op.CREATE, TOPIC_DENIED, "resource", "or")
CREATE_TOPICS_CONFIGS = Rule(T, Op.DESCRIBE_CONFIGS, TOPIC_DENIED, "resource",
                             "the created topic's configs in the response")
DELETE_TOPICS = Rule(T, Op.DELETE, TOPIC_DENIED, "resource")
CREATE_PARTITIONS = Rule(T, Op.ALTER, TOPIC_DENIED, "resource")
DESCRIBE_CONFIGS_TOPIC = Rule(T, Op.DESCRIBE_CONFIGS, TOPIC_DENIED, "resource", "topics")
DESCRIBE_CONFIGS_BROKER = Rule(C, Op.DESCRIBE_CONFIGS, CLUSTER_DENIED, "resource",
                               "brokers and broker loggers")
DESCRIBE_CONFIGS_GROUP = Rule(G, Op.DESCRIBE_CONFIGS, GROUP_DENIED, "resource", "groups")
ALTER_CONFIGS_TOPIC = Rule(T, Op.ALTER_CONFIGS, TOPIC_DENIED, "resource", "topics")
ALTER_CONFIGS_BROKER = Rule(C, Op.ALTER_CONFIGS, CLUSTER_DENIED, "resource",
                            "brokers and broker loggers")
ALTER_CONFIGS_GROUP = Rule(G, Op.ALTER_CONFIGS, GROUP_DENIED, "resource", "groups")
INIT_PID_TXN = Rule(TXN, Op.WRITE, TXN_DENIED, "request", "transactional producer")
INIT_PID_IDEMPOTENT = Rule(C, Op.IDEMPOTENT_WRITE, CLUSTER_DENIED, "request",
                           "idempotent producer; or WRITE on any topic")
INIT_PID_ANY_TOPIC = Rule(T, Op.WRITE, CLUSTER_DENIED, "request",
                          "idempotent producer: WRITE on some topic, or")
COORDINATOR_GROUP = Rule(G, Op.DESCRIBE, GROUP_DENIED, "resource", "group coordinator")
COORDINATOR_TXN = Rule(TXN, Op.DESCRIBE, TXN_DENIED, "resource", "transaction coordinator")
COORDINATOR_SHARE = Rule(C, Op.CLUSTER_ACTION, CLUSTER_DENIED, "resource", "share coordinator")
GROUP_READ = Rule(G, Op.READ, GROUP_DENIED, "request")
GROUP_DESCRIBE = Rule(G, Op.DESCRIBE, GROUP_DENIED, "resource")
GROUP_DELETE = Rule(G, Op.DELETE, GROUP_DENIED, "resource")
OFFSET_DELETE_GROUP = Rule(G, Op.DELETE, GROUP_DENIED, "request")
LIST_GROUPS_CLUSTER = Rule(C, Op.DESCRIBE, ErrorCode.NONE, "filtered", "every group listed")
LIST_GROUPS_GROUP = Rule(G, Op.DESCRIBE, ErrorCode.NONE, "filtered", "else each group")
OFFSET_FETCH_GROUP = Rule(G, Op.DESCRIBE, GROUP_DENIED, "request")
TOPIC_READ = Rule(T, Op.READ, TOPIC_DENIED, "resource")
TXN_WRITE = Rule(TXN, Op.WRITE, TXN_DENIED, "request")
TXN_DESCRIBE = Rule(TXN, Op.DESCRIBE, TXN_DENIED, "resource")
TXN_DESCRIBE_TOPICS = Rule(T, Op.DESCRIBE, ErrorCode.NONE, "filtered",
                           "the transaction's partitions shown")
DESCRIBE_PRODUCERS = Rule(T, Op.READ, TOPIC_DENIED, "resource")
LIST_TXNS = Rule(TXN, Op.DESCRIBE, ErrorCode.NONE, "filtered")
TXN_TOPIC_WRITE = Rule(T, Op.WRITE, TOPIC_DENIED, "resource", "v0-3 (clients)")
CLUSTER_ACTION = Rule(C, Op.CLUSTER_ACTION, CLUSTER_DENIED, "request")
ADD_PARTITIONS_BROKERS = Rule(C, Op.CLUSTER_ACTION, CLUSTER_DENIED, "request",
                              "v4+ (brokers verifying)")
MARKERS_ALTER = Rule(C, Op.ALTER, CLUSTER_DENIED, "request", "or")
CLUSTER_ALTER = Rule(C, Op.ALTER, CLUSTER_DENIED, "request")
CLUSTER_DESCRIBE = Rule(C, Op.DESCRIBE, CLUSTER_DENIED, "request")
CLUSTER_DESCRIBE_CONFIGS = Rule(C, Op.DESCRIBE_CONFIGS, CLUSTER_DENIED, "request")
CLUSTER_ALTER_CONFIGS = Rule(C, Op.ALTER_CONFIGS, CLUSTER_DENIED, "request")

PERMISSIONS: dict[ApiKey, tuple[Rule, ...]] = {
    ApiKey.API_VERSIONS: (),
    ApiKey.SASL_HANDSHAKE: (),
    ApiKey.SASL_AUTHENTICATE: (),
    ApiKey.METADATA: (DESCRIBE_TOPIC, LIST_TOPICS, AUTO_CREATE_CLUSTER, AUTO_CREATE_TOPIC,
                      DESCRIBE_CLUSTER_OPS),
    ApiKey.DESCRIBE_CLUSTER: (DESCRIBE_CLUSTER_OPS,),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (DESCRIBE_TOPIC, LIST_TOPICS),
    ApiKey.PRODUCE: (PRODUCE_TXN, PRODUCE_TOPIC),
    ApiKey.FETCH: (FETCH_FOLLOWER, FETCH_TOPIC),
    ApiKey.LIST_OFFSETS: (DESCRIBE_TOPIC,),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (LEADER_EPOCH_CLUSTER, DESCRIBE_TOPIC),
    ApiKey.DELETE_RECORDS: (DELETE_RECORDS,),
    ApiKey.CREATE_TOPICS: (CREATE_TOPICS_CLUSTER, CREATE_TOPICS_TOPIC, CREATE_TOPICS_CONFIGS),
    ApiKey.DELETE_TOPICS: (DELETE_TOPICS,),
    ApiKey.CREATE_PARTITIONS: (CREATE_PARTITIONS,),
    ApiKey.DESCRIBE_CONFIGS: (DESCRIBE_CONFIGS_TOPIC, DESCRIBE_CONFIGS_BROKER,
                              DESCRIBE_CONFIGS_GROUP),
    ApiKey.DESCRIBE_LOG_DIRS: (DESCRIBE_LOG_DIRS,),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (ALTER_REPLICA_LOG_DIRS,),
    ApiKey.ALTER_CONFIGS: (ALTER_CONFIGS_TOPIC, ALTER_CONFIGS_BROKER, ALTER_CONFIGS_GROUP),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (ALTER_CONFIGS_TOPIC, ALTER_CONFIGS_BROKER,
                                       ALTER_CONFIGS_GROUP),
    ApiKey.INIT_PRODUCER_ID: (INIT_PID_TXN, INIT_PID_IDEMPOTENT, INIT_PID_ANY_TOPIC),
    ApiKey.FIND_COORDINATOR: (COORDINATOR_GROUP, COORDINATOR_TXN, COORDINATOR_SHARE),
    ApiKey.JOIN_GROUP: (GROUP_READ,),
    ApiKey.SYNC_GROUP: (GROUP_READ,),
    ApiKey.HEARTBEAT: (GROUP_READ,),
    ApiKey.LEAVE_GROUP: (GROUP_READ,),
    ApiKey.DESCRIBE_GROUPS: (GROUP_DESCRIBE,),
    ApiKey.LIST_GROUPS: (LIST_GROUPS_CLUSTER, LIST_GROUPS_GROUP),
    ApiKey.DELETE_GROUPS: (GROUP_DELETE,),
    ApiKey.OFFSET_COMMIT: (GROUP_READ, TOPIC_READ),
    ApiKey.OFFSET_FETCH: (OFFSET_FETCH_GROUP, DESCRIBE_TOPIC),
    ApiKey.OFFSET_DELETE: (OFFSET_DELETE_GROUP, TOPIC_READ),
    ApiKey.TXN_OFFSET_COMMIT: (TXN_WRITE, GROUP_READ, TOPIC_READ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (GROUP_READ,),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (GROUP_DESCRIBE,),
    ApiKey.SHARE_GROUP_HEARTBEAT: (GROUP_READ,),
    ApiKey.SHARE_GROUP_DESCRIBE: (GROUP_DESCRIBE,),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (GROUP_DESCRIBE, DESCRIBE_TOPIC),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (GROUP_READ, TOPIC_READ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (OFFSET_DELETE_GROUP, TOPIC_READ),
    ApiKey.SHARE_FETCH: (GROUP_READ, TOPIC_READ),
    ApiKey.SHARE_ACKNOWLEDGE: (GROUP_READ, TOPIC_READ),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (CLUSTER_ACTION,),
    ApiKey.READ_SHARE_GROUP_STATE: (CLUSTER_ACTION,),
    ApiKey.WRITE_SHARE_GROUP_STATE: (CLUSTER_ACTION,),
    ApiKey.DELETE_SHARE_GROUP_STATE: (CLUSTER_ACTION,),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (CLUSTER_ACTION,),
    ApiKey.ADD_PARTITIONS_TO_TXN: (TXN_WRITE, TXN_TOPIC_WRITE, ADD_PARTITIONS_BROKERS),
    ApiKey.ADD_OFFSETS_TO_TXN: (TXN_WRITE, GROUP_READ),
    ApiKey.END_TXN: (TXN_WRITE,),
    ApiKey.WRITE_TXN_MARKERS: (MARKERS_ALTER, CLUSTER_ACTION),
    ApiKey.DESCRIBE_TRANSACTIONS: (TXN_DESCRIBE, TXN_DESCRIBE_TOPICS),
    ApiKey.DESCRIBE_PRODUCERS: (DESCRIBE_PRODUCERS,),
    ApiKey.LIST_TRANSACTIONS: (LIST_TXNS,),
    ApiKey.ELECT_LEADERS: (CLUSTER_ALTER,),
    ApiKey.CONTROLLED_SHUTDOWN: (CLUSTER_ACTION,),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (CLUSTER_ALTER,),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (CLUSTER_DESCRIBE,),
    ApiKey.CREATE_ACLS: (CLUSTER_ALTER,),
    ApiKey.DELETE_ACLS: (CLUSTER_ALTER,),
    ApiKey.DESCRIBE_ACLS: (CLUSTER_DESCRIBE,),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (CLUSTER_DESCRIBE,),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (CLUSTER_ALTER,),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (CLUSTER_DESCRIBE_CONFIGS,),
    ApiKey.ALTER_CLIENT_QUOTAS: (CLUSTER_ALTER_CONFIGS,),
}


def describe() -> list[str]:
    """The table as lines (`ads acls --permissions` and the docs)."""
    out = []
    for api, rules in PERMISSIONS.items():
        need = "; ".join(
            f"{r.operation.name} on {r.resource.name}"
            + (f" [{r.when}]" if r.when else "")
            + (f" -> {r.error.name} ({r.scope})" if r.error is not ErrorCode.NONE
               else " (filtered)")
            for r in rules) or "nothing"
        out.append(f"{api.name}: {need}")
    return out
