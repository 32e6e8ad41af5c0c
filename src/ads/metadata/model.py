"""The cluster model: topics, their IDs, partitions, replicas, leaders and configs.

Every partition carries a leader epoch and an ISR even on a single node, so the
replication layer can later drive the same model from ZooKeeper without changing callers.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`, the form in which ADS shows topic ids (its command line and
    console, as Kafka's tools) and ZooKeeper keeps them: URL-safe base64 of the 16 bytes,
    without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# Kafka's rule: ASCII letters, digits, '.', '_' and '-', at most 249 characters.
_LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state",
                             "__share_group_state"})


class InvalidTopicError(ValueError):
    """A topic name Kafka would refuse (maps to INVALID_TOPIC_EXCEPTION)."""


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
        )
    if not set(name) <= _LEGAL_CHARS:
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """The existing topic whose name differs from `name` only by '.' against '_', if any:
    Kafka refuses such a topic because the two share metric names."""
    key = name.replace(".", "_")
    return next((t for t in existing if t != name and t.replace(".", "_") == key), None)


@dataclass(slots=True)
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]

    def to_json(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": self.replicas,
            "isr": self.isr,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartitionState:  # parsed JSON
        return cls(
            partition=int(data["partition"]),
            leader=int(data["leader"]),
            leader_epoch=int(data["leader_epoch"]),
            replicas=[int(r) for r in data["replicas"]],
            isr=[int(r) for r in data["isr"]],
        )


@dataclass(slots=True)
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": [p.to_json() for p in self.partitions],
            "configs": self.configs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicState:  # parsed JSON
        return cls(
            name=str(data["name"]),
            topic_id=uuid.UUID(str(data["topic_id"])),
            partitions=[PartitionState.from_json(p) for p in data["partitions"]],
            configs={str(k): str(v) for k, v in data["configs"].items()},
        )


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """One advertised listener of a broker: Kafka's `EndPoint`."""

    listener_name: str  # e.g. PLAINTEXT, SSL, or any name of listener.security.protocol.map
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker as clients and other brokers reach it.

    `endpoints` holds every advertised listener; `host` and `port` are the first one's,
    for what names a broker without caring how it is reached (logs, the console). A client
    is answered with the endpoint of the listener its request came in on (`on`)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[ListenerEndpoint, ...] = ()

    def on(self, listener_name: str) -> ListenerEndpoint | None:
        """The endpoint of `listener_name`; None when this broker does not have it. A broker
        registered without listener names (an older registration) has only PLAINTEXT."""
        for e in self.endpoints:
            if e.listener_name == listener_name:
                return e
        if not self.endpoints and listener_name == "PLAINTEXT":
            return ListenerEndpoint("PLAINTEXT", "PLAINTEXT", self.host, self.port)
        return None
