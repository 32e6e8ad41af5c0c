"""Controlled shutdown: before a cluster broker stops, the controller moves the leadership
of its replicated partitions to other live ISR members.

As Kafka's brokers do in ZooKeeper mode, the broker sends the ControlledShutdown request
(v3: node id and broker epoch) to the controller named in its metadata, over an outbound
connection (`ads.net.client`), while its own listener still serves. The answer lists the
replicated partitions it still leads; until that list is empty it asks again, up to
`controlled.shutdown.max.retries` attempts `controlled.shutdown.retry.backoff.ms` apart
(a controller that moved, or a connection that failed, counts as an attempt). Then it waits
a moment for its own view of the partition states to show the leaders gone, so clients
still connected get NOT_LEADER_OR_FOLLOWER naming the new leader, and stops either way.
Partitions with one replica have nowhere to go: they go offline when the broker's session
ends, as before.
"""

from __future__ import annotations

import asyncio
import logging

from ads.broker.config import BrokerConfig
from ads.broker.listeners import InterBroker
from ads.metadata.store import MetadataStore
from ads.net.client import NetClientError
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.broker.shutdown")
VERSION = 3
# How long the stopping broker waits to see the new leaders it was told of.
SEE_MOVES_S = 5.0


def _leads_replicated(metadata: MetadataStore, node_id: int) -> bool:
    return any(p.leader == node_id and len(p.replicas) > 1
               for t in metadata.topics.values() for p in t.partitions)


async def controlled_shutdown(config: BrokerConfig, metadata: MetadataStore, node_id: int,
                              broker_epoch: int, inter_broker: InterBroker) -> bool:
    """Asks the controller to move this broker's leaderships; True when none is left."""
    attempts = max(config.get_int("controlled.shutdown.max.retries"), 0)
    backoff_s = max(config.get_int("controlled.shutdown.retry.backoff.ms"), 0) / 1000.0
    timeout_s = max(config.get_int("controller.socket.timeout.ms"), 1) / 1000.0
    log.info("starting controlled shutdown")
    for attempt in range(1, attempts + 1):
        if await _attempt(metadata, node_id, broker_epoch, timeout_s, inter_broker):
            await metadata.wait(lambda: not _leads_replicated(metadata, node_id), SEE_MOVES_S)
            log.info("controlled shutdown succeeded")
            return True
        if attempt < attempts:
            await asyncio.sleep(backoff_s)
            log.info("retrying controlled shutdown (%d attempts left)", attempts - attempt)
    log.warning("controlled shutdown did not move every leadership after %d attempts; "
                "stopping anyway", attempts)
    return False


async def _attempt(metadata: MetadataStore, node_id: int, broker_epoch: int,
                   timeout_s: float, inter_broker: InterBroker) -> bool:
    if metadata.controller_id not in metadata.brokers:
        log.info("controlled shutdown: no controller known")
        return False
    try:
        conn = await inter_broker.connect(metadata.controller_id, connect_timeout_s=timeout_s,
                                          request_timeout_s=timeout_s)
    except NetClientError as exc:
        log.info("controlled shutdown: %s", exc)
        return False
    try:
        resp = await conn.request(m.ApiKey.CONTROLLED_SHUTDOWN, VERSION,
                                  m.ControlledShutdownRequest(broker_id=node_id,
                                                              broker_epoch=broker_epoch))
    except NetClientError as exc:
        log.info("controlled shutdown: %s", exc)
        return False
    finally:
        await conn.close()
    assert isinstance(resp, m.ControlledShutdownResponse)
    if resp.error_code != ErrorCode.NONE:
        log.info("controlled shutdown: controller %d answered %s", metadata.controller_id,
                 ErrorCode(resp.error_code).name)
        return False
    if resp.remaining_partitions:
        log.info("controlled shutdown: %d partitions remain led here (%s)",
                 len(resp.remaining_partitions),
                 ", ".join(f"{r.topic_name}-{r.partition_index}"
                           for r in resp.remaining_partitions[:10]))
        return False
    return True
