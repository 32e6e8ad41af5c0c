"""Kafka's ZooKeeper layout: the znode paths and the JSON each one holds.

The same paths and formats as Kafka's ZooKeeper mode (`kafka.zk.ZkData`), so an operator who
knows Kafka can read an ADS cluster with `zkCli.sh`:

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /controller                  (ephemeral)      {"version":1,"brokerid":1,"timestamp":"..."}
    /controller_epoch                             "3"
    /brokers/ids/<id>            (ephemeral)      {"version":5,"host":...,"port":9092,
                                                   "endpoints":["SSL://h:9093",...],
                                                   "listener_security_protocol_map":
                                                   {"SSL":"SSL",...},"rack":...}
    /brokers/topics/<topic>                       {"topic_id":...,"partitions":{"0":[1,2]},
                                                   "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<topic>/partitions/<p>/state  {"leader":1,"leader_epoch":0,"isr":[1],...}
    /config/topics/<topic>                        {"version":1,"config":{"k":"v"}}
    /config/users/<user>[/clients/<id>]           the same, for users and client ids
    /config/clients/<id>                          (quotas, SCRAM credentials: see
    /config/changes/config_change_<n>             ads.metadata.zk_entity_configs)
    /admin/delete_topics/<topic>                  a topic to delete (the controller does it)
    /latest_producer_id_block                     the last producer id block handed out

Only encoding and decoding live here: no ZooKeeper client.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ads.metadata.model import (
    BrokerEndpoint,
    ListenerEndpoint,
    decode_topic_id,
    encode_topic_id,
)

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Made at start-up by every broker, as Kafka's persistent paths are.
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, CONFIG_TOPICS, "/config/changes", DELETE_TOPICS,
                    "/isr_change_notification")


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS}/{node_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _dump(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _load(raw: bytes) -> Any:  # parsed JSON
    return json.loads(raw.decode())


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# -- /cluster/id --------------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(raw: bytes) -> str:
    return str(_load(raw)["id"])


# -- /controller and /controller_epoch ----------------------------------------------------
def encode_controller(node_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": node_id, "timestamp": _now_ms()})


def decode_controller(raw: bytes | None) -> int:
    """The controller's broker id, -1 when there is none."""
    if not raw:
        return -1
    return int(_load(raw)["brokerid"])


def encode_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_epoch(raw: bytes) -> int:
    return int(raw.decode())


# -- /brokers/ids/<id> --------------------------------------------------------------------
def encode_broker(endpoint: BrokerEndpoint) -> bytes:
    """Kafka's v5 registration: every advertised listener in `endpoints` with its security
    protocol in `listener_security_protocol_map`; `host` and `port` name the PLAINTEXT one
    (null and -1 without one), for tools that predate listeners."""
    listeners = endpoint.endpoints or (
        ListenerEndpoint("PLAINTEXT", "PLAINTEXT", endpoint.host, endpoint.port),)
    plain = next((e for e in listeners if e.security_protocol == "PLAINTEXT"), None)
    return _dump({"version": 5, "host": plain.host if plain else None,
                  "port": plain.port if plain else -1, "jmx_port": -1,
                  "timestamp": _now_ms(), "endpoints": [e.url for e in listeners],
                  "listener_security_protocol_map": {e.listener_name: e.security_protocol
                                                     for e in listeners},
                  "rack": endpoint.rack, "features": {}})


def decode_broker(node_id: int, raw: bytes) -> BrokerEndpoint:
    data = _load(raw)
    protocols = data.get("listener_security_protocol_map") or {}
    listeners: list[ListenerEndpoint] = []
    for url in data.get("endpoints", []):
        name, _, address = str(url).partition("://")
        host, _, port = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        # Before the map (registration v1), the listener name was the protocol's.
        listeners.append(ListenerEndpoint(name, str(protocols.get(name, name)), host,
                                          int(port)))
    if not listeners and data.get("host"):
        listeners.append(ListenerEndpoint("PLAINTEXT", "PLAINTEXT", str(data["host"]),
                                          int(data.get("port", -1))))
    first = listeners[0] if listeners else ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "", -1)
    rack = data.get("rack")
    return BrokerEndpoint(node_id, first.host, first.port, str(rack) if rack else None,
                          tuple(listeners))


# -- /brokers/topics/<topic> --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic_id: uuid.UUID
    replicas: dict[int, list[int]]  # partition -> replica broker ids, preferred leader first
    # Partitions being reassigned (KIP-455): the replicas joining and leaving. `replicas`
    # then holds both: the target first, then the leaving ones.
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


def encode_assignment(a: TopicAssignment) -> bytes:
    return _dump({"version": 3, "topic_id": encode_topic_id(a.topic_id),
                  "partitions": {str(p): r for p, r in sorted(a.replicas.items())},
                  "adding_replicas": {str(p): r for p, r in sorted(a.adding.items()) if r},
                  "removing_replicas": {str(p): r for p, r in sorted(a.removing.items()) if r}})


def decode_assignment(raw: bytes) -> TopicAssignment:
    data = _load(raw)
    text = data.get("topic_id")
    # A topic written by an old tool has no id: derive a stable one from nothing random.
    topic_id = decode_topic_id(str(text)) if text else uuid.UUID(int=0)
    replicas = {int(p): [int(b) for b in r] for p, r in data["partitions"].items()}
    adding = {int(p): [int(b) for b in r]
              for p, r in (data.get("adding_replicas") or {}).items() if r}
    removing = {int(p): [int(b) for b in r]
                for p, r in (data.get("removing_replicas") or {}).items() if r}
    return TopicAssignment(topic_id, replicas, adding, removing)


# -- /brokers/topics/<topic>/partitions/<p>/state -----------------------------------------
@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int


def encode_state(s: LeaderAndIsr) -> bytes:
    return _dump({"controller_epoch": s.controller_epoch, "leader": s.leader, "version": 1,
                  "leader_epoch": s.leader_epoch, "isr": s.isr})


def decode_state(raw: bytes) -> LeaderAndIsr:
    data = _load(raw)
    return LeaderAndIsr(int(data["leader"]), int(data["leader_epoch"]),
                        [int(b) for b in data["isr"]], int(data["controller_epoch"]))


# -- /config/topics/<topic> ---------------------------------------------------------------
def encode_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": configs})


def decode_config(raw: bytes | None) -> dict[str, str]:
    if not raw:
        return {}
    return {str(k): str(v) for k, v in _load(raw).get("config", {}).items()}


# -- /latest_producer_id_block ------------------------------------------------------------
def encode_producer_id_block(node_id: int, start: int, end: int) -> bytes:
    """Kafka's format: `block_end` is the last id of the block (inclusive)."""
    return _dump({"version": 1, "broker": node_id, "block_start": str(start),
                  "block_end": str(end - 1)})


def decode_producer_id_block_end(raw: bytes | None) -> int:
    """The first id after the last block handed out (0 when none was)."""
    if not raw:
        return 0
    return int(_load(raw)["block_end"]) + 1
