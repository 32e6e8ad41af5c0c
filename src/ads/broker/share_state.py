"""How a share-partition leader reaches the share coordinator of its share-partitions.

`ShareStatePersister` (Kafka's "persister") reads, initializes and writes the durable state
of one share-partition with the share coordinator that serves its key: the leader of the
key's `__share_group_state` partition (`abs(java hash("groupId:topicId:partition")) %
share.coordinator.state.topic.num.partitions`). When that is this broker the share
coordinator is called directly; otherwise with ReadShareGroupState v0,
InitializeShareGroupState v0, WriteShareGroupState v0 or DeleteShareGroupState v0 (for
DeleteGroups, `delete_group`) over one kept connection to that
broker (`PeerConnections`, as markers and KIP-890 verifications go). The topic is created
on first use, as FindCoordinator creates the other internal topics.

Retries: a coordinator that cannot answer yet (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, a broker that cannot be reached: the key's partition is moving
after a broker was lost) is asked again, wherever the metadata says it is then, with a
backoff, for up to `RETRY_S`; then its error is returned. Fencing errors are returned at
once. Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ads.broker.peer_connections import NetClientError, PeerConnections, error_code
from ads.broker.share_partitions import PersistedState
from ads.common.partitions import TopicPartition
from ads.coordinator.share.records import ShareKey, StateBatch
from ads.coordinator.share.shard import WriteRequest
from ads.protocol import messages as m
from ads.protocol.base import Message
from ads.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext

log = logging.getLogger("ads.broker.share")

RETRY_S = 20.0
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)
_REQUEST_TIMEOUT_S = 15.0
_PURPOSE = "share-state"
# An error, and what was read (ReadShareGroupState) or None.
Reply = tuple[ErrorCode, object]
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE})



class ShareStatePersister:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self._peers = PeerConnections(lambda: broker.inter_broker, _REQUEST_TIMEOUT_S)

    def _key(self, group_id: str, tp: TopicPartition) -> ShareKey | ErrorCode:
        state = self.broker.metadata.topics.get(tp.topic)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ShareKey(group_id, state.topic_id, tp.partition)

    async def _node(self, key: ShareKey) -> int:
        """The broker serving the key's state (-1: none now); creates the topic first."""
        coordinator = self.broker.share_coordinator
        topic = coordinator.topic
        if not topic.ready():
            try:
                await topic.create()
            except Exception as exc:  # retried: the topic's creation may race another's
                log.info("creating %s failed: %s", topic.name, exc)
                return -1
        state = self.broker.metadata.topics.get(topic.name)
        if state is None:
            return -1
        return state.partitions[coordinator.partition_of(key)].leader

    async def _ask(self, key: ShareKey, local: Callable[[], Awaitable[Reply]],
                   remote: Callable[[int], Awaitable[Reply]]) -> Reply:
        """`local()` when this broker serves the key's state, else `remote(node)`; asked
        again while the coordinator cannot answer (see the header)."""
        deadline = time.monotonic() + RETRY_S
        attempt = 0
        while True:
            node = await self._node(key)
            if node < 0:
                error, result = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            elif node == self.broker.node_id:
                error, result = await local()
            else:
                error, result = await remote(node)
            if error not in RETRIABLE or time.monotonic() >= deadline:
                return error, result
            await asyncio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1

    async def _remote(self, node: int, api_key: m.ApiKey, body: Message) -> Message | None:
        try:
            return await self._peers.request(node, _PURPOSE, api_key, 0, body)
        except NetClientError as exc:
            log.info("share state request to broker %d failed: %s", node, exc)
            return None

    # -- read ------------------------------------------------------------------------
    async def read(self, group_id: str, tp: TopicPartition, leader_epoch: int
                   ) -> PersistedState | None | ErrorCode:
        """The share-partition's state (None: none written yet), or the error."""
        key = self._key(group_id, tp)
        if isinstance(key, ErrorCode):
            return key

        async def local() -> Reply:
            answer = self.broker.share_coordinator.read(key, leader_epoch)
            state = answer.state
            return answer.error, None if state is None else PersistedState(
                state.state_epoch, state.start_offset, state.batches)

        error, state = await self._ask(key, local, lambda node: self._read_remote(
            node, key, leader_epoch))
        if error is not ErrorCode.NONE:
            return error
        return state if isinstance(state, PersistedState) else None

    async def _read_remote(self, node: int, key: ShareKey, leader_epoch: int
                           ) -> Reply:
        Q = m.ReadShareGroupStateRequest  # noqa: N806
        r = await self._remote(node, m.ApiKey.READ_SHARE_GROUP_STATE, Q(
            group_id=key.group_id, topics=[Q.ReadStateData(topic_id=key.topic_id, partitions=[
                Q.ReadStateData.PartitionData(partition=key.partition,
                                              leader_epoch=leader_epoch)])]))
        if not isinstance(r, m.ReadShareGroupStateResponse) or not r.results or not (
                r.results[0].partitions):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        p = r.results[0].partitions[0]
        error = error_code(p.error_code)
        if error is not ErrorCode.NONE or p.start_offset < 0:
            return error, None
        batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                   b.delivery_count) for b in p.state_batches)
        return error, PersistedState(p.state_epoch, p.start_offset, batches)

    # -- summary (DescribeShareGroupOffsets) -----------------------------------------
    async def summary(self, group_id: str, tp: TopicPartition) -> tuple[int, int] | ErrorCode:
        """(start offset, leader epoch) of the share-partition's state, (-1, -1) when it
        has none; the error when the coordinator cannot say."""
        found = await self._summary(group_id, tp)
        return found if isinstance(found, ErrorCode) else found[:2]

    async def _summary(self, group_id: str, tp: TopicPartition
                       ) -> tuple[int, int, int] | ErrorCode:
        """(start offset, leader epoch, state epoch), (-1, -1, -1) without state."""
        key = self._key(group_id, tp)
        if isinstance(key, ErrorCode):
            return key

        async def local() -> Reply:
            answer = self.broker.share_coordinator.summary(key)
            state = answer.state
            return answer.error, None if state is None else (
                state.start_offset, state.leader_epoch, state.state_epoch)

        async def remote(node: int) -> Reply:
            Q = m.ReadShareGroupStateSummaryRequest  # noqa: N806
            r = await self._remote(node, m.ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, Q(
                group_id=key.group_id, topics=[Q.ReadStateSummaryData(
                    topic_id=key.topic_id, partitions=[Q.ReadStateSummaryData.PartitionData(
                        partition=key.partition, leader_epoch=-1)])]))
            if not isinstance(r, m.ReadShareGroupStateSummaryResponse) or not r.results or not (
                    r.results[0].partitions):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            p = r.results[0].partitions[0]
            if p.start_offset < 0:
                return error_code(p.error_code), None
            return error_code(p.error_code), (p.start_offset, p.leader_epoch, p.state_epoch)

        error, found = await self._ask(key, local, remote)
        if error is not ErrorCode.NONE:
            return error
        return found if isinstance(found, tuple) else (-1, -1, -1)

    # -- reset (AlterShareGroupOffsets) ----------------------------------------------
    async def reset(self, group_id: str, tp: TopicPartition, start_offset: int) -> ErrorCode:
        """Starts the share-partition over at `start_offset`, under a state epoch above
        the recorded one: a leader still holding the former state is fenced at its next
        write (FENCED_STATE_EPOCH) and reads the new one."""
        found = await self._summary(group_id, tp)
        if isinstance(found, ErrorCode):
            return found
        return await self.initialize(group_id, tp, found[2] + 1, start_offset)

    # -- initialize ------------------------------------------------------------------
    async def initialize(self, group_id: str, tp: TopicPartition, state_epoch: int,
                         start_offset: int) -> ErrorCode:
        key = self._key(group_id, tp)
        if isinstance(key, ErrorCode):
            return key

        async def local() -> Reply:
            answer = await self.broker.share_coordinator.initialize(key, state_epoch,
                                                                    start_offset)
            return answer.error, None

        async def remote(node: int) -> Reply:
            Q = m.InitializeShareGroupStateRequest  # noqa: N806
            r = await self._remote(node, m.ApiKey.INITIALIZE_SHARE_GROUP_STATE, Q(
                group_id=key.group_id, topics=[Q.InitializeStateData(
                    topic_id=key.topic_id, partitions=[Q.InitializeStateData.PartitionData(
                        partition=key.partition, state_epoch=state_epoch,
                        start_offset=start_offset)])]))
            if not isinstance(r, m.InitializeShareGroupStateResponse) or not r.results:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            return error_code(r.results[0].partitions[0].error_code), None

        return (await self._ask(key, local, remote))[0]

    # -- write -----------------------------------------------------------------------
    async def write(self, group_id: str, tp: TopicPartition, state_epoch: int,
                    leader_epoch: int, start_offset: int,
                    batches: list[tuple[int, int, int, int]]) -> ErrorCode:
        """Writes the state batches an acknowledgement or a release made (with the start
        offset); NONE once the share coordinator has them committed."""
        key = self._key(group_id, tp)
        if isinstance(key, ErrorCode):
            return key
        req = WriteRequest(key, state_epoch, leader_epoch, start_offset,
                           tuple(StateBatch(*b) for b in batches))

        async def local() -> Reply:
            return (await self.broker.share_coordinator.write(req)).error, None

        async def remote(node: int) -> Reply:
            return await self._write_remote(node, req), None

        return (await self._ask(key, local, remote))[0]

    async def _write_remote(self, node: int, req: WriteRequest) -> ErrorCode:
        Q = m.WriteShareGroupStateRequest  # noqa: N806
        P = Q.WriteStateData.PartitionData  # noqa: N806
        key = req.key
        r = await self._remote(node, m.ApiKey.WRITE_SHARE_GROUP_STATE, Q(
            group_id=key.group_id, topics=[Q.WriteStateData(topic_id=key.topic_id, partitions=[
                P(partition=key.partition, state_epoch=req.state_epoch,
                  leader_epoch=req.leader_epoch, start_offset=req.start_offset,
                  state_batches=[P.StateBatch(
                      first_offset=b.first, last_offset=b.last, delivery_state=b.state,
                      delivery_count=b.delivery_count) for b in req.batches])])]))
        if not isinstance(r, m.WriteShareGroupStateResponse) or not r.results:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return error_code(r.results[0].partitions[0].error_code)

    # -- delete ----------------------------------------------------------------------
    async def delete_group(self, group_id: str) -> ErrorCode:
        """Deletes the state of every share-partition of the group (DeleteGroups of a share
        group). Which partitions have state is not recorded: every partition of every topic
        is named (see `delete`)."""
        return await self.delete(group_id, [
            t.name for t in list(self.broker.metadata.topics.values()) if not t.is_internal])

    async def delete(self, group_id: str, topics: list[str]) -> ErrorCode:
        """Deletes the state of the group's share-partitions of `topics`, every partition
        of each, grouped by the broker serving its key (one DeleteShareGroupState each); a
        share-partition without state costs no write. NONE, or the first error."""
        coordinator = self.broker.share_coordinator
        if self.broker.metadata.topics.get(coordinator.topic.name) is None:
            return ErrorCode.NONE  # no state was ever written
        by_node: dict[int, list[ShareKey]] = {}
        for name in topics:
            topic = self.broker.metadata.topics.get(name)
            if topic is None:
                continue
            for index in range(len(topic.partitions)):
                key = ShareKey(group_id, topic.topic_id, index)
                by_node.setdefault(await self._node(key), []).append(key)
        if -1 in by_node:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        errors = await asyncio.gather(*(self._delete_on(node, keys)
                                        for node, keys in by_node.items()))
        return next((e for e in errors if e is not ErrorCode.NONE), ErrorCode.NONE)

    async def _delete_on(self, node: int, keys: list[ShareKey]) -> ErrorCode:
        if node == self.broker.node_id:
            coordinator = self.broker.share_coordinator
            answers = await asyncio.gather(*(coordinator.delete(k) for k in keys))
            errors = [a.error for a in answers]
        else:
            Q = m.DeleteShareGroupStateRequest  # noqa: N806
            by_topic: dict[uuid.UUID, list[int]] = {}
            for k in keys:
                by_topic.setdefault(k.topic_id, []).append(k.partition)
            r = await self._remote(node, m.ApiKey.DELETE_SHARE_GROUP_STATE, Q(
                group_id=keys[0].group_id, topics=[Q.DeleteStateData(topic_id=t, partitions=[
                    Q.DeleteStateData.PartitionData(partition=p) for p in ps])
                    for t, ps in by_topic.items()]))
            if not isinstance(r, m.DeleteShareGroupStateResponse):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            errors = [error_code(p.error_code) for t in r.results for p in t.partitions]
        failed = [e for e in errors if e not in (ErrorCode.NONE,
                                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        if not failed:
            return ErrorCode.NONE
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if failed[0] in RETRIABLE else failed[0]

    async def close(self) -> None:
        await self._peers.close()
