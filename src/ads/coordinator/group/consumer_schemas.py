"""The structs of Kafka's KIP-848 consumer-group records, as field tables for the codec.

`ads.protocol.messages` is generated from Kafka's client schemas, which do not include the
group coordinator's own records; these follow the group coordinator's schemas of Kafka
4.x. Keys are not flexible (int16-length strings); values are flexible (compact strings and
arrays, a tagged-field section). The byte layout is in the header of `records.py`. Tagged
fields this broker does not write (a classic member's protocols, the metadata hash of 4.1)
are skipped when read.
"""

from __future__ import annotations

import uuid

from ads.protocol.base import Message, Struct
from ads.protocol.schema import MAX_VERSION, MISSING, Field
from ads.protocol.types import ZERO_UUID

_ALL = (0, MAX_VERSION)


class ConsumerGroupKey(Message):
    """ConsumerGroupMetadata (type 3) and ConsumerGroupTargetAssignmentMetadata (type 6)."""

    __slots__ = ("group_id",)
    group_id: str

    def __init__(self, *, group_id: str = "") -> None:
        self.group_id = group_id


class ConsumerMemberKey(Message):
    """ConsumerGroupMemberMetadata (5), ConsumerGroupTargetAssignmentMember (7) and
    ConsumerGroupCurrentMemberAssignment (8); ConsumerGroupRegularExpression (16) has the
    regular expression in the second string."""

    __slots__ = ("group_id", "member_id")
    group_id: str
    member_id: str

    def __init__(self, *, group_id: str = "", member_id: str = "") -> None:
        self.group_id = group_id
        self.member_id = member_id


class EpochValue(Message):
    """ConsumerGroupMetadataValue (the group epoch) and
    ConsumerGroupTargetAssignmentMetadataValue (the assignment epoch)."""

    __slots__ = ("epoch",)
    _FLEXIBLE = 0
    FLEXIBLE_VERSIONS = 0
    epoch: int

    def __init__(self, *, epoch: int = 0) -> None:
        self.epoch = epoch


class MemberMetadataValue(Message):
    __slots__ = ("instance_id", "rack_id", "client_id", "client_host",
                 "subscribed_topic_names", "subscribed_topic_regex", "rebalance_timeout_ms",
                 "server_assignor")
    _FLEXIBLE = 0
    FLEXIBLE_VERSIONS = 0
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None

    def __init__(self, *, instance_id: str | None = None, rack_id: str | None = None,
                 client_id: str = "", client_host: str = "",
                 subscribed_topic_names: list[str] = MISSING,
                 subscribed_topic_regex: str | None = None, rebalance_timeout_ms: int = -1,
                 server_assignor: str | None = None) -> None:
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.client_id = client_id
        self.client_host = client_host
        self.subscribed_topic_names = ([] if subscribed_topic_names is MISSING
                                       else subscribed_topic_names)
        self.subscribed_topic_regex = subscribed_topic_regex
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor


class TopicPartitions(Struct):
    __slots__ = ("topic_id", "partitions")
    _FLEXIBLE = 0
    topic_id: uuid.UUID
    partitions: list[int]

    def __init__(self, *, topic_id: uuid.UUID = ZERO_UUID, partitions: list[int] = MISSING
                 ) -> None:
        self.topic_id = topic_id
        self.partitions = [] if partitions is MISSING else partitions


class TargetAssignmentMemberValue(Message):
    __slots__ = ("topic_partitions",)
    _FLEXIBLE = 0
    FLEXIBLE_VERSIONS = 0
    topic_partitions: list[TopicPartitions]

    def __init__(self, *, topic_partitions: list[TopicPartitions] = MISSING) -> None:
        self.topic_partitions = [] if topic_partitions is MISSING else topic_partitions


class CurrentMemberAssignmentValue(Message):
    __slots__ = ("member_epoch", "previous_member_epoch", "state", "assigned_partitions",
                 "partitions_pending_revocation")
    _FLEXIBLE = 0
    FLEXIBLE_VERSIONS = 0
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: list[TopicPartitions]
    partitions_pending_revocation: list[TopicPartitions]

    def __init__(self, *, member_epoch: int = 0, previous_member_epoch: int = 0,
                 state: int = 0, assigned_partitions: list[TopicPartitions] = MISSING,
                 partitions_pending_revocation: list[TopicPartitions] = MISSING) -> None:
        self.member_epoch = member_epoch
        self.previous_member_epoch = previous_member_epoch
        self.state = state
        self.assigned_partitions = [] if assigned_partitions is MISSING else assigned_partitions
        self.partitions_pending_revocation = (
            [] if partitions_pending_revocation is MISSING else partitions_pending_revocation)


class RegularExpressionValue(Message):
    __slots__ = ("topics", "version", "timestamp")
    _FLEXIBLE = 0
    FLEXIBLE_VERSIONS = 0
    topics: list[str]
    version: int
    timestamp: int

    def __init__(self, *, topics: list[str] = MISSING, version: int = 0, timestamp: int = 0
                 ) -> None:
        self.topics = [] if topics is MISSING else topics
        self.version = version
        self.timestamp = timestamp


_f = Field
ConsumerGroupKey._FIELDS = (_f("group_id", "string", _ALL, default=""),)
ConsumerMemberKey._FIELDS = (_f("group_id", "string", _ALL, default=""),
                             _f("member_id", "string", _ALL, default=""))
EpochValue._FIELDS = (_f("epoch", "int32", _ALL, default=0),)
MemberMetadataValue._FIELDS = (
    _f("instance_id", "string", _ALL, nullable=_ALL),
    _f("rack_id", "string", _ALL, nullable=_ALL),
    _f("client_id", "string", _ALL, default=""),
    _f("client_host", "string", _ALL, default=""),
    _f("subscribed_topic_names", "array", _ALL, default=MISSING, element="string"),
    _f("subscribed_topic_regex", "string", _ALL, nullable=_ALL),
    _f("rebalance_timeout_ms", "int32", _ALL, default=-1),
    _f("server_assignor", "string", _ALL, nullable=_ALL),
)
TopicPartitions._FIELDS = (
    _f("topic_id", "uuid", _ALL, default=ZERO_UUID),
    _f("partitions", "array", _ALL, default=MISSING, element="int32"),
)
TargetAssignmentMemberValue._FIELDS = (
    _f("topic_partitions", "array", _ALL, default=MISSING, struct=TopicPartitions,
       element="struct"),
)
CurrentMemberAssignmentValue._FIELDS = (
    _f("member_epoch", "int32", _ALL, default=0),
    _f("previous_member_epoch", "int32", _ALL, default=0),
    _f("state", "int8", _ALL, default=0),
    _f("assigned_partitions", "array", _ALL, default=MISSING, struct=TopicPartitions,
       element="struct"),
    _f("partitions_pending_revocation", "array", _ALL, default=MISSING,
       struct=TopicPartitions, element="struct"),
)
RegularExpressionValue._FIELDS = (
    _f("topics", "array", _ALL, default=MISSING, element="string"),
    _f("version", "int64", _ALL, default=0),
    _f("timestamp", "int64", _ALL, default=0),
)
