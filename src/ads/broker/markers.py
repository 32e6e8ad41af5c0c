"""Writing transaction markers where the transaction's partitions are led.

`BrokerMarkerWriter` is the transaction coordinator's `MarkerWriter`. For each partition of
a transaction it finds the leader in the metadata: a partition led here gets its marker
through the replica manager's one append path (`write_local`, which WriteTxnMarkers uses
too), a partition led by another broker through one WriteTxnMarkers request per broker over
an outbound connection (`ads.net.client`, kept per broker and made again after a failure).
A marker is written as acks=all, like client data: `min.insync.replicas` (capped at the
partition's replicas, as in Kafka 4) is checked and
the write counts only once the high watermark passes it, so a leader lost before its
followers copied the marker cannot take the transaction's end with it (the coordinator
writes COMPLETE_* only after every marker is committed). A marker for a
`__consumer_offsets` partition is written by the group coordinator's runtime
(`complete_transaction`), which replays it into the partition's shard once committed (the
transaction's offsets count or go) and refuses it while the shard loads, as a partition not
led here: the sender tries again.

Errors: a deleted partition (UNKNOWN_TOPIC_OR_PARTITION) counts as done, as in Kafka; a
partition without a live leader, a leader that moved (NOT_LEADER_OR_FOLLOWER), too few
in-sync replicas (NOT_ENOUGH_REPLICAS), a marker not committed within
`MARKER_COMMIT_TIMEOUT_MS` (REQUEST_TIMED_OUT) or a broker that cannot be reached are
returned as failed, and the coordinator sends them again to whoever leads then.

The same connections carry KIP-890 verifications (`verify`, for `txn_verify`): a partition
leader asks a transaction coordinator on another broker whether a transactional write
belongs to the ongoing transaction. Used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ads.broker.peer_connections import NetClientError, PeerConnections, error_code
from ads.common.partitions import TopicPartition
from ads.coordinator.group.records import OFFSETS_TOPIC
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import ControlRecordType, build_control_batch
from ads.replication.partition import AppendOrigin

if TYPE_CHECKING:
    from ads.broker.context import BrokerContext

log = logging.getLogger("ads.broker.markers")

WRITE_TXN_MARKERS_VERSION = 1
VERIFY_VERSION = 4  # AddPartitionsToTxn, the first version with verify_only
_REQUEST_TIMEOUT_S = 30.0
# How long a marker may wait to be committed before its write is answered as failed and
# sent again; well inside the sender's request timeout.
MARKER_COMMIT_TIMEOUT_MS = 10_000
_MARKERS, _VERIFY = "markers", "verify"  # the two purposes of connections to a broker


def by_topics(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition indexes grouped by topic, as the requests carry them."""
    grouped: dict[str, list[int]] = {}
    for topic, index in partitions:
        grouped.setdefault(topic, []).append(index)
    return grouped



async def write_local(broker: BrokerContext, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int, partitions: list[TopicPartition]
                      ) -> dict[TopicPartition, ErrorCode]:
    """Writes one marker to partitions led here as acks=all and waits until it is
    committed; returns the error of each partition that failed. A `__consumer_offsets`
    partition's marker is a write of the group coordinator's shard, which replays it."""
    data = [tp for tp in partitions if tp.topic != OFFSETS_TOPIC]
    offsets = [tp for tp in partitions if tp.topic == OFFSETS_TOPIC]
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch,
                                timestamp=broker.clock.time_ms())
    appended = broker.replica_manager.append_records(
        dict.fromkeys(data, batch), AppendOrigin.COORDINATOR, -1, MARKER_COMMIT_TIMEOUT_MS)
    completions = asyncio.gather(*(broker.group_coordinator.complete_transaction(
        tp.partition, producer_id, producer_epoch, commit, coordinator_epoch) for tp in offsets))
    errors = await appended.committed()  # the completions run meanwhile
    offsets_errors = await completions
    errors.update((tp, e) for tp, e in zip(offsets, offsets_errors, strict=True)
                  if e is not ErrorCode.NONE)
    for (topic, index), error in errors.items():
        if error is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            log.info("marker of producer %d on %s-%d not committed: %s", producer_id, topic,
                     index, error.name)
    return errors


class BrokerMarkerWriter:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        # A marker waits until it is committed (up to MARKER_COMMIT_TIMEOUT_MS), which a
        # produce's verification must not wait behind: one connection per purpose.
        self._peers = PeerConnections(lambda: broker.inter_broker, _REQUEST_TIMEOUT_S)

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: set[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        failed: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        broker = self.broker
        for tp in sorted(partitions):
            topic, index = tp
            state = broker.metadata.topics.get(topic)
            if state is None or not 0 <= index < len(state.partitions):
                continue  # deleted: nothing to end there
            leader = state.partitions[index].leader
            if leader < 0:
                failed[tp] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                by_leader.setdefault(leader, []).append(tp)
        # Every leader at once: each answers when its markers are committed.
        sends = [write_local(broker, producer_id, producer_epoch, commit, coordinator_epoch,
                             parts) if node == broker.node_id
                 else self._send(node, producer_id, producer_epoch, commit, coordinator_epoch,
                                 parts)
                 for node, parts in by_leader.items()]
        for errors in await asyncio.gather(*sends):
            failed.update(errors)
        return {p: e for p, e in failed.items() if e is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    async def _send(self, node: int, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, parts: list[TopicPartition]
                    ) -> dict[TopicPartition, ErrorCode]:
        by_topic = by_topics(parts)
        M = m.WriteTxnMarkersRequest.WritableTxnMarker  # noqa: N806
        request = m.WriteTxnMarkersRequest(markers=[M(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=p)
                    for t, p in by_topic.items()])])
        try:
            response = await self._peers.request(node, _MARKERS, m.ApiKey.WRITE_TXN_MARKERS,
                                                 WRITE_TXN_MARKERS_VERSION, request)
        except NetClientError as exc:
            log.warning("sending markers to broker %d failed: %s", node, exc)
            return dict.fromkeys(parts, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert isinstance(response, m.WriteTxnMarkersResponse)
        failed: dict[TopicPartition, ErrorCode] = {}
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    code = error_code(p.error_code)
                    if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        failed[TopicPartition(t.name, p.partition_index)] = code
        return failed

    async def verify(self, txn_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1 (`txn_verify`): asks the coordinator of `txn_id` on its broker,
        with AddPartitionsToTxn v4 `verify_only`, whether each partition belongs to the
        ongoing transaction; a coordinator that cannot be asked: COORDINATOR_NOT_AVAILABLE."""
        unavailable = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        coordinator = self.broker.transaction_coordinator
        state = self.broker.metadata.topics.get(coordinator.topic.name)
        if state is None:
            return unavailable
        node = state.partitions[coordinator.partition_of(txn_id)].leader
        by_topic = by_topics(partitions)
        T = m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction  # noqa: N806
        request = m.AddPartitionsToTxnRequest(transactions=[T(
            transactional_id=txn_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                name=t, partitions=p) for t, p in by_topic.items()])])
        try:
            response = await self._peers.request(node, _VERIFY, m.ApiKey.ADD_PARTITIONS_TO_TXN,
                                                 VERIFY_VERSION, request)
        except NetClientError as exc:
            log.warning("verifying a transaction with broker %d failed: %s", node, exc)
            return unavailable
        assert isinstance(response, m.AddPartitionsToTxnResponse)
        found = dict(unavailable)
        for result in response.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    found[TopicPartition(t.name, p.partition_index)] = error_code(
                        p.partition_error_code)
        return found

    async def close(self) -> None:
        await self._peers.close()
